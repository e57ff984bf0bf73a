"""FileDescriptorProto -> .proto text, in the layout of Confluent's ``ProtobufSchema.canonicalString()``.

The registry stores and returns a Protobuf schema as this text, whatever the client sent (text or a
base64 descriptor), so two spellings of one file get one id. The layout is Confluent's: syntax,
package, imports, file options, then messages before enums (message indexes in Confluent's wire
format count messages only, so their order is kept), extensions, services; inside a message:
reserved, options, fields, oneofs, nested messages then nested enums. Map fields print as
``map<K, V>`` and their synthetic entry messages are not printed, as Wire's model has them.

A type name is printed as the shortest dotted suffix of its full name that protoc's scoped lookup
resolves back to the same type (with a leading dot when none does), so the text always compiles
back to the same descriptor.

``ignore_extensions=True`` is Confluent's ``?format=ignore_extensions``: no ``extend`` blocks, no
extension ranges, no custom options but Confluent's own (``confluent.*``).

``normalize=True`` is Confluent's ``?normalize=true`` form: imports sorted, fields, oneofs, enum
constants and reserved ranges by number, option map keys sorted and every type name fully qualified.
"""

from __future__ import annotations

from typing import Iterable

from google.protobuf import descriptor_pb2, text_format
from google.protobuf.descriptor import FieldDescriptor

F = descriptor_pb2.FieldDescriptorProto

_SCALAR_NAMES = {
    F.TYPE_DOUBLE: "double", F.TYPE_FLOAT: "float", F.TYPE_INT64: "int64", F.TYPE_UINT64: "uint64",
    F.TYPE_INT32: "int32", F.TYPE_FIXED64: "fixed64", F.TYPE_FIXED32: "fixed32",
    F.TYPE_BOOL: "bool", F.TYPE_STRING: "string", F.TYPE_BYTES: "bytes",
    F.TYPE_UINT32: "uint32", F.TYPE_SFIXED32: "sfixed32", F.TYPE_SFIXED64: "sfixed64",
    F.TYPE_SINT32: "sint32", F.TYPE_SINT64: "sint64",
}
_LABELS = {F.LABEL_OPTIONAL: "optional", F.LABEL_REQUIRED: "required", F.LABEL_REPEATED: "repeated"}
_MAX_FIELD_NUMBER = 536870911


def scalar_name(field_type: int) -> str | None:
    return _SCALAR_NAMES.get(field_type)


class OptionDecoder:
    """Reads option messages with the custom options (extensions) the file and its imports define.

    protoc's descriptors carry a custom option as an unknown field of e.g. FieldOptions; parsed
    again with FieldOptions from a pool holding the files, the option has its name and type.
    """

    def __init__(self, files: Iterable[descriptor_pb2.FileDescriptorProto]):
        from google.protobuf import descriptor_pool, message_factory

        files = list(files)

        self._pool = descriptor_pool.DescriptorPool()
        self._pool.AddSerializedFile(descriptor_pb2.DESCRIPTOR.serialized_pb)
        for file in files:
            if file.name != "google/protobuf/descriptor.proto":
                self._pool.AddSerializedFile(file.SerializeToString())
        self._classes = {}
        self._factory = message_factory
        self.files = list(files)

    def options(self, message) -> list[tuple[FieldDescriptor, object]]:
        if not message.ByteSize():
            return []
        name = message.DESCRIPTOR.full_name
        cls = self._classes.get(name)
        if cls is None:
            cls = self._factory.GetMessageClass(self._pool.FindMessageTypeByName(name))
            self._classes[name] = cls
        return cls.FromString(message.SerializeToString()).ListFields()


class Printer:
    def __init__(self, file: descriptor_pb2.FileDescriptorProto, decoder: OptionDecoder, normalize: bool = False,
                 ignore_extensions: bool = False):
        self.file = file
        self.decoder = decoder
        self.normalize = normalize
        self.ignore_extensions = ignore_extensions
        self.package = file.package
        self._symbol_set: set[str] | None = None

    # -- the file ---------------------------------------------------------------------------------

    def print_file(self) -> str:
        file = self.file
        out = []
        if file.syntax == "editions":
            out.append(f'edition = "{_edition_name(file.edition)}";\n')
        elif file.syntax == "proto3" or not self.normalize:
            out.append(f'syntax = "{file.syntax or "proto2"}";\n')
        if file.package:
            out.append(f"package {file.package};\n")
        public = {file.dependency[i] for i in file.public_dependency}
        weak = {file.dependency[i] for i in file.weak_dependency}
        imports = [d for d in file.dependency if d not in public and d not in weak]
        weak_imports = [d for d in file.dependency if d in weak]
        public_imports = [d for d in file.dependency if d in public]
        if self.normalize:
            imports, weak_imports, public_imports = (sorted(set(i)) for i in (imports, weak_imports, public_imports))
        if file.dependency:
            out.append("\n")
            out += [f'import "{d}";\n' for d in imports]
            out += [f'import weak "{d}";\n' for d in weak_imports]
            out += [f'import public "{d}";\n' for d in public_imports]
        options = self._options(file.options)
        if options:
            out.append("\n")
            out += [f"option {o};\n" for o in options]
        scope = [file.package] if file.package else []
        types = [self._message(m, scope) for m in file.message_type]
        types += [self._enum(e) for e in file.enum_type]
        if types:
            out.append("\n")
            out += types
        if file.extension and not self.ignore_extensions:
            out.append("\n")
            out += self._extends(file.extension, scope)
        if file.service:
            out.append("\n")
            out += [self._service(s, scope) for s in file.service]
        return "".join(out)

    # -- messages ---------------------------------------------------------------------------------

    def _message(self, message: descriptor_pb2.DescriptorProto, scope: list[str]) -> str:
        inner_scope = scope + [message.name]
        nested_by_name = {f"{'.'.join(inner_scope)}.{n.name}": n for n in message.nested_type}
        maps = {name for name, n in nested_by_name.items() if n.options.map_entry}
        groups = {"." + f.type_name.lstrip(".") for f in message.field if f.type == F.TYPE_GROUP}
        body = []
        body += self._reserved(message.reserved_range, message.reserved_name, end_exclusive=True)
        options = self._options(message.options, skip={"map_entry"})
        if options:
            body.append("\n")
            body += [_indent(f"option {o};\n") for o in options]
        # Fields in declaration order, a oneof where its first member stands: the text compiles
        # back to the same descriptor (Confluent prints all oneofs after the plain fields).
        real_oneofs = _real_oneofs(message)
        entries: list[tuple[int, object]] = []  # (oneof index or -1, field)
        for field in message.field:
            entries.append((field.oneof_index if _in_real_oneof(field, real_oneofs) else -1, field))
        if self.normalize:
            plain = sorted((f for i, f in entries if i < 0), key=lambda f: f.number)
            oneof_order = sorted({i for i, _ in entries if i >= 0},
                                 key=lambda i: min(f.number for j, f in entries if j == i))
            entries = [(-1, f) for f in plain] + [(i, None) for i in oneof_order]
        lines, printed_oneofs = [], set()
        for index, field in entries:
            if index < 0:
                lines.append(_indent(self._field(field, inner_scope, nested_by_name, maps)))
            elif index not in printed_oneofs:
                printed_oneofs.add(index)
                members = [f for i, f in entries if i == index and f is not None]
                if self.normalize or not members:
                    members = sorted((f for f in message.field if f.HasField("oneof_index")
                                      and f.oneof_index == index), key=lambda f: f.number)
                lines.append(_indent(self._oneof(message.oneof_decl[index], members, inner_scope,
                                                 nested_by_name, maps)))
        if lines:
            body.append("\n")
            body += lines
        if message.extension_range and not self.ignore_extensions:
            body.append("\n")
            for r in message.extension_range:
                end = "max" if r.end - 1 >= _MAX_FIELD_NUMBER else str(r.end - 1)
                text = str(r.start) if (self.normalize and r.start == r.end - 1) else f"{r.start} to {end}"
                options = self._options(r.options)
                suffix = f" {_option_list(options)}" if options else ""
                body.append(_indent(f"extensions {text}{suffix};\n"))
        if message.extension and not self.ignore_extensions:
            body.append("\n")
            body += [_indent(e) for e in self._extends(message.extension, inner_scope)]
        nested = [
            n for n in message.nested_type
            if f"{'.'.join(inner_scope)}.{n.name}" not in maps and "." + ".".join(inner_scope + [n.name]) not in groups
        ]
        if nested or message.enum_type:
            body.append("\n")
            body += [_indent(self._message(n, inner_scope)) for n in nested]
            body += [_indent(self._enum(e)) for e in message.enum_type]
        return f"message {message.name} {{" + ("".join(body) if body else "") + "}\n"

    def _oneof(self, decl, members, scope, nested_by_name, maps) -> str:
        lines = [f"option {o};\n" for o in self._options(decl.options)]
        lines += [self._field(f, scope, nested_by_name, maps, in_oneof=True) for f in members]
        return f"oneof {decl.name} {{\n" + "".join(_indent(line) for line in lines) + "}\n"

    def _reserved(self, ranges, names, end_exclusive: bool) -> list[str]:
        if not ranges and not names:
            return []
        items = []
        for r in ranges:
            last = r.end - 1 if end_exclusive else r.end
            if r.start == last:
                items.append((r.start, str(r.start)))
            else:
                end = "max" if last >= _MAX_FIELD_NUMBER else str(last)
                items.append((r.start, f"{r.start} to {end}"))
        lines = []
        if self.normalize:
            items.sort()
            lines += [f"reserved {text};\n" for _, text in items]
            lines += [f'reserved "{name}";\n' for name in sorted(names)]
        else:
            if items:
                lines.append("reserved " + ", ".join(text for _, text in items) + ";\n")
            if names:
                lines.append("reserved " + ", ".join(f'"{n}"' for n in names) + ";\n")
        return ["\n"] + [_indent(line) for line in lines]

    def _field(self, field, scope, nested_by_name, maps, in_oneof: bool = False) -> str:
        type_full = field.type_name.lstrip(".")
        if field.type == F.TYPE_MESSAGE and type_full in maps:
            entry = nested_by_name[type_full]
            key, value = entry.field[0], entry.field[1]
            text = f"map<{self._type(key, scope)}, {self._type(value, scope)}> {field.name} = {field.number}"
        elif field.type == F.TYPE_GROUP:
            group = nested_by_name.get(type_full)
            label = _LABELS[field.label] + " " if not in_oneof else ""
            inner = [self._field(f, scope + [group.name], {}, set()) for f in group.field]
            return f"{label}group {group.name} = {field.number} {{\n" + "".join(_indent(i) for i in inner) + "}\n"
        else:
            label = self._label(field, in_oneof)
            text = f"{label}{self._type(field, scope)} {field.name} = {field.number}"
        options = []
        if field.HasField("default_value"):
            options.append(f"default = {_default_literal(field)}")
        if field.HasField("json_name"):
            options.append(f'json_name = "{_escape(field.json_name)}"')
        options += self._options(field.options)
        if options:
            text += " " + _option_list(options)
        return text + ";\n"

    def _label(self, field, in_oneof: bool) -> str:
        if in_oneof:
            return ""
        if field.label == F.LABEL_REPEATED:
            return "repeated "
        if self.file.syntax == "proto3":
            return "optional " if field.proto3_optional else ""
        if self.file.syntax == "editions":
            return ""
        return _LABELS[field.label] + " "

    def _type(self, field, scope: list[str]) -> str:
        name = scalar_name(field.type)
        if name is not None:
            return name
        return self.type_name(field.type_name, scope)

    def type_name(self, full_name: str, scope: list[str]) -> str:
        """How a fully qualified ``.pkg.Type`` is written inside ``scope`` (package + messages): its
        shortest dotted suffix that protoc resolves back to the same type (protoc's lookup stops at
        the innermost scope declaring the first part), else the full name with a leading dot."""
        full = full_name.lstrip(".")
        if self.normalize:
            return "." + full
        parts = full.split(".")
        for start in range(len(parts) - 1, -1, -1):
            candidate = ".".join(parts[start:])
            if self._resolves(candidate, scope) == full:
                return candidate
        return "." + full

    def _resolves(self, name: str, scope: list[str]) -> str | None:
        first, _, rest = name.partition(".")
        parts = ".".join(scope).split(".") if scope else []  # scope's first entry is the dotted package
        for depth in range(len(parts), -1, -1):
            prefix = ".".join(parts[:depth] + [first])
            if prefix in self._symbols():
                return prefix + ("." + rest if rest else "")
        return None

    def _symbols(self) -> set[str]:
        """Every name protoc's lookup can stop at: packages and their parents, types, enum values,
        extensions and services of this file and everything the decoder's pool holds."""
        if self._symbol_set is None:
            symbols: set[str] = set()
            for file in [*self.decoder.files, self.file]:
                parts = file.package.split(".") if file.package else []
                symbols.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
                _collect_symbols(symbols, file.package, file.message_type, file.enum_type, file.extension)
                symbols.update(_join(file.package, s.name) for s in file.service)
            self._symbol_set = symbols
        return self._symbol_set

    # -- enums, extensions, services --------------------------------------------------------------

    def _enum(self, enum: descriptor_pb2.EnumDescriptorProto) -> str:
        body = self._reserved(enum.reserved_range, enum.reserved_name, end_exclusive=False)
        lines = [f"option {o};\n" for o in self._options(enum.options)]
        values = list(enum.value)
        if self.normalize:
            values.sort(key=lambda v: (v.number, v.name))
        for value in values:
            options = self._options(value.options)
            suffix = f" {_option_list(options)}" if options else ""
            lines.append(f"{value.name} = {value.number}{suffix};\n")
        if lines and not body:
            body.append("\n")
        body += [_indent(line) for line in lines]
        return f"enum {enum.name} {{" + "".join(body) + "}\n"

    def _extends(self, extensions, scope: list[str]) -> list[str]:
        grouped: dict[str, list] = {}
        for field in extensions:
            grouped.setdefault(field.extendee, []).append(field)
        blocks = []
        for extendee, fields in grouped.items():
            if self.normalize:
                fields = sorted(fields, key=lambda f: f.number)
            lines = [self._field(f, scope, {}, set()) for f in fields]
            name = self.type_name(extendee, scope)
            blocks.append(f"extend {name} {{\n" + "".join(_indent(line) for line in lines) + "}\n")
        return blocks

    def _service(self, service, scope: list[str]) -> str:
        lines = [f"option {o};\n" for o in self._options(service.options)]
        for method in service.method:
            request = ("stream " if method.client_streaming else "") + self.type_name(method.input_type, scope)
            response = ("stream " if method.server_streaming else "") + self.type_name(method.output_type, scope)
            options = self._options(method.options)
            text = f"rpc {method.name} ({request}) returns ({response})"
            if options:
                text += " {\n" + "".join(_indent(f"option {o};\n") for o in options) + "}\n"
            else:
                text += ";\n"
            lines.append(text)
        body = "\n" + "".join(_indent(line) for line in lines) if lines else ""
        return f"service {service.name} {{" + body + "}\n"

    # -- options ----------------------------------------------------------------------------------

    def _options(self, message, skip: frozenset | set = frozenset()) -> list[str]:
        rendered = []
        for field, value in self.decoder.options(message):
            if field.name in skip and not field.is_extension:
                continue
            if self.ignore_extensions and field.is_extension and not field.full_name.startswith("confluent."):
                continue  # Confluent's ignore_extensions keeps only its own custom options
            name = f"({field.full_name})" if field.is_extension else field.name
            values = value if _is_repeated(field) else [value]
            for item in values:
                rendered.append(f"{name} = {self._option_value(field, item)}")
        if self.normalize:
            rendered.sort()
        return rendered

    def _option_value(self, field: FieldDescriptor, value) -> str:
        if field.type in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP):
            text = text_format.MessageToString(value, as_one_line=True)
            return "{ " + text + " }" if text else "{}"
        if field.type == FieldDescriptor.TYPE_ENUM:
            enum_value = field.enum_type.values_by_number.get(value)
            return enum_value.name if enum_value is not None else str(value)
        if field.type == FieldDescriptor.TYPE_BOOL:
            return "true" if value else "false"
        if field.type == FieldDescriptor.TYPE_STRING:
            return f'"{_escape(value)}"'
        if field.type == FieldDescriptor.TYPE_BYTES:
            return '"' + _escape_bytes(value) + '"'
        if field.type in (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE):
            return _float_literal(value)
        return str(value)


def print_file(file, decoder: OptionDecoder, normalize: bool = False, ignore_extensions: bool = False) -> str:
    return Printer(file, decoder, normalize, ignore_extensions).print_file()


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _collect_symbols(symbols: set[str], prefix: str, messages, enums, extensions) -> None:
    for message in messages:
        name = _join(prefix, message.name)
        symbols.add(name)
        _collect_symbols(symbols, name, message.nested_type, message.enum_type, message.extension)
        symbols.update(_join(name, f.name) for f in message.field)
        symbols.update(_join(name, o.name) for o in message.oneof_decl)
    for enum in enums:
        symbols.add(_join(prefix, enum.name))
        symbols.update(_join(prefix, v.name) for v in enum.value)  # enum values live beside their enum
    symbols.update(_join(prefix, f.name) for f in extensions)


def _is_repeated(field: FieldDescriptor) -> bool:
    # protobuf 7 has is_repeated; the label attribute is its older spelling
    repeated = getattr(field, "is_repeated", None)
    if repeated is not None:
        return repeated
    return field.label == FieldDescriptor.LABEL_REPEATED


def _real_oneofs(message) -> list[int]:
    """The oneofs written in the source: proto3 ``optional`` fields sit in synthetic ones."""
    synthetic = {f.oneof_index for f in message.field if f.proto3_optional and f.HasField("oneof_index")}
    return [i for i in range(len(message.oneof_decl)) if i not in synthetic]


def _in_real_oneof(field, real_oneofs: list[int]) -> bool:
    return field.HasField("oneof_index") and field.oneof_index in real_oneofs


def _option_list(options: list[str]) -> str:
    if len(options) == 1:
        return f"[{options[0]}]"
    return "[\n" + ",\n".join(_indent(o).rstrip("\n") for o in options) + "\n]"


def _indent(text: str) -> str:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return "".join(("  " + line if line else "") + "\n" for line in lines)


_ESCAPES = {ord("\\"): "\\\\", ord('"'): '\\"', ord("'"): "\\'", ord("\n"): "\\n", ord("\r"): "\\r",
            ord("\t"): "\\t"}


def _escape(value: str) -> str:
    """A string literal's body: quotes, backslashes and control characters escaped, UTF-8 kept."""
    return "".join(_ESCAPES.get(ord(c)) or (f"\\{ord(c):03o}" if ord(c) < 0x20 or ord(c) == 0x7F else c)
                   for c in value)


def _escape_bytes(value: bytes) -> str:
    return "".join(_ESCAPES.get(b) or (chr(b) if 0x20 <= b < 0x7F else f"\\{b:03o}") for b in value)


def _float_literal(value: float) -> str:
    if value != value:
        return "nan"
    if value in (float("inf"), float("-inf")):
        return "inf" if value > 0 else "-inf"
    return repr(value)


def _default_literal(field) -> str:
    # protoc keeps a default as text: strings raw, bytes already C-escaped, enums by name
    if field.type == F.TYPE_STRING:
        return f'"{_escape(field.default_value)}"'
    if field.type == F.TYPE_BYTES:
        return f'"{field.default_value}"'
    return field.default_value


def _edition_name(edition: int) -> str:
    name = descriptor_pb2.Edition.Name(edition)
    return name.removeprefix("EDITION_")
