"""Protobuf compatibility: Confluent's rules, as its protobuf-provider's ``SchemaDiff`` states them.

``differences(original, update)`` walks two files the way Confluent's diff walks Wire's model:
package, then every message by name (nested ones too), field by field *by number*, with oneof
membership tracked per number, and every enum by name. Each change is a ``Difference`` of one of
Confluent's types; the types in ``COMPATIBLE`` are the ones Confluent accepts (a removed field is
one: protobuf readers skip unknown numbers). The rest are reported with Confluent's wording, whose
two ``%s`` the registry fills with "new"/"old" (Confluent's ``SchemaValidatorBuilder``).

Scalar types that share a wire encoding form Confluent's groups (int32/uint32/int64/uint64/bool and
enums; sint32/sint64; string/bytes; fixed32/sfixed32; fixed64/sfixed64; float; double): a change
within a group passes, across groups it is ``FIELD_SCALAR_KIND_CHANGED``. A message-typed field is
compared by the message's name relative to its package and, when it comes from a reference that
changed, by recursing into the message.
"""

from __future__ import annotations

import dataclasses
from typing import Iterator

from google.protobuf import descriptor_pb2

F = descriptor_pb2.FieldDescriptorProto

COMPATIBLE = frozenset({
    "MESSAGE_ADDED", "MESSAGE_MOVED", "ENUM_ADDED", "ENUM_REMOVED", "ENUM_CONST_ADDED",
    "ENUM_CONST_CHANGED", "ENUM_CONST_REMOVED", "FIELD_ADDED", "FIELD_REMOVED", "FIELD_NAME_CHANGED",
    "FIELD_STRING_OR_BYTES_LABEL_CHANGED", "ONEOF_ADDED", "ONEOF_REMOVED", "ONEOF_FIELD_ADDED",
    "ONEOF_FIELD_MOVED_TO_TOP_LEVEL",
})

# Confluent's descriptions (Difference.error()); %s, %s = the reader's and the writer's schema
# Confluent's SchemaValidatorBuilder fills them with "new"/"old" (or "old"/"new" for FORWARD); the
# interface does not say which way a check runs, so they read as BACKWARD's, as the Avro format's do.
READER_WRITER = ("new", "old")
_DESCRIPTIONS = {
    "PACKAGE_CHANGED": "The package at '{path}' in the %s schema does not match the package in the %s schema",
    "MESSAGE_REMOVED": "The %s schema is missing a MESSAGE type at path '{path}' in the %s schema",
    "FIELD_KIND_CHANGED": "The type of a field at path '{path}' in the %s schema does not match the %s schema",
    "FIELD_SCALAR_KIND_CHANGED": (
        "The kind of a SCALAR field at path '{path}' in the %s schema does not match its kind in the %s schema"
    ),
    "FIELD_NAMED_TYPE_CHANGED": (
        "The type of a MESSAGE field at path '{path}' in the %s schema does not match its type in the %s schema"
    ),
    "FIELD_NUMERIC_LABEL_CHANGED": (
        "The label for a NUMERIC field at path '{path}' in the %s schema does not match its label in the %s schema"
    ),
    "REQUIRED_FIELD_ADDED": "A required field  at path '{path}' in the %s schema is missing in the %s schema",
    "REQUIRED_FIELD_REMOVED": "The %s schema is missing a required field at path: '{path}' in the %s schema",
    "ONEOF_FIELD_REMOVED": "The %s schema is missing a oneof field at path '{path}' in the %s schema",
    "ONEOF_FIELD_MOVED_TO_TOP_LEVEL": (
        "The oneof field at path '{path}' in the %s schema was moved out of its oneof to a top-level field in the "
        "%s schema"
    ),
    "MULTIPLE_FIELDS_MOVED_TO_ONEOF": (
        "Multiple fields in the oneof at path '{path}' in the %s schema are outside a oneof in the %s schema"
    ),
    "FIELD_MOVED_TO_EXISTING_ONEOF": (
        "A field in the oneof at path '{path}' in the %s schema is outside an existing oneof in the %s schema"
    ),
}

_SCALAR_GROUPS = {
    F.TYPE_INT32: "GENERAL_NUMBER", F.TYPE_INT64: "GENERAL_NUMBER", F.TYPE_UINT32: "GENERAL_NUMBER",
    F.TYPE_UINT64: "GENERAL_NUMBER", F.TYPE_BOOL: "GENERAL_NUMBER", F.TYPE_ENUM: "GENERAL_NUMBER",
    F.TYPE_SINT32: "SIGNED_NUMBER", F.TYPE_SINT64: "SIGNED_NUMBER",
    F.TYPE_STRING: "STRING_OR_BYTES", F.TYPE_BYTES: "STRING_OR_BYTES",
    F.TYPE_FIXED32: "FIXED32", F.TYPE_SFIXED32: "FIXED32",
    F.TYPE_FIXED64: "FIXED64", F.TYPE_SFIXED64: "FIXED64",
    F.TYPE_FLOAT: "FLOAT", F.TYPE_DOUBLE: "DOUBLE",
}


@dataclasses.dataclass(frozen=True)
class Difference:
    type: str
    path: str

    def message(self) -> str:
        reader, writer = READER_WRITER
        template = _DESCRIPTIONS.get(self.type, "")  # the path goes in last: it may hold a "%s"
        description = template.replace("%s", reader, 1).replace("%s", writer, 1).format(path=self.path)
        return '{errorType:"' + self.type + '", description:"' + description + '"}'


@dataclasses.dataclass
class TypeInfo:
    package: str
    origin: object  # which file, and which text of it: a type from an unchanged import is not re-compared
    message: descriptor_pb2.DescriptorProto | None  # None for an enum
    is_map: bool = False


@dataclasses.dataclass
class Side:
    """One schema's file with the types it and its imports declare, by full name (no leading dot)."""

    file: descriptor_pb2.FileDescriptorProto
    types: dict[str, TypeInfo]

    @property
    def syntax(self) -> str:
        return self.file.syntax or "proto2"


def side(file, imports: dict[str, tuple[descriptor_pb2.FileDescriptorProto, object]]) -> Side:
    """``imports``: name -> (descriptor, origin), origin telling two versions of an import apart."""
    types: dict[str, TypeInfo] = {}
    for dependency, origin in imports.values():
        _collect(types, dependency.package, dependency.package, dependency.message_type, dependency.enum_type, origin)
    _collect(types, file.package, file.package, file.message_type, file.enum_type, "")
    return Side(file, types)


def _collect(types, package, prefix, messages, enums, origin) -> None:
    for message in messages:
        name = f"{prefix}.{message.name}" if prefix else message.name
        types[name] = TypeInfo(package, origin, message, message.options.map_entry)
        _collect(types, package, name, message.nested_type, message.enum_type, origin)
    for enum in enums:
        types[f"{prefix}.{enum.name}" if prefix else enum.name] = TypeInfo(package, origin, None)


class _Context:
    def __init__(self, original: Side, update: Side, path: list[str]):
        self.original = original
        self.update = update
        self.path = path
        self.differences: list[Difference] = []
        self.in_progress: set[tuple[int, int]] = set()

    def add(self, kind: str, *more: str) -> None:
        self.differences.append(Difference(kind, "#/" + "/".join(self.path + list(more))))

    def sub(self, path: list[str]) -> "_Context":
        ctx = _Context(self.original, self.update, path)
        ctx.in_progress = self.in_progress
        return ctx

    def compatible(self) -> bool:
        return all(d.type in COMPATIBLE for d in self.differences)


def differences(original: Side, update: Side) -> list[Difference]:
    ctx = _Context(original, update, [])
    if original.file.package != update.file.package:
        ctx.add("PACKAGE_CHANGED")
    _compare_types(ctx, original.file.message_type, original.file.enum_type,
                   update.file.message_type, update.file.enum_type)
    return ctx.differences


def _compare_types(ctx, original_messages, original_enums, update_messages, update_enums) -> None:
    originals = {m.name: (i, m) for i, m in enumerate(m for m in original_messages if not m.options.map_entry)}
    updates = {m.name: (i, m) for i, m in enumerate(m for m in update_messages if not m.options.map_entry)}
    for name in _ordered_union(originals, updates):
        ctx.path.append(name)
        if name not in updates:
            ctx.add("MESSAGE_REMOVED")
        elif name not in originals:
            ctx.add("MESSAGE_ADDED")
        else:
            _compare_messages(ctx, originals[name][1], updates[name][1])
            if originals[name][0] != updates[name][0]:
                ctx.add("MESSAGE_MOVED")  # message indexes name the schema id's own layout: compatible
        ctx.path.pop()
    original_enum_map = {e.name: e for e in original_enums}
    update_enum_map = {e.name: e for e in update_enums}
    for name in _ordered_union(original_enum_map, update_enum_map):
        ctx.path.append(name)
        if name not in update_enum_map:
            ctx.add("ENUM_REMOVED")
        elif name not in original_enum_map:
            ctx.add("ENUM_ADDED")
        else:
            _compare_enums(ctx, original_enum_map[name], update_enum_map[name])
        ctx.path.pop()


def _compare_enums(ctx, original, update) -> None:
    originals = {v.number: v.name for v in original.value}
    updates = {v.number: v.name for v in update.value}
    for number in sorted(originals.keys() | updates.keys()):
        if number not in updates:
            ctx.add("ENUM_CONST_REMOVED", str(number))
        elif number not in originals:
            ctx.add("ENUM_CONST_ADDED", str(number))
        elif originals[number] != updates[number]:
            ctx.add("ENUM_CONST_CHANGED", str(number))


@dataclasses.dataclass
class _Fields:
    by_number: dict[int, descriptor_pb2.FieldDescriptorProto]
    oneof_of: dict[int, str]  # number -> name of the (real) oneof holding it
    oneofs: dict[str, list[int]]


def _fields(message) -> _Fields:
    synthetic = {f.oneof_index for f in message.field if f.proto3_optional and f.HasField("oneof_index")}
    by_number, oneof_of, oneofs = {}, {}, {}
    for field in message.field:
        by_number[field.number] = field
        if field.HasField("oneof_index") and field.oneof_index not in synthetic:
            name = message.oneof_decl[field.oneof_index].name
            oneof_of[field.number] = name
            oneofs.setdefault(name, []).append(field.number)
    return _Fields(by_number, oneof_of, oneofs)


def _compare_messages(ctx, original, update) -> None:
    key = (id(original), id(update))
    if key in ctx.in_progress:  # recursive message types: the pair is already being compared
        return
    ctx.in_progress.add(key)
    try:
        _compare_message_fields(ctx, original, update)
        _compare_types(ctx, original.nested_type, original.enum_type, update.nested_type, update.enum_type)
    finally:
        ctx.in_progress.discard(key)


def _compare_message_fields(ctx, original_message, update_message) -> None:
    original, update = _fields(original_message), _fields(update_message)
    # a oneof deleted with every member is a compatible deletion; partial survivors are judged per field
    deleted_oneofs = {
        name for name, numbers in original.oneofs.items()
        if name not in update.oneofs and not any(n in update.by_number for n in numbers)
    }
    # previously independent fields now mutually exclusive: incompatible
    for name, numbers in update.oneofs.items():
        groups, moved_in = set(), 0
        for number in numbers:
            if number in original.oneof_of:
                groups.add("oneof:" + original.oneof_of[number])
            elif number in original.by_number:
                groups.add(f"field:{number}")
                moved_in += 1
        if len(groups) > 1:
            ctx.add("MULTIPLE_FIELDS_MOVED_TO_ONEOF" if moved_in > 1 else "FIELD_MOVED_TO_EXISTING_ONEOF", name)
    for name in sorted(original.oneofs.keys() | update.oneofs.keys()):
        if name not in update.oneofs:
            ctx.add("ONEOF_REMOVED", name)
        elif name not in original.oneofs:
            ctx.add("ONEOF_ADDED", name)
    for number in sorted(original.by_number.keys() | update.by_number.keys()):
        before, after = original.by_number.get(number), update.by_number.get(number)
        before_oneof, after_oneof = original.oneof_of.get(number), update.oneof_of.get(number)
        if after is None:
            if before_oneof is not None:
                if before_oneof not in deleted_oneofs:
                    ctx.add("ONEOF_FIELD_REMOVED", before_oneof, str(number))
            else:
                ctx.add("REQUIRED_FIELD_REMOVED" if before.label == F.LABEL_REQUIRED else "FIELD_REMOVED", str(number))
        elif before is None:
            if after_oneof is not None:
                ctx.add("ONEOF_FIELD_ADDED", after_oneof, str(number))
            else:
                ctx.add("REQUIRED_FIELD_ADDED" if after.label == F.LABEL_REQUIRED else "FIELD_ADDED", str(number))
        else:
            if before_oneof is not None and after_oneof is None:
                ctx.add("ONEOF_FIELD_MOVED_TO_TOP_LEVEL", str(number))
            where = [after_oneof, str(number)] if after_oneof is not None else [str(number)]
            ctx.path.extend(where)
            _compare_fields(ctx, before, after, before_oneof is not None, after_oneof is not None)
            del ctx.path[-len(where):]


def _label(side: Side, field, in_oneof: bool) -> str | None:
    """The label as Wire's model has it: proto3 singular and oneof fields have none."""
    if in_oneof:
        return None
    if field.label == F.LABEL_REPEATED:
        return "REPEATED"
    if side.syntax == "proto2":
        return "REQUIRED" if field.label == F.LABEL_REQUIRED else "OPTIONAL"
    return "OPTIONAL" if field.proto3_optional else None


def _compare_fields(ctx, before, after, before_in_oneof: bool, after_in_oneof: bool) -> None:
    if before.name != after.name:
        ctx.add("FIELD_NAME_CHANGED")
    before_label = None if _is_map(ctx.original, before) else _label(ctx.original, before, before_in_oneof)
    after_label = None if _is_map(ctx.update, after) else _label(ctx.update, after, after_in_oneof)
    _compare_labels_and_types(ctx, before_label, after_label, _FieldType.of(ctx.original, before),
                              _FieldType.of(ctx.update, after))


@dataclasses.dataclass
class _FieldType:
    kind: str  # SCALAR (enums too), MESSAGE or MAP
    type: int
    type_name: str  # full name without the leading dot, for messages and enums
    map_entry: descriptor_pb2.DescriptorProto | None = None

    @classmethod
    def of(cls, side: Side, field) -> "_FieldType":
        name = field.type_name.lstrip(".")
        if field.type in (F.TYPE_MESSAGE, F.TYPE_GROUP):
            info = side.types.get(name)
            if info is not None and info.is_map:
                return cls("MAP", field.type, name, info.message)
            return cls("MESSAGE", field.type, name)
        return cls("SCALAR", field.type, name)


def _is_map(side: Side, field) -> bool:
    info = side.types.get(field.type_name.lstrip(".")) if field.type == F.TYPE_MESSAGE else None
    return info is not None and info.is_map


def _compare_labels_and_types(ctx, before_label, after_label, before: _FieldType, after: _FieldType) -> None:
    if before.kind != after.kind:
        ctx.add("FIELD_KIND_CHANGED")
    elif before.kind == "SCALAR":
        before_group, after_group = _SCALAR_GROUPS[before.type], _SCALAR_GROUPS[after.type]
        if before_group != after_group:
            ctx.add("FIELD_SCALAR_KIND_CHANGED")
        elif before_label is not None and after_label is not None and before_label != after_label:
            if before_group == "STRING_OR_BYTES":
                ctx.add("FIELD_STRING_OR_BYTES_LABEL_CHANGED")
            else:
                ctx.add("FIELD_NUMERIC_LABEL_CHANGED")
    elif before.kind == "MESSAGE":
        _compare_message_types(ctx, before.type_name, after.type_name)
    else:
        for before_field, after_field in zip(before.map_entry.field, after.map_entry.field):
            _compare_labels_and_types(ctx, None, None, _FieldType.of(ctx.original, before_field),
                                      _FieldType.of(ctx.update, after_field))


def _compare_message_types(ctx, before_name: str, after_name: str) -> None:
    before_info, after_info = ctx.original.types.get(before_name), ctx.update.types.get(after_name)
    if before_info is None or after_info is None or before_info.message is None or after_info.message is None:
        if before_name != after_name:
            ctx.add("FIELD_NAMED_TYPE_CHANGED")
        return
    before_local = _local_name(before_name, before_info.package)
    after_local = _local_name(after_name, after_info.package)
    if before_local != after_local:
        ctx.add("FIELD_NAMED_TYPE_CHANGED")
        return
    if before_info.origin == after_info.origin:
        return  # both local (compared on their own) or the same text of the same import
    sub = ctx.sub(before_local.split("."))
    _compare_messages(sub, before_info.message, after_info.message)
    ctx.differences.extend(sub.differences)
    if not sub.compatible():
        ctx.add("FIELD_NAMED_TYPE_CHANGED")


def _local_name(full_name: str, package: str) -> str:
    return full_name[len(package) + 1:] if package and full_name.startswith(package + ".") else full_name


def _ordered_union(first: dict, second: dict) -> Iterator[str]:
    yield from first
    yield from (name for name in second if name not in first)
