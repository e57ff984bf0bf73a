"""The registry's JSON Schema format (kbroker.schema_registry.formats.json_schema), without a broker:
validation per draft, the canonical and normalized texts, references through $ref, and Confluent's
compatibility rules (open, closed and partially open content models, ...), one table row per rule."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.schema_registry.formats import InvalidSchema, parse


def schema(value, references: dict | None = None):
    text = value if isinstance(value, str) else json.dumps(value)
    return parse("JSON", text, {k: v if isinstance(v, str) else json.dumps(v) for k, v in (references or {}).items()})


# -- parsing and the canonical text ----------------------------------------------------------------


def test_canonical_is_compact_json_in_the_order_given():
    text = '{\n  "type": "object",\n  "properties": {"z": {"type": "string"}, "a": {"type": "number"}},\n  "required": ["z"]\n}'
    assert schema(text).canonical() == '{"type":"object","properties":{"z":{"type":"string"},"a":{"type":"number"}},"required":["z"]}'


def test_canonical_keeps_numbers_and_text_as_written():
    text = '{"type": "number", "maximum": 1.50, "minimum": 1E+2, "description": "caf\\u00e9 \\"x\\" / y"}'
    assert schema(text).canonical() == '{"type":"number","maximum":1.50,"minimum":1E+2,"description":"café \\"x\\" / y"}'


def test_normalized_sorts_every_object():
    text = '{"type": "object", "properties": {"z": {"type": "string", "maxLength": 3}, "a": {}}}'
    assert schema(text).normalized().canonical() == (
        '{"properties":{"a":{},"z":{"maxLength":3,"type":"string"}},"type":"object"}')


def test_boolean_schemas_are_schemas():
    assert schema("true").canonical() == "true"
    assert schema("false").canonical() == "false"


@pytest.mark.parametrize("draft", [
    "http://json-schema.org/draft-04/schema#",
    "http://json-schema.org/draft-06/schema#",
    "http://json-schema.org/draft-07/schema#",
    "https://json-schema.org/draft/2019-09/schema",
    "https://json-schema.org/draft/2020-12/schema",
])
def test_every_draft_confluent_supports(draft):
    parsed = schema({"$schema": draft, "type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}})
    assert parsed.canonical().startswith('{"$schema":')


@pytest.mark.parametrize("text, fragment", [
    ("{", "not JSON"),
    ("[1, 2]", "an object or a boolean"),
    ('"string"', "an object or a boolean"),
    ('{"type": "strin"}', "is not valid"),
    ('{"type": "string", "minLength": -1}', "minLength"),
    ('{"required": "name"}', "required"),
    ('{"properties": {"a": 5}}', "properties/a"),
    ('{"$ref": "missing.json"}', "missing.json"),
    ('{"$ref": "#/definitions/absent"}', "absent"),
    ('{"$ref": "#"}', "nothing but references"),
    ('{"definitions": {"a": {"$ref": "#/definitions/b"}, "b": {"$ref": "#/definitions/a"}}, "$ref": "#/definitions/a"}',
     "nothing but references"),
    # draft 4 only knows the boolean exclusiveMaximum
    ('{"$schema": "http://json-schema.org/draft-04/schema#", "exclusiveMaximum": 5}', "exclusiveMaximum"),
])
def test_bad_schemas_are_refused(text, fragment):
    with pytest.raises(InvalidSchema) as refused:
        schema(text)
    message = str(refused.value)
    assert message.startswith("Invalid schema ")
    assert fragment in message


def test_references_resolve_by_name():
    address = {"type": "object", "properties": {"street": {"type": "string"}}, "required": ["street"]}
    customer = {"type": "object", "properties": {"home": {"$ref": "address.json"}}}
    parsed = schema(customer, {"address.json": address})
    assert parsed.tree().properties["home"].referred().required == ["street"]


def test_references_resolve_against_the_root_id_and_into_definitions():
    types = {"$id": "https://example.com/types.json",
             "definitions": {"Money": {"type": "object", "properties": {"units": {"type": "integer"}}}}}
    order = {"$id": "https://example.com/order.json", "type": "object",
             "properties": {"price": {"$ref": "types.json#/definitions/Money"}}}
    parsed = schema(order, {"types.json": types})
    assert list(parsed.tree().properties["price"].referred().properties) == ["units"]


def test_recursive_schemas_load_and_compare():
    tree = {"type": "object", "properties": {"value": {"type": "integer"},
                                             "children": {"type": "array", "items": {"$ref": "#"}}}}
    assert schema(tree).is_backward_compatible(schema(tree)) == []
    changed = json.loads(json.dumps(tree))
    changed["properties"]["value"]["type"] = "string"
    assert error_types(schema(changed).is_backward_compatible(schema(tree))) == ["TYPE_CHANGED"]


# -- compatibility ----------------------------------------------------------------------------------

OPEN = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}, "required": ["a"]}
CLOSED = {**OPEN, "additionalProperties": False}
PARTIAL = {**OPEN, "additionalProperties": {"type": "string"}}


def changed(base: dict, **changes) -> dict:
    result = json.loads(json.dumps(base))
    for key, value in changes.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return result


def with_property(base: dict, name: str, value, required: bool = False) -> dict:
    result = json.loads(json.dumps(base))
    result["properties"][name] = value
    if required:
        result["required"] = result.get("required", []) + [name]
    return result


def without_property(base: dict, name: str) -> dict:
    result = json.loads(json.dumps(base))
    del result["properties"][name]
    result["required"] = [r for r in result.get("required", []) if r != name]
    return result


def error_types(messages: list[str]) -> list[str]:
    return [m.split('"')[1] for m in messages]


STRING = {"type": "string"}

# (case, original, update, the difference types BACKWARD reports)
COMPATIBILITY_CASES = [
    ("identical", OPEN, OPEN, []),
    # open content model: anything may arrive, so a new property must accept anything
    ("optional property added to an open model", OPEN, with_property(OPEN, "c", STRING),
     ["OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"]),
    ("required property added to an open model", OPEN, with_property(OPEN, "c", STRING, required=True),
     ["REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"]),
    ("property with an empty schema added to an open model", OPEN, with_property(OPEN, "c", {}), []),
    ("property removed from an open model", OPEN, without_property(OPEN, "b"), []),
    # closed content model: nothing else arrives
    ("optional property added to a closed model", CLOSED, with_property(CLOSED, "c", STRING), []),
    ("required property added to a closed model", CLOSED, with_property(CLOSED, "c", STRING, required=True),
     ["REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"]),
    ("required property with a default added to a closed model", CLOSED,
     with_property(CLOSED, "c", {"type": "string", "default": "x"}, required=True), []),
    ("property removed from a closed model", CLOSED, without_property(CLOSED, "b"),
     ["PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"]),
    ("property removed from a model that became open", CLOSED, without_property(OPEN, "b"), []),
    ("a false property removed from a closed model", with_property(CLOSED, "gone", False), CLOSED, []),
    # partially open content model: extra properties must match additionalProperties
    ("property added, covered by the partial model", PARTIAL, with_property(PARTIAL, "c", STRING), []),
    ("property added, not covered by the partial model", PARTIAL, with_property(PARTIAL, "c", {"type": "number"}),
     ["TYPE_CHANGED", "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"]),
    ("property removed, covered by the partial model", PARTIAL, without_property(PARTIAL, "a"), []),
    ("property removed, not covered by the partial model", PARTIAL, without_property(PARTIAL, "b"),
     ["TYPE_CHANGED", "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"]),
    ("pattern properties make a model partially open",
     changed(OPEN, patternProperties={"^x_": STRING}), with_property(changed(OPEN, patternProperties={"^x_": STRING}),
                                                                     "x_new", STRING), []),
    ("additionalProperties closed", OPEN, CLOSED, ["ADDITIONAL_PROPERTIES_REMOVED"]),
    ("additionalProperties opened", CLOSED, OPEN, []),
    ("additionalProperties narrowed to a schema", OPEN, PARTIAL, ["ADDITIONAL_PROPERTIES_NARROWED"]),
    ("additionalProperties extended from a schema", PARTIAL, OPEN, []),
    # required
    ("required removed", OPEN, changed(OPEN, required=[]), []),
    ("required added", OPEN, changed(OPEN, required=["a", "b"]), ["REQUIRED_ATTRIBUTE_ADDED"]),
    ("required added with a default", with_property(OPEN, "b", {"type": "integer", "default": 0}),
     changed(with_property(OPEN, "b", {"type": "integer", "default": 0}), required=["a", "b"]), []),
    # types
    ("type changed", {"type": "string"}, {"type": "integer"}, ["TYPE_CHANGED"]),
    ("integer extended to number", {"type": "integer"}, {"type": "number"}, []),
    ("number narrowed to integer", {"type": "number"}, {"type": "integer"}, ["TYPE_NARROWED"]),
    ("type extended to a union", {"type": "string"}, {"type": ["string", "null"]}, []),
    ("union narrowed to a type", {"type": ["string", "null"]}, {"type": "string"}, ["TYPE_CHANGED"]),
    ("anything becomes the empty schema", {"type": "string", "maxLength": 3}, {}, []),
    # enums
    ("enum extended", {"enum": ["a", "b"]}, {"enum": ["a", "b", "c"]}, []),
    ("enum narrowed", {"enum": ["a", "b"]}, {"enum": ["a"]}, ["ENUM_ARRAY_NARROWED"]),
    ("enum changed", {"enum": ["a", "b"]}, {"enum": ["a", "c"]}, ["ENUM_ARRAY_CHANGED"]),
    ("const changed", {"const": 1}, {"const": 2}, ["ENUM_ARRAY_CHANGED"]),
    # string, number, object and array limits
    ("maxLength added", STRING, {"type": "string", "maxLength": 5}, ["MAX_LENGTH_ADDED"]),
    ("maxLength increased", {"type": "string", "maxLength": 5}, {"type": "string", "maxLength": 9}, []),
    ("maxLength decreased", {"type": "string", "maxLength": 9}, {"type": "string", "maxLength": 5},
     ["MAX_LENGTH_DECREASED"]),
    ("minLength increased", {"type": "string", "minLength": 1}, {"type": "string", "minLength": 2},
     ["MIN_LENGTH_INCREASED"]),
    ("minLength removed", {"type": "string", "minLength": 1}, STRING, []),
    ("pattern added", STRING, {"type": "string", "pattern": "^a"}, ["PATTERN_ADDED"]),
    ("pattern changed", {"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "^b"}, ["PATTERN_CHANGED"]),
    ("maximum decreased", {"type": "number", "maximum": 10}, {"type": "number", "maximum": 5}, ["MAXIMUM_DECREASED"]),
    ("minimum decreased", {"type": "number", "minimum": 10}, {"type": "number", "minimum": 5}, []),
    ("multipleOf expanded", {"type": "number", "multipleOf": 2}, {"type": "number", "multipleOf": 4},
     ["MULTIPLE_OF_EXPANDED"]),
    ("multipleOf reduced", {"type": "number", "multipleOf": 4}, {"type": "number", "multipleOf": 2}, []),
    ("maxProperties added", OPEN, changed(OPEN, maxProperties=3), ["MAX_PROPERTIES_ADDED"]),
    ("minProperties decreased", changed(OPEN, minProperties=2), changed(OPEN, minProperties=1), []),
    ("minItems increased", {"type": "array", "minItems": 1}, {"type": "array", "minItems": 2}, ["MIN_ITEMS_INCREASED"]),
    ("maxItems removed", {"type": "array", "maxItems": 1}, {"type": "array"}, []),
    ("uniqueItems added", {"type": "array"}, {"type": "array", "uniqueItems": True}, ["UNIQUE_ITEMS_ADDED"]),
    ("items type changed", {"type": "array", "items": STRING}, {"type": "array", "items": {"type": "number"}},
     ["TYPE_CHANGED"]),
    # tuples: the array's own content model decides about added and removed positions
    ("item added to an open tuple", {"type": "array", "items": [STRING]}, {"type": "array", "items": [STRING, STRING]},
     ["ITEM_ADDED_TO_OPEN_CONTENT_MODEL"]),
    ("item added to a closed tuple", {"type": "array", "items": [STRING], "additionalItems": False},
     {"type": "array", "items": [STRING, STRING], "additionalItems": False}, []),
    ("item removed from a closed tuple", {"type": "array", "items": [STRING, STRING], "additionalItems": False},
     {"type": "array", "items": [STRING], "additionalItems": False}, ["ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL"]),
    # combined schemas
    ("oneOf extended", {"oneOf": [STRING, {"type": "integer"}]},
     {"oneOf": [STRING, {"type": "integer"}, {"type": "boolean"}]}, []),
    ("oneOf narrowed", {"oneOf": [STRING, {"type": "integer"}]}, {"oneOf": [STRING]}, ["SUM_TYPE_NARROWED"]),
    ("allOf extended", {"allOf": [OPEN]}, {"allOf": [OPEN, {"required": ["b"]}]}, ["PRODUCT_TYPE_EXTENDED"]),
    ("allOf narrowed", {"allOf": [OPEN, {"required": ["b"]}]}, {"allOf": [OPEN]}, []),
    ("oneOf becomes anyOf", {"oneOf": [STRING, {"type": "integer"}]}, {"anyOf": [STRING, {"type": "integer"}]}, []),
    ("anyOf becomes oneOf", {"anyOf": [STRING, {"type": "integer"}]}, {"oneOf": [STRING, {"type": "integer"}]},
     ["COMBINED_TYPE_CHANGED"]),
    ("oneOf member changed", {"oneOf": [STRING, {"type": "integer"}]}, {"oneOf": [STRING, {"type": "boolean"}]},
     ["COMBINED_TYPE_SUBSCHEMAS_CHANGED"]),
    ("a type becomes a oneOf that holds it", STRING, {"oneOf": [STRING, {"type": "integer"}]}, []),
    ("not narrowed", {"not": {"type": "string"}}, {"not": {"type": ["string", "integer"]}}, ["NOT_TYPE_EXTENDED"]),
    # nested paths
    ("nested property type changed", with_property(OPEN, "inner", OPEN),
     with_property(OPEN, "inner", with_property(OPEN, "a", {"type": "integer"})), ["TYPE_CHANGED"]),
]


@pytest.mark.parametrize("case, original, update, expected", COMPATIBILITY_CASES,
                         ids=[c[0] for c in COMPATIBILITY_CASES])
def test_backward_compatibility_rules(case, original, update, expected):
    assert error_types(schema(update).is_backward_compatible(schema(original))) == expected


def test_forward_is_backward_swapped():
    # closing an open model: BACKWARD fails (old data may carry more), FORWARD passes
    assert schema(CLOSED).is_backward_compatible(schema(OPEN)) != []
    assert schema(OPEN).is_backward_compatible(schema(CLOSED)) == []


def test_messages_are_confluents():
    [message] = schema({"type": "integer"}).is_backward_compatible(schema({"type": "string"}))
    assert message == ('{errorType:"TYPE_CHANGED", description:"A type at path \'#/\' is different between '
                       "the new schema and the old schema'}")
    [message] = schema(without_property(CLOSED, "b")).is_backward_compatible(schema(CLOSED))
    assert "'#/properties/b'" in message


def test_a_changed_reference_changes_compatibility():
    customer = {"type": "object", "properties": {"home": {"$ref": "address.json"}}}
    old_address = {"type": "object", "properties": {"zip": {"type": "string"}}}
    new_address = {"type": "object", "properties": {"zip": {"type": "integer"}}}
    old = schema(customer, {"address.json": old_address})
    new = schema(customer, {"address.json": new_address})
    assert error_types(new.is_backward_compatible(old)) == ["TYPE_CHANGED"]


def test_a_different_schema_type_is_incompatible():
    protobuf = parse("PROTOBUF", 'syntax = "proto3"; message M {}', {})
    assert schema(OPEN).is_backward_compatible(protobuf) == ["Incompatible because of different schema type"]


# -- property: canonical text ------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=12,
)


@settings(max_examples=80, deadline=None)
@given(st.fixed_dictionaries({}, optional={"title": st.text(max_size=8), "description": st.text(max_size=8),
                                           "default": json_values, "examples": st.lists(json_values, max_size=2),
                                           "x-extra": json_values}),
       st.sampled_from([{}, {"type": "object"}, {"type": "string", "maxLength": 4}, {"enum": [1, "a", None]}]))
def test_canonical_is_a_fixed_point(annotations, core):
    text = json.dumps({**core, **annotations}, indent=2)
    first = schema(text)
    assert json.loads(first.canonical()) == json.loads(text)
    assert schema(first.canonical()).canonical() == first.canonical()
    assert schema(first.normalized().canonical()).normalized().canonical() == first.normalized().canonical()
    assert first.is_backward_compatible(schema(first.canonical())) == []


schemas = st.recursive(
    st.sampled_from([{}, True, False, {"type": "string"}, {"type": "integer", "minimum": 0}, {"type": "null"},
                     {"enum": ["a", 1]}, {"const": 3}, {"type": "number", "multipleOf": 0.5},
                     {"type": "string", "maxLength": 4, "pattern": "^a"}]),
    lambda children: st.one_of(
        st.builds(lambda props, closed, required: {
            "type": "object", "properties": props, "required": sorted(props)[:required],
            **({"additionalProperties": closed} if closed is not None else {})},
            st.dictionaries(st.sampled_from(["a", "b", "c"]), children, max_size=3),
            st.one_of(st.none(), st.booleans(), children), st.integers(0, 2)),
        st.builds(lambda items, unique: {"type": "array", "items": items, "uniqueItems": unique}, children,
                  st.booleans()),
        st.builds(lambda key, members: {key: members}, st.sampled_from(["oneOf", "anyOf", "allOf"]),
                  st.lists(children, min_size=1, max_size=3)),
        st.builds(lambda inner: {"not": inner}, children),
    ),
    max_leaves=10,
)


@settings(max_examples=100, deadline=None)
@given(schemas, schemas)
def test_every_schema_is_compatible_with_itself_and_any_pair_compares(first, second):
    a, b = schema(first), schema(second)
    assert a.is_backward_compatible(schema(json.dumps(first))) == []
    for message in b.is_backward_compatible(a) + a.is_backward_compatible(b):
        assert message.startswith('{errorType:"')
