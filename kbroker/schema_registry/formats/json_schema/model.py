"""A JSON Schema as the typed tree Confluent's compatibility rules are written against.

Confluent's registry loads a JSON Schema with the Everit library into one class per kind of schema
(ObjectSchema, StringSchema, CombinedSchema, ...) and its diff compares those classes. This module
builds the same tree from the JSON, with Everit's loading rules:

- ``true`` and ``{}`` are empty schemas, ``false`` the false schema; ``$ref`` is a reference, resolved
  on first use (recursive schemas are finite trees of lazily resolved references);
- the keywords of one schema object each yield a schema -- ``enum``, each of ``allOf``/``anyOf``/
  ``oneOf``, ``not``, ``const``, the ``type`` (several types: an ``anyOf`` of one schema per type),
  or, without a ``type``, one schema per kind whose keywords appear (``properties`` makes an object
  schema, ``maxLength`` a string schema, ...), and ``if``/``then``/``else``. None gives the empty
  schema, one is the schema, several are combined with ``allOf``;
- ``title``, ``description``, ``$id`` and ``default`` are kept on the resulting schema.
"""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any, Callable

_OBJECT_KEYWORDS = ("properties", "required", "minProperties", "maxProperties", "dependencies",
                    "dependentRequired", "dependentSchemas", "patternProperties", "additionalProperties",
                    "propertyNames", "unevaluatedProperties")
_ARRAY_KEYWORDS = ("items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains",
                   "maxContains", "minContains", "unevaluatedItems")
_NUMBER_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_STRING_KEYWORDS = ("minLength", "maxLength", "pattern", "format")


@dataclasses.dataclass(eq=False)
class Schema:
    id: str | None = None
    title: str | None = None
    description: str | None = None
    default: Any = dataclasses.field(default=None)
    has_default: bool = False
    raw: Any = None  # the JSON it was loaded from: combined subschemas are deduplicated by it
    connect_type: str | None = None  # Kafka Connect's "connect.type", which Confluent's diff consults

    kind = "schema"


class EmptySchema(Schema):
    kind = "empty"


class TrueSchema(EmptySchema):
    kind = "true"


class FalseSchema(Schema):
    kind = "false"


class NullSchema(Schema):
    kind = "null"


class BooleanSchema(Schema):
    kind = "boolean"


@dataclasses.dataclass(eq=False)
class StringSchema(Schema):
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    kind = "string"


@dataclasses.dataclass(eq=False)
class NumberSchema(Schema):
    minimum: Decimal | None = None
    maximum: Decimal | None = None
    exclusive_minimum: Decimal | None = None
    exclusive_maximum: Decimal | None = None
    multiple_of: Decimal | None = None
    requires_integer: bool = False
    kind = "number"


@dataclasses.dataclass(eq=False)
class EnumSchema(Schema):
    values: list = dataclasses.field(default_factory=list)
    kind = "enum"


@dataclasses.dataclass(eq=False)
class ConstSchema(Schema):
    value: Any = None
    kind = "const"


@dataclasses.dataclass(eq=False)
class CombinedSchema(Schema):
    criterion: str = "allOf"  # allOf, anyOf or oneOf
    subschemas: list = dataclasses.field(default_factory=list)
    kind = "combined"


@dataclasses.dataclass(eq=False)
class NotSchema(Schema):
    must_not_match: Schema | None = None
    kind = "not"


@dataclasses.dataclass(eq=False)
class ConditionalSchema(Schema):
    kind = "conditional"


@dataclasses.dataclass(eq=False)
class ObjectSchema(Schema):
    properties: dict = dataclasses.field(default_factory=dict)
    required: list = dataclasses.field(default_factory=list)
    min_properties: int | None = None
    max_properties: int | None = None
    property_dependencies: dict = dataclasses.field(default_factory=dict)  # name -> set of names
    schema_dependencies: dict = dataclasses.field(default_factory=dict)  # name -> Schema
    pattern_properties: dict = dataclasses.field(default_factory=dict)  # regex -> Schema
    permits_additional_properties: bool = True
    additional_properties: Schema | None = None
    unevaluated_properties: Schema | None = None
    kind = "object"


@dataclasses.dataclass(eq=False)
class ArraySchema(Schema):
    all_items: Schema | None = None
    item_schemas: list | None = None
    permits_additional_items: bool = True
    additional_items: Schema | None = None
    unevaluated_items: Schema | None = None
    min_items: int | None = None
    max_items: int | None = None
    unique_items: bool = False
    min_contains: int | None = None
    max_contains: int | None = None
    kind = "array"


@dataclasses.dataclass(eq=False)
class ReferenceSchema(Schema):
    ref: str = ""
    resolve: Callable[[], Schema] | None = None
    kind = "reference"

    def referred(self) -> Schema:
        return self.resolve()


class Loader:
    """Builds the tree; ``resolver`` is a ``referencing`` resolver for the document being loaded."""

    def __init__(self, draft: str, specification):
        self.draft = draft  # "4", "6", "7", "2019-09" or "2020-12"
        self.specification = specification
        self._resolved: dict[int, Schema] = {}  # id(JSON node) -> its schema: cycles stay finite

    @property
    def modern(self) -> bool:
        return self.draft in ("2019-09", "2020-12")

    def load(self, node, resolver) -> Schema:
        if node is True:
            return TrueSchema(raw=node)
        if node is False:
            return FalseSchema(raw=node)
        if not isinstance(node, dict):
            return EmptySchema(raw=node)
        id_keyword = "id" if self.draft == "4" else "$id"
        if isinstance(node.get(id_keyword), str):
            resolver = resolver.in_subresource(self.specification.create_resource(node))
        if isinstance(node.get("$ref"), str):
            schema = self._reference(node["$ref"], resolver)
        else:
            extracted = self._extract(node, resolver)
            if not extracted:
                schema = EmptySchema()
            elif len(extracted) == 1:
                schema = extracted[0]
            else:
                schema = CombinedSchema(criterion="allOf", subschemas=extracted)
        schema.raw = node
        schema.id = node.get(id_keyword) if isinstance(node.get(id_keyword), str) else None
        schema.title = node.get("title")
        schema.description = node.get("description")
        if "default" in node:
            schema.default, schema.has_default = node["default"], True
        if isinstance(node.get("connect.type"), str):
            schema.connect_type = node["connect.type"]
        return schema

    def remember(self, node, schema: Schema) -> None:
        self._resolved[id(node)] = schema

    def _reference(self, ref: str, resolver) -> ReferenceSchema:
        def resolve() -> Schema:
            resolved = resolver.lookup(ref)
            key = id(resolved.contents)
            if key not in self._resolved:
                self._resolved[key] = EmptySchema()  # a placeholder while it loads
                self._resolved[key] = self.load(resolved.contents, resolved.resolver)
            return self._resolved[key]

        return ReferenceSchema(ref=ref, resolve=resolve)

    def _extract(self, node: dict, resolver) -> list[Schema]:
        found: list[Schema] = []
        if isinstance(node.get("enum"), list):
            found.append(EnumSchema(values=list(node["enum"])))
        for criterion in ("allOf", "anyOf", "oneOf"):
            if isinstance(node.get(criterion), list):
                found.append(CombinedSchema(
                    criterion=criterion, subschemas=[self.load(s, resolver) for s in node[criterion]]))
        if "not" in node:
            found.append(NotSchema(must_not_match=self.load(node["not"], resolver)))
        if "const" in node and self.draft != "4":
            found.append(ConstSchema(value=node["const"]))
        declared = node.get("type")
        if isinstance(declared, str):
            found.append(self._typed(declared, node, resolver, explicit=True))
        elif isinstance(declared, list):
            found.append(CombinedSchema(
                criterion="anyOf", subschemas=[self._typed(t, node, resolver, explicit=True) for t in declared]))
        else:
            for kind, keywords in (("object", _OBJECT_KEYWORDS), ("array", _ARRAY_KEYWORDS),
                                   ("number", _NUMBER_KEYWORDS), ("string", _STRING_KEYWORDS)):
                if any(k in node for k in keywords):
                    found.append(self._typed(kind, node, resolver, explicit=False))
        if "if" in node:
            found.append(ConditionalSchema())
        return found

    def _typed(self, kind: str, node: dict, resolver, explicit: bool) -> Schema:
        if kind == "object":
            return self._object(node, resolver)
        if kind == "array":
            return self._array(node, resolver)
        if kind in ("number", "integer"):
            return self._number(node, requires_integer=kind == "integer")
        if kind == "string":
            return StringSchema(min_length=node.get("minLength"), max_length=node.get("maxLength"),
                                pattern=node.get("pattern"))
        if kind == "boolean":
            return BooleanSchema()
        if kind == "null":
            return NullSchema()
        return EmptySchema()

    def _number(self, node: dict, requires_integer: bool) -> NumberSchema:
        schema = NumberSchema(minimum=node.get("minimum"), maximum=node.get("maximum"),
                              multiple_of=node.get("multipleOf"), requires_integer=requires_integer)
        # Draft 4's exclusiveMaximum is a flag on maximum; from draft 6 on it is the limit itself.
        if not isinstance(node.get("exclusiveMinimum"), bool):
            schema.exclusive_minimum = node.get("exclusiveMinimum")
        if not isinstance(node.get("exclusiveMaximum"), bool):
            schema.exclusive_maximum = node.get("exclusiveMaximum")
        return schema

    def _object(self, node: dict, resolver) -> ObjectSchema:
        schema = ObjectSchema(min_properties=node.get("minProperties"), max_properties=node.get("maxProperties"))
        properties = node.get("properties")
        if isinstance(properties, dict):
            schema.properties = {name: self.load(s, resolver) for name, s in properties.items()}
        if isinstance(node.get("required"), list):
            schema.required = list(node["required"])
        dependencies = dict(node.get("dependencies") or {})
        dependencies.update(node.get("dependentRequired") or {})
        dependencies.update(node.get("dependentSchemas") or {})
        for name, dependency in dependencies.items():
            if isinstance(dependency, list):
                schema.property_dependencies[name] = set(dependency)
            else:
                schema.schema_dependencies[name] = self.load(dependency, resolver)
        if isinstance(node.get("patternProperties"), dict):
            schema.pattern_properties = {p: self.load(s, resolver) for p, s in node["patternProperties"].items()}
        additional = node.get("additionalProperties")
        if isinstance(additional, bool):
            schema.permits_additional_properties = additional
        elif isinstance(additional, dict):
            schema.additional_properties = self.load(additional, resolver)
        if self.modern and "unevaluatedProperties" in node:
            schema.unevaluated_properties = self.load(node["unevaluatedProperties"], resolver)
        return schema

    def _array(self, node: dict, resolver) -> ArraySchema:
        schema = ArraySchema(min_items=node.get("minItems"), max_items=node.get("maxItems"),
                             unique_items=node.get("uniqueItems") is True,
                             min_contains=node.get("minContains"), max_contains=node.get("maxContains"))
        items = node.get("items")
        additional = node.get("additionalItems")
        if self.draft == "2020-12" and "prefixItems" in node:
            # 2020-12 renamed the tuple form: prefixItems are the positions, items what follows
            schema.item_schemas = [self.load(s, resolver) for s in node["prefixItems"]]
            additional = items
        elif isinstance(items, list):
            schema.item_schemas = [self.load(s, resolver) for s in items]
        elif items is not None:
            schema.all_items = self.load(items, resolver)
        if isinstance(additional, bool):
            schema.permits_additional_items = additional
        elif isinstance(additional, dict):
            schema.additional_items = self.load(additional, resolver)
        if self.modern and "unevaluatedItems" in node:
            schema.unevaluated_items = self.load(node["unevaluatedItems"], resolver)
        return schema
