"""The registry's Protobuf format (kbroker.schema_registry.formats.protobuf), without a broker:
parsing .proto text and confluent-kafka's base64 descriptors, the canonical text and its round
trip, references and well-known imports, the serialized form confluent-kafka's deserializer asks
for, and Confluent's compatibility rules, one table row per rule."""

from __future__ import annotations

import base64
import importlib
import sys
import uuid

import pytest
from google.protobuf import descriptor_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbroker.schema_registry.formats import InvalidSchema, parse


def proto(text: str, references: dict | None = None):
    return parse("PROTOBUF", text, references or {})


def round_trips(text: str, references: dict | None = None) -> str:
    """The canonical text is a fixed point and compiles back to the same descriptor."""
    first = proto(text, references)
    second = proto(first.canonical(), references)
    assert second.canonical() == first.canonical()
    assert second.file == first.file
    return first.canonical()


EVERYTHING_PROTO3 = """
syntax = "proto3";
package shop.v1;

import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";

option java_package = "com.example.shop";
option java_multiple_files = true;

// an order
message Order {
  reserved 9, 15 to 20;
  reserved "legacy";
  option deprecated = true;

  string id = 1 [json_name = "orderId"];
  repeated Line lines = 2;
  map<string, Line> by_sku = 3;
  google.protobuf.Timestamp placed = 4;
  optional google.protobuf.Int64Value discount = 5;
  Status status = 6;
  oneof payment {
    string card = 7;
    Voucher voucher = 8;
  }
  repeated int32 codes = 10 [packed = false];
  bytes blob = 11;
  double total = 12 [deprecated = true];

  message Line {
    string sku = 1;
    uint32 quantity = 2;
    sint64 delta = 3;
    fixed64 checksum = 4;
  }
  message Voucher {
    string code = 1;
  }
  enum Status {
    option allow_alias = true;
    STATUS_UNSPECIFIED = 0;
    PLACED = 1;
    SUBMITTED = 1;
    SHIPPED = 2 [deprecated = true];
  }
}

enum Priority {
  PRIORITY_UNSPECIFIED = 0;
  HIGH = 1;
}

service Orders {
  rpc Place (Order) returns (Order);
  rpc Watch (stream Order) returns (stream Order) {
    option deprecated = true;
  }
}
"""

EVERYTHING_PROTO2 = r"""
syntax = "proto2";
package legacy;

message Record {
  required string name = 1;
  optional int32 count = 2 [default = 7];
  optional string note = 3 [default = "a \"quoted\"\n line"];
  optional bytes raw = 4 [default = "\001\377"];
  optional Kind kind = 5 [default = B];
  optional double ratio = 6 [default = inf];
  repeated group Item = 7 {
    optional string label = 8;
  }
  extensions 100 to 199, 500 to max;

  enum Kind {
    A = 1;
    B = 2;
  }
}

extend Record {
  optional string extra = 100;
}
"""


@pytest.mark.parametrize("text", [EVERYTHING_PROTO3, EVERYTHING_PROTO2], ids=["proto3", "proto2"])
def test_canonical_text_round_trips(text):
    canonical = round_trips(text)
    assert canonical.startswith('syntax = "proto')
    assert "//" not in canonical  # comments are not part of the schema
    # every line inside a block is indented by two spaces per level
    depth = 0
    for line in canonical.splitlines():
        depth -= line.strip().startswith(("}", "]"))
        assert not line or line.startswith("  " * depth) and not line.startswith("  " * depth + " "), line
        depth += line.endswith(("{", "["))


def test_canonical_layout_is_confluents():
    canonical = proto('syntax = "proto3"; package a.b; message M { string s = 1; map<string, int64> m = 2; }').canonical()
    assert canonical == (
        'syntax = "proto3";\n'
        "package a.b;\n"
        "\n"
        "message M {\n"
        "  string s = 1;\n"
        "  map<string, int64> m = 2;\n"
        "}\n"
    )


def test_spelling_does_not_change_the_canonical_text():
    tight = 'syntax="proto3";package p;message M{int32 a=1;string b=2;}'
    loose = """
        syntax = "proto3";
        package p;   // the package
        message M {
            int32  a = 1;
            /* a string */ string b = 2;
        }
    """
    assert proto(tight).canonical() == proto(loose).canonical()


@pytest.mark.parametrize("text, spelled", [
    ('syntax = "proto3"; package p; message M { message N { message M {} .p.M up = 1; M down = 2; } }',
     ["p.M up = 1;", "M down = 2;"]),
    ('syntax = "proto3"; package x; import "google/protobuf/timestamp.proto"; message google {} '
     'message M { .google.protobuf.Timestamp t = 1; google g = 2; }',
     [".google.protobuf.Timestamp t = 1;", "google g = 2;"]),
    ('syntax = "proto3"; package a.b; message X { message Y {} } message Z { a.b.X.Y y = 1; }', ["X.Y y = 1;"]),
])
def test_type_names_are_the_shortest_that_resolve_to_the_same_type(text, spelled):
    canonical = round_trips(text)
    for line in spelled:
        assert f"  {line}" in canonical


def test_custom_options_survive_the_round_trip():
    text = """
        syntax = "proto3";
        package opts;
        import "google/protobuf/descriptor.proto";
        extend google.protobuf.FieldOptions { string doc = 50001; Meta meta = 50002; }
        message Meta { string a = 1; repeated int32 b = 2; }
        message M { int32 x = 1 [(doc) = "hi", (meta) = { a: "q" b: 1 b: 2 }]; }
    """
    canonical = round_trips(text)
    assert '(opts.doc) = "hi"' in canonical


@pytest.mark.parametrize("text, fragment", [
    ('syntax = "proto3"; message M { Missing m = 1; }', '"Missing" is not defined'),
    ('syntax = "proto3"; message M { int32 a = 1; int32 b = 1; }', "already been used"),
    ('syntax = "proto3"; message M { int32 a = 1 }', "Expected"),
    ('syntax = "proto4";', "proto4"),
    ("not a schema at all", "default:1:1"),
    ("   ", "empty"),
    ('syntax = "proto3"; import "other.proto"; message M {}', "other.proto"),
])
def test_bad_schemas_are_refused_with_protocs_message(text, fragment):
    with pytest.raises(InvalidSchema) as refused:
        proto(text)
    assert fragment in str(refused.value)


def test_a_reference_name_cannot_leave_the_temporary_directory():
    with pytest.raises(InvalidSchema, match="invalid reference name"):
        proto('syntax = "proto3"; message M {}', {"../escape.proto": 'syntax = "proto3";'})


def test_references_are_imports_by_path():
    common = 'syntax = "proto3"; package common; message Money { int64 units = 1; string currency = 2; }'
    text = """
        syntax = "proto3";
        package billing;
        import "common/money.proto";
        message Invoice { common.Money amount = 1; }
    """
    schema = proto(text, {"common/money.proto": common})
    assert 'import "common/money.proto";' in schema.canonical()
    assert "common.Money amount = 1;" in schema.canonical()
    round_trips(text, {"common/money.proto": common})


def test_references_chain_in_dependency_order_and_public_imports_reexport():
    base = 'syntax = "proto3"; package base; message Id { string value = 1; }'
    middle = 'syntax = "proto3"; package mid; import public "base.proto"; message Wrapper { base.Id id = 1; }'
    text = 'syntax = "proto3"; import "mid.proto"; message Top { mid.Wrapper w = 1; base.Id direct = 2; }'
    canonical = round_trips(text, {"base.proto": base, "mid.proto": middle})
    assert "base.Id direct = 2;" in canonical


def test_well_known_types_need_no_reference():
    text = """
        syntax = "proto3";
        import "google/protobuf/any.proto";
        import "google/protobuf/duration.proto";
        import "google/protobuf/struct.proto";
        import "google/protobuf/empty.proto";
        message M {
          google.protobuf.Any any = 1;
          google.protobuf.Duration took = 2;
          google.protobuf.Struct data = 3;
          google.protobuf.Empty nothing = 4;
        }
    """
    round_trips(text)


def test_base64_descriptor_is_stored_as_proto_text():
    schema = proto(EVERYTHING_PROTO3)
    serialized = schema.formatted("serialized")
    from_descriptor = proto(serialized)
    assert from_descriptor.canonical() == schema.canonical()
    assert from_descriptor.file == schema.file


def test_formatted_forms():
    schema = proto(EVERYTHING_PROTO3)
    assert schema.formatted("default") == schema.canonical()
    assert schema.formatted("") == schema.canonical()
    assert schema.formatted("no-such-format") is None
    file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema.formatted("serialized")))
    assert [m.name for m in file.message_type] == ["Order"]


def test_ignore_extensions_drops_extensions_and_custom_options_but_confluents():
    text = """
        syntax = "proto2";
        package x;
        import "google/protobuf/descriptor.proto";
        import "confluent/meta.proto";
        extend google.protobuf.FieldOptions { optional string doc = 50001; }
        message M {
          optional int32 a = 1 [(doc) = "mine", (confluent.field_meta).doc = "theirs", deprecated = true];
          extensions 100 to 200;
        }
    """
    schema = proto(text)
    assert "extend " in schema.canonical() and "extensions 100 to 200;" in schema.canonical()
    ignoring = schema.formatted("ignore_extensions")
    assert "extend " not in ignoring and "extensions " not in ignoring and "(x.doc)" not in ignoring
    assert '(confluent.field_meta) = { doc: "theirs" }' in ignoring and "deprecated = true" in ignoring


# -- what confluent-kafka sends and asks for --------------------------------------------------------


def generated_module(tmp_path, text: str, dependencies: dict | None = None):
    """Compile ``text`` with grpc_tools.protoc into a _pb2 module and import it, as an application
    using confluent-kafka's ProtobufSerializer does (file names unique per test: one process-wide pool)."""
    from grpc_tools import protoc

    stem = f"t{uuid.uuid4().hex[:12]}"
    files = {f"{stem}.proto": text, **(dependencies or {})}
    for name, content in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    import grpc_tools

    include = f"{grpc_tools.__path__[0]}/_proto"
    args = ["protoc", f"-I{tmp_path}", f"-I{include}", f"--python_out={tmp_path}", *files]
    assert protoc.main(args) == 0
    sys.path.insert(0, str(tmp_path))
    importlib.invalidate_caches()
    try:
        return importlib.import_module(f"{stem}_pb2")
    finally:
        sys.path.remove(str(tmp_path))


def test_serialized_form_is_what_confluent_kafka_sends(tmp_path):
    from confluent_kafka.schema_registry.common.protobuf import _schema_to_str

    module = generated_module(tmp_path, EVERYTHING_PROTO3.replace("package shop.v1;", "package shop.sent;"))
    sent = _schema_to_str(module.DESCRIPTOR)  # what ProtobufSerializer registers
    schema = proto(sent)
    expected = descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb)
    returned = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema.formatted("serialized")))
    # confluent-kafka's deserializer renames the file it receives ("default"); everything else agrees
    expected.name = returned.name
    assert returned == expected


def test_serialized_form_loads_in_confluent_kafkas_pool(tmp_path):
    from confluent_kafka.schema_registry.common.protobuf import _init_pool, _str_to_proto
    from google.protobuf import descriptor_pool

    money = 'syntax = "proto3"; package m; message Money { int64 units = 1; }'
    text = 'syntax = "proto3"; package p; import "money.proto"; message Pay { m.Money amount = 1; }'
    reference = proto(money)
    schema = proto(text, {"money.proto": money})
    pool = descriptor_pool.DescriptorPool()
    _init_pool(pool)
    pool.Add(_str_to_proto("money.proto", reference.formatted("serialized")))
    pool.Add(_str_to_proto("default", schema.formatted("serialized")))
    assert pool.FindMessageTypeByName("p.Pay").fields_by_name["amount"].message_type.full_name == "m.Money"


# -- normalization ----------------------------------------------------------------------------------


def test_normalized_sorts_and_qualifies():
    text = """
        syntax = "proto3";
        package n;
        import "google/protobuf/timestamp.proto";
        import "google/protobuf/any.proto";
        option java_package = "z";
        option go_package = "a";
        message M {
          reserved 9, 3;
          N n = 2;
          oneof choice { string b = 7; string a = 5; }
          int32 first = 1;
          message N {}
        }
        enum E { E_ZERO = 0; E_TWO = 2; E_ONE = 1; }
    """
    normal = proto(text).normalized().canonical()
    assert normal.index('import "google/protobuf/any.proto"') < normal.index('import "google/protobuf/timestamp.proto"')
    assert normal.index('option go_package = "a"') < normal.index('option java_package = "z"')
    assert ".n.M.N n = 2;" in normal
    assert normal.index("int32 first = 1;") < normal.index(".n.M.N n = 2;") < normal.index("oneof choice")
    assert normal.index("string a = 5;") < normal.index("string b = 7;")
    assert normal.index("E_ONE = 1;") < normal.index("E_TWO = 2;")
    assert normal.index("reserved 3;") < normal.index("reserved 9;")
    # two spellings of one schema normalize alike; the normalized text is itself a valid schema
    reordered = text.replace("int32 first = 1;", "").replace("N n = 2;", "int32 first = 1; N n = 2;")
    assert proto(reordered).normalized().canonical() == normal
    assert proto(normal).normalized().canonical() == normal


# -- compatibility ----------------------------------------------------------------------------------

BASE = """
syntax = "proto3";
package p;
message M {
  int32 a = 1;
  string b = 2;
  oneof o { int32 x = 3; string w = 8; }
  int32 y = 4;
  int32 z = 5;
  N n = 6;
  E e = 7;
  optional int64 opt = 9;
  map<string, int32> counts = 10;
}
message N { string v = 1; }
enum E { E0 = 0; E1 = 1; }
"""


def with_change(old: str, new: str) -> str:
    assert old in BASE, old
    return BASE.replace(old, new)


# (case, updated schema, the difference types BACKWARD reports)
COMPATIBILITY_CASES = [
    ("identical", BASE, []),
    ("field added", with_change("int32 z = 5;", "int32 z = 5; string added = 20;"), []),
    ("field removed", with_change("int32 z = 5;", ""), []),
    ("field removed and reserved", with_change("int32 z = 5;", "reserved 5;"), []),
    ("field renamed", with_change("int32 a = 1;", "int32 renamed = 1;"), []),
    ("int32 -> int64", with_change("int32 a = 1;", "int64 a = 1;"), []),
    ("int32 -> uint64", with_change("int32 a = 1;", "uint64 a = 1;"), []),
    ("int32 -> bool", with_change("int32 a = 1;", "bool a = 1;"), []),
    ("int32 -> enum", with_change("int32 a = 1;", "E a = 1;"), []),
    ("enum -> int32", with_change("E e = 7;", "int32 e = 7;"), []),
    ("string -> bytes", with_change("string b = 2;", "bytes b = 2;"), []),
    ("int32 -> sint32", with_change("int32 a = 1;", "sint32 a = 1;"), ["FIELD_SCALAR_KIND_CHANGED"]),
    ("int32 -> fixed32", with_change("int32 a = 1;", "fixed32 a = 1;"), ["FIELD_SCALAR_KIND_CHANGED"]),
    ("int32 -> string", with_change("int32 a = 1;", "string a = 1;"), ["FIELD_SCALAR_KIND_CHANGED"]),
    ("int32 -> float", with_change("int32 a = 1;", "float a = 1;"), ["FIELD_SCALAR_KIND_CHANGED"]),
    ("scalar -> message", with_change("int32 a = 1;", "N a = 1;"), ["FIELD_KIND_CHANGED"]),
    ("message -> scalar", with_change("N n = 6;", "string n = 6;"), ["FIELD_KIND_CHANGED"]),
    ("scalar -> map", with_change("int32 a = 1;", "map<string, int32> a = 1;"), ["FIELD_KIND_CHANGED"]),
    ("map value int32 -> int64", with_change("map<string, int32> counts", "map<string, int64> counts"), []),
    ("map value int32 -> string", with_change("map<string, int32> counts", "map<string, string> counts"),
     ["FIELD_SCALAR_KIND_CHANGED"]),
    ("message type renamed", with_change("N n = 6;", "O n = 6;") + "message O { string v = 1; }",
     ["FIELD_NAMED_TYPE_CHANGED"]),
    ("optional -> repeated", with_change("optional int64 opt = 9;", "repeated int64 opt = 9;"),
     ["FIELD_NUMERIC_LABEL_CHANGED"]),
    ("message removed", with_change("message N { string v = 1; }", "").replace("N n = 6;", ""),
     ["MESSAGE_REMOVED"]),
    ("message added", BASE + "message Extra {}", []),
    ("enum constant added", with_change("E1 = 1;", "E1 = 1; E2 = 2;"), []),
    ("enum constant removed", with_change("E1 = 1;", ""), []),
    ("enum constant renamed", with_change("E1 = 1;", "RENAMED = 1;"), []),
    ("package changed", with_change("package p;", "package q;"), ["PACKAGE_CHANGED"]),
    ("oneof member removed", with_change("string w = 8; }", "}"), ["ONEOF_FIELD_REMOVED"]),
    ("oneof deleted with all members", with_change("oneof o { int32 x = 3; string w = 8; }", ""), []),
    ("oneof field added", with_change("string w = 8; }", "string w = 8; int64 more = 30; }"), []),
    ("oneof renamed", with_change("oneof o {", "oneof renamed {"), []),
    ("field moved out of its oneof", with_change("oneof o { int32 x = 3; string w = 8; }",
                                                 "int32 x = 3; oneof o { string w = 8; }"), []),
    ("one field moved into a new oneof", with_change("int32 y = 4;", "oneof fresh { int32 y = 4; }"), []),
    ("field moved into an existing oneof", with_change("string w = 8; }\n  int32 y = 4;", "string w = 8; int32 y = 4; }"),
     ["FIELD_MOVED_TO_EXISTING_ONEOF"]),
    ("several fields moved into a new oneof",
     with_change("int32 y = 4;\n  int32 z = 5;", "oneof fresh { int32 y = 4; int32 z = 5; }"),
     ["MULTIPLE_FIELDS_MOVED_TO_ONEOF"]),
    ("message moved", with_change("message N { string v = 1; }", "").replace("enum E", "message N { string v = 1; }\nenum E"),
     []),
]


def backward(old: str, new: str, references: dict | None = None) -> list[str]:
    return proto(new, references).is_backward_compatible(proto(old, references))


def error_types(messages: list[str]) -> list[str]:
    return [m.split('"')[1] for m in messages]


@pytest.mark.parametrize("case, updated, expected", COMPATIBILITY_CASES, ids=[c[0] for c in COMPATIBILITY_CASES])
def test_backward_compatibility_rules(case, updated, expected):
    assert error_types(backward(BASE, updated)) == expected


def test_forward_is_backward_swapped():
    # adding a required-free field is fine both ways; a changed scalar kind fails both ways
    added = with_change("int32 z = 5;", "int32 z = 5; string added = 20;")
    assert backward(added, BASE) == []
    changed = with_change("int32 a = 1;", "string a = 1;")
    assert error_types(backward(changed, BASE)) == ["FIELD_SCALAR_KIND_CHANGED"]


def test_float_and_double_are_kinds_of_their_own():
    floats = with_change("int32 a = 1;", "float a = 1;")
    assert error_types(backward(floats, floats.replace("float a", "double a"))) == ["FIELD_SCALAR_KIND_CHANGED"]


def test_proto2_required_fields():
    old = 'syntax = "proto2"; message M { required int32 a = 1; optional int32 b = 2; }'
    removed = 'syntax = "proto2"; message M { optional int32 b = 2; }'
    added = 'syntax = "proto2"; message M { required int32 a = 1; optional int32 b = 2; required int32 c = 3; }'
    assert error_types(backward(old, removed)) == ["REQUIRED_FIELD_REMOVED"]
    assert error_types(backward(old, added)) == ["REQUIRED_FIELD_ADDED"]
    repeated = 'syntax = "proto2"; message M { required int32 a = 1; repeated int32 b = 2; }'
    assert error_types(backward(old, repeated)) == ["FIELD_NUMERIC_LABEL_CHANGED"]
    strings = 'syntax = "proto2"; message M { required int32 a = 1; optional string s = 2; }'
    repeated_strings = 'syntax = "proto2"; message M { required int32 a = 1; repeated string s = 2; }'
    assert backward(strings, repeated_strings) == []  # FIELD_STRING_OR_BYTES_LABEL_CHANGED: compatible


def test_nested_message_changes_are_found_with_their_path():
    old = 'syntax = "proto3"; message Outer { message Inner { int32 a = 1; } Inner i = 1; }'
    new = 'syntax = "proto3"; message Outer { message Inner { string a = 1; } Inner i = 1; }'
    [message] = backward(old, new)
    assert message == (
        '{errorType:"FIELD_SCALAR_KIND_CHANGED", description:"The kind of a SCALAR field at path '
        "'#/Outer/Inner/1' in the new schema does not match its kind in the old schema\"}"
    )


def test_a_changed_reference_is_compared_through_the_field_that_uses_it():
    old_ref = 'syntax = "proto3"; package common; message Money { int64 units = 1; }'
    new_ref = 'syntax = "proto3"; package common; message Money { string units = 1; }'
    text = 'syntax = "proto3"; import "money.proto"; message Pay { common.Money amount = 1; }'
    old = proto(text, {"money.proto": old_ref})
    new = proto(text, {"money.proto": new_ref})
    assert error_types(new.is_backward_compatible(old)) == ["FIELD_SCALAR_KIND_CHANGED", "FIELD_NAMED_TYPE_CHANGED"]
    assert proto(text, {"money.proto": old_ref}).is_backward_compatible(old) == []


def test_recursive_messages_terminate():
    text = 'syntax = "proto3"; message Tree { repeated Tree children = 1; int32 v = 2; }'
    assert backward(text, text) == []


def test_a_different_schema_type_is_incompatible():
    from kbroker.schema_registry.formats import parse as parse_any

    json_schema = parse_any("JSON", '{"type": "object"}', {})
    assert proto(BASE).is_backward_compatible(json_schema) == ["Incompatible because of different schema type"]


# -- property: the canonical text is a fixed point ---------------------------------------------------

SCALARS = ["double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64",
           "sfixed32", "sfixed64", "bool", "string", "bytes"]
names = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)


def _protoc_key(name: str) -> str:
    """What protoc compares names by: proto3 refuses two fields whose JSON names agree and two
    enum values that agree once underscores and case are ignored (SIZE_A and SIZE_A_)."""
    return name.replace("_", "").lower()


@st.composite
def proto3_files(draw):
    """A proto3 file: top-level and nested messages and enums, fields of every kind whose types are
    spelled short, package-qualified or fully qualified."""
    package = draw(st.sampled_from(["Shop.V1", "Acme"]))  # capitalized: no field name shadows it
    messages = [f"M{i}" for i in range(draw(st.integers(1, 3)))]
    nested = {m: draw(st.booleans()) for m in messages}  # each may hold a message Inner and enum Kind
    enum_names = draw(st.lists(st.sampled_from(["Color", "Size"]), unique=True, max_size=2))
    spelled = []
    for message in messages:
        spelled += [message, f"{package}.{message}", f".{package}.{message}"]
        if nested[message]:
            spelled += [f"{message}.Inner", f"{message}.Kind", f".{package}.{message}.Inner"]
    spelled += enum_names + SCALARS

    def fields(prefix: str) -> str:
        out = []
        for number, name in enumerate(draw(st.lists(names, unique_by=_protoc_key, max_size=5)), start=1):
            kind = draw(st.sampled_from(["plain", "repeated", "optional", "map", "oneof"]))
            type_ = draw(st.sampled_from(spelled))
            if kind == "map":
                out.append(f"map<{draw(st.sampled_from(['string', 'int32', 'bool']))}, {type_}> {name} = {number};")
            elif kind == "oneof":
                out.append(f"oneof {prefix}{name}_choice {{ {type_} {name} = {number}; }}")
            elif kind == "plain":
                out.append(f"{type_} {name} = {number};")
            else:
                out.append(f"{kind} {type_} {name} = {number};")
        return " ".join(out)

    lines = ['syntax = "proto3";', f"package {package};"]
    for message in messages:
        inner = f"message Inner {{ {fields('i')} }} enum Kind {{ KIND_{message}_ZERO = 0; }}" if nested[message] else ""
        lines.append(f"message {message} {{ {fields('')} {inner} }}")
    for enum in enum_names:
        values = draw(st.lists(names.map(str.upper), unique_by=_protoc_key, min_size=1,
                                max_size=4))
        lines.append(f"enum {enum} {{ " + " ".join(f"{enum.upper()}_{v} = {i};" for i, v in enumerate(values)) + " }")
    return "\n".join(lines)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(proto3_files())
def test_canonical_is_a_fixed_point(text):
    canonical = round_trips(text)
    assert proto(canonical).is_backward_compatible(proto(text)) == []
    assert proto(proto(canonical).normalized().canonical()).normalized().canonical() == proto(
        text).normalized().canonical()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(proto3_files(), proto3_files())
def test_any_two_schemas_compare(first, second):
    a, b = proto(first), proto(second)
    for message in b.is_backward_compatible(a) + a.is_backward_compatible(b):
        assert message.startswith('{errorType:"') and "%s" not in message
