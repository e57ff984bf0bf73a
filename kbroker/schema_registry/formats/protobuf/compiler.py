"""protoc in-process: .proto texts in, FileDescriptorProtos out.

The protoc that ships in ``grpcio-tools`` compiles files from disk only, so the texts are written to
a private temporary directory for the length of one compile. ``get_protos`` (the entry point behind
``grpc.protos()``) raises its errors as exceptions, where protoc's ``main`` would print them on the
process's stderr; it returns Python modules as source, and each module carries its file's
serialized FileDescriptorProto as the one bytes literal passed to ``AddSerializedFile`` -- the same
bytes confluent-kafka's ``ProtobufSerializer`` registers (``DESCRIPTOR.serialized_pb``).

Imports resolve against the references, then the well-known types protoc ships
(``google/protobuf/*.proto``), then the files Confluent's registry resolves without a reference as
well: Google's ``google/type/*.proto`` (from googleapis-common-protos) and Confluent's
``confluent/meta.proto`` and ``confluent/type/*.proto`` (kept beside this module in ``known/``).
"""

from __future__ import annotations

import ast
import os
import re
import tempfile
from pathlib import Path
from typing import Mapping

from google.protobuf import descriptor_pb2
from grpc_tools import _protoc_compiler

from kbroker.schema_registry.formats import InvalidSchema

_WELL_KNOWN_DIR = Path(_protoc_compiler.__file__).parent / "_proto"
_KNOWN_DIR = Path(__file__).parent / "known"


def compile_files(main_name: str, texts: Mapping[str, str]) -> dict[str, descriptor_pb2.FileDescriptorProto]:
    """Compile ``texts[main_name]`` with the others as its imports; every file it loaded, by name."""
    with tempfile.TemporaryDirectory(prefix="kbroker-proto-") as root:
        for name, text in texts.items():
            _check_relative(name)
            path = Path(root, name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        _add_google_types(Path(root), texts)
        include = [os.fsencode(root), os.fsencode(_WELL_KNOWN_DIR), os.fsencode(_KNOWN_DIR)]
        try:
            modules = _protoc_compiler.get_protos(main_name.encode(), include)
        except _protoc_compiler.ProtocErrors as errors:
            raise InvalidSchema(_describe(errors, root)) from None
    files = {}
    for _, source in modules:
        file = descriptor_pb2.FileDescriptorProto.FromString(_serialized_descriptor(source))
        files[file.name] = file
    return files


_GOOGLE_TYPE_IMPORT = re.compile(r'import\s+(?:public\s+|weak\s+)?"(google/type/[A-Za-z0-9_]+\.proto)"')


def _add_google_types(root: Path, texts: Mapping[str, str]) -> None:
    """Copy the google/type files the texts import (and those import) into ``root``.

    Only these: putting googleapis-common-protos' whole directory on the include path would let an
    import resolve to any file that happens to sit in site-packages.
    """
    pending = [match for text in texts.values() for match in _GOOGLE_TYPE_IMPORT.findall(text)]
    while pending:
        name = pending.pop()
        target = root / name
        if name in texts or target.exists():
            continue
        source = _google_types_dir() / Path(name).name
        if not source.is_file():
            continue  # protoc reports the import it cannot find
        text = source.read_text(encoding="utf-8")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        pending += _GOOGLE_TYPE_IMPORT.findall(text)


def _google_types_dir() -> Path:
    import google.type

    return Path(google.type.__path__[0])


def _check_relative(name: str) -> None:
    # A reference name becomes a path under the temporary directory: keep it there.
    parts = Path(name).parts
    if not name or Path(name).is_absolute() or ".." in parts:
        raise InvalidSchema(f"invalid reference name {name!r}")


def _describe(errors: _protoc_compiler.ProtocErrors, root: str) -> str:
    lines = []
    for error in errors.errors():
        filename = error.filename.decode(errors="replace").removeprefix(root + os.sep)
        message = error.message.decode(errors="replace")
        # get_protos counts lines and columns from 0; protoc's command line (and editors) from 1
        lines.append(f"{filename}:{error.line + 1}:{error.column + 1}: {message}")
    return "; ".join(lines) or str(errors)


# the bytes literal protoc's Python generator writes (a whole-module ast.parse costs ~100 ms for
# descriptor.proto; this costs microseconds)
_SERIALIZED = re.compile(rb"AddSerializedFile\((b'(?:[^'\\]|\\.)*')\)")


def _serialized_descriptor(module_source: bytes) -> bytes:
    found = _SERIALIZED.search(module_source)
    if found is None:
        raise RuntimeError("protoc's Python output carries no serialized descriptor")
    return ast.literal_eval(found.group(1).decode("ascii"))
