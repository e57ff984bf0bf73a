"""Protobuf schemas for the registry (Confluent's schemaType "PROTOBUF").

A client registers either .proto text (KafkaJS, franz-go, the Java serializers) or the base64 of a
serialized FileDescriptorProto (confluent-kafka's Python ``ProtobufSerializer``). Both are compiled
by protoc (``compiler``) with the references as imports, named by their import paths; the
well-known ``google/protobuf`` files resolve without a reference, as Confluent's registry resolves
them. The compiled descriptor is the schema:

- ``printer``: the descriptor as .proto text in Confluent's canonical layout (what the registry
  stores and returns) and its normalized form;
- ``compat``: Confluent's compatibility rules between two descriptors.

Imported only when a registry parses a Protobuf schema: a broker without one never loads protobuf.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import Mapping

from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError

from kbroker.schema_registry.formats import InvalidSchema
from kbroker.schema_registry.formats.protobuf import compat
from kbroker.schema_registry.formats.protobuf.compiler import compile_files
from kbroker.schema_registry.formats.protobuf.printer import OptionDecoder, print_file

# Confluent's name for the registered file itself (ProtobufSchema.DEFAULT_NAME); confluent-kafka's
# deserializer renames the descriptor it receives to it as well.
MAIN_FILE = "default"
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")


class ProtobufSchema:
    schema_type = "PROTOBUF"

    def __init__(self, file, files, imports: Mapping[str, str], canonical: str | None = None):
        self.file: descriptor_pb2.FileDescriptorProto = file
        self.files: dict[str, descriptor_pb2.FileDescriptorProto] = files
        self.imports = dict(imports)  # import path -> its .proto text (a base64 reference printed)
        self._decoder = OptionDecoder(files[name] for name in _dependency_order(file, files))
        self._canonical = canonical if canonical is not None else print_file(file, self._decoder)

    def canonical(self) -> str:
        return self._canonical

    def normalized(self) -> "ProtobufSchema":
        text = print_file(self.file, self._decoder, normalize=True)
        normal = _compile(text, self.imports)
        return ProtobufSchema(normal.file, normal.files, self.imports, canonical=text)

    def formatted(self, name: str) -> str | None:
        if name in ("", "default"):
            return self._canonical
        if name == "ignore_extensions":
            return print_file(self.file, self._decoder, ignore_extensions=True)
        if name == "serialized":
            return base64.standard_b64encode(self.file.SerializeToString()).decode("ascii")
        return None

    def is_backward_compatible(self, previous) -> list[str]:
        if getattr(previous, "schema_type", None) != self.schema_type:
            return ["Incompatible because of different schema type"]
        found = compat.differences(previous._side(), self._side())
        return [d.message() for d in found if d.type not in compat.COMPATIBLE]

    def _side(self) -> compat.Side:
        imports = {}
        for name, file in self.files.items():
            if name == self.file.name:
                continue
            text = self.imports.get(name)
            origin = (name, hashlib.sha256(text.encode()).hexdigest() if text is not None else None)
            imports[name] = (file, origin)
        return compat.side(self.file, imports)

    def __repr__(self) -> str:
        return f"ProtobufSchema({self._canonical!r})"


def parse(text: str, references: Mapping[str, str]) -> ProtobufSchema:
    """Parse .proto text or a base64 FileDescriptorProto; ``references``: import path -> its text."""
    try:
        texts: dict[str, str] = {}
        for name, reference in references.items():
            texts[name] = _as_proto_text(reference, texts)
        return _compile(_as_proto_text(text, texts), texts)
    except InvalidSchema as invalid:
        raise InvalidSchema(f"Invalid schema {text}, details: {invalid}") from None


def _compile(text: str, imports: Mapping[str, str]) -> ProtobufSchema:
    main = MAIN_FILE
    while main in imports:
        main = "_" + main
    files = compile_files(main, {**imports, main: text})
    return ProtobufSchema(files[main], files, imports)


def _as_proto_text(text: str, imports: Mapping[str, str]) -> str:
    """A base64 FileDescriptorProto printed as .proto text; .proto text as it is."""
    stripped = text.strip()
    if not stripped:
        raise InvalidSchema("empty Protobuf schema")
    if not _BASE64.fullmatch(stripped):
        return text
    try:
        file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(stripped, validate=True))
    except (binascii.Error, DecodeError, ValueError):
        return text  # not a descriptor: protoc reports what is wrong with it as text
    # The descriptor's custom options are read with the extensions its imports declare.
    probe = "\n".join(f'import "{d}";' for d in file.dependency)
    deps = compile_files("_imports_.proto", {**imports, "_imports_.proto": 'syntax = "proto3";\n' + probe})
    deps.pop("_imports_.proto")
    return print_file(file, OptionDecoder([*deps.values(), file]))


def _dependency_order(file, files) -> list[str]:
    """Every file ``file`` imports, imports first: a descriptor pool takes them in that order."""
    ordered: list[str] = []

    def visit(name: str) -> None:
        if name in ordered or name not in files:
            return
        for dependency in files[name].dependency:
            visit(dependency)
        ordered.append(name)

    visit(file.name)
    return ordered
