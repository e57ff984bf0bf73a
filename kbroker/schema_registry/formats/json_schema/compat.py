"""JSON Schema compatibility: Confluent's rules, as its json-schema-provider's ``SchemaDiff`` states them.

``differences(original, update)`` compares two ``model`` trees and lists every change as one of
Confluent's difference types (``differences``: the types its default STRICT policy accepts, and
their wording). The rules that matter most:

- content models: an object is *open* when it allows any additional property (no
  ``additionalProperties``, or ``true``, and no ``patternProperties``), *closed* when
  ``additionalProperties`` is ``false``, *partially open* when a schema covers the extra properties.
  A property may be removed from the update only when the update's model still admits it (open, or
  partially open with a schema the old property's schema is compatible with), and added only when
  the original's model did not admit it freely (closed), or a covering schema is compatible with it;
  adding an optional property to an open model is incompatible under STRICT;
- ``required`` may be dropped; it may be added only for a property with a default;
- ``type``: narrowing is incompatible, ``integer`` -> ``number`` and a type turned into a union that
  contains it are extensions;
- ``enum`` may grow, not shrink; ``minLength``/``minimum``/... may loosen, not tighten;
- ``oneOf``/``anyOf`` may gain members and ``allOf`` lose them; members are matched one to one by
  compatibility (a maximum bipartite matching, as Confluent's).
"""

from __future__ import annotations

import json
import re
from decimal import Decimal

from kbroker.schema_registry.formats.json_schema import model as m
from kbroker.schema_registry.formats.json_schema.differences import COMPATIBLE, Difference

class _Context:
    def __init__(self, shared: dict, path: list[str]):
        self.shared = shared  # memo and in-progress pairs, for the whole comparison
        self.path = list(path)
        self.differences: list[Difference] = []

    def add(self, kind: str, *more: str) -> None:
        self.differences.append(Difference(kind, "#/" + "/".join(self.path + list(more))))

    def sub(self) -> "_Context":
        return _Context(self.shared, self.path)

    def compatible(self) -> bool:
        return all(d.type in COMPATIBLE for d in self.differences)

    def enter(self, *parts: str):
        return _Scope(self, parts)


class _Scope:
    def __init__(self, ctx: _Context, parts):
        self.ctx, self.parts = ctx, parts

    def __enter__(self):
        self.ctx.path.extend(self.parts)

    def __exit__(self, *exc):
        del self.ctx.path[len(self.ctx.path) - len(self.parts):]


def differences(original: m.Schema, update: m.Schema) -> list[Difference]:
    ctx = _Context({"memo": {}, "in_progress": set()}, [])
    compare(ctx, original, update)
    return ctx.differences


def compare(ctx: _Context, original: m.Schema | None, update: m.Schema | None) -> None:
    if original is None and update is None:
        return
    if original is None:
        ctx.add("SCHEMA_ADDED")
        return
    if update is None:
        ctx.add("SCHEMA_REMOVED")
        return
    original, update = dereference(original), dereference(update)
    key = (id(original), id(update))
    memo, in_progress = ctx.shared["memo"], ctx.shared["in_progress"]
    if key in memo:
        relative = memo[key]
    elif key in in_progress:
        return  # a recursive schema meets itself: the cycle is assumed compatible, as Confluent's
    else:
        in_progress.add(key)
        try:
            sub = _Context(ctx.shared, [])
            _compare_types(sub, original, update)
            relative = memo[key] = sub.differences
        finally:
            in_progress.discard(key)
    for difference in relative:
        suffix = difference.path[2:]
        path = "#/" + "/".join(ctx.path + ([suffix] if suffix else []))
        ctx.differences.append(Difference(difference.type, path))


class EndlessReference(ValueError):
    """A $ref whose chain of references never reaches a schema ({"$ref": "#"} at the root)."""


def dereference(schema: m.Schema) -> m.Schema:
    seen: set[int] = set()
    while isinstance(schema, m.ReferenceSchema):
        if id(schema) in seen:
            raise EndlessReference(schema.ref)
        seen.add(id(schema))
        schema = schema.referred()
    return schema


def _compare_types(ctx: _Context, original: m.Schema, update: m.Schema) -> None:
    if not isinstance(original, m.CombinedSchema) and isinstance(update, m.CombinedSchema):
        if len(update.subschemas) == 1:
            sub = ctx.sub()
            compare(sub, original, update.subschemas[0])
            if sub.compatible():
                ctx.differences += sub.differences
                return
        elif update.criterion in ("anyOf", "oneOf"):
            for subschema in update.subschemas:
                sub = ctx.sub()
                compare(sub, original, subschema)
                if sub.compatible():
                    ctx.differences += sub.differences
                    ctx.add("SUM_TYPE_EXTENDED")
                    return
    elif isinstance(original, m.CombinedSchema) and not isinstance(update, m.CombinedSchema):
        if len(original.subschemas) == 1:
            sub = ctx.sub()
            compare(sub, original.subschemas[0], update)
            if sub.compatible():
                ctx.differences += sub.differences
                return
        elif original.criterion == "allOf":
            for subschema in original.subschemas:
                sub = ctx.sub()
                compare(sub, subschema, update)
                if sub.compatible():
                    ctx.differences += sub.differences
                    ctx.add("PRODUCT_TYPE_NARROWED")
                    return

    if type(original) is not type(update):
        if isinstance(original, m.FalseSchema) or isinstance(update, m.EmptySchema):
            return  # false admits nothing and the empty schema everything
        if original.connect_type == "bytes" and update.connect_type == "bytes":
            return  # Kafka Connect's decimal-as-bytes fix, accepted by Confluent's diff
        ctx.add("TYPE_CHANGED")
        return

    if original.id != update.id:
        ctx.add("ID_CHANGED")
    if original.title != update.title:
        ctx.add("TITLE_CHANGED")
    if original.description != update.description:
        ctx.add("DESCRIPTION_CHANGED")
    if (original.has_default, original.default) != (update.has_default, update.default):
        ctx.add("DEFAULT_CHANGED")

    compare_by_kind = _BY_KIND.get(type(original))
    if compare_by_kind is not None:
        compare_by_kind(ctx, original, update)


def _limit(ctx, name, before, after, added, removed, increased, decreased) -> None:
    if before == after:
        return
    if before is None:
        ctx.add(added, name)
    elif after is None:
        ctx.add(removed, name)
    elif Decimal(str(before)) < Decimal(str(after)):
        ctx.add(increased, name)
    elif Decimal(str(before)) > Decimal(str(after)):
        ctx.add(decreased, name)


def _compare_strings(ctx, original: m.StringSchema, update: m.StringSchema) -> None:
    _limit(ctx, "maxLength", original.max_length, update.max_length,
           "MAX_LENGTH_ADDED", "MAX_LENGTH_REMOVED", "MAX_LENGTH_INCREASED", "MAX_LENGTH_DECREASED")
    _limit(ctx, "minLength", original.min_length, update.min_length,
           "MIN_LENGTH_ADDED", "MIN_LENGTH_REMOVED", "MIN_LENGTH_INCREASED", "MIN_LENGTH_DECREASED")
    if original.pattern is None and update.pattern is not None:
        ctx.add("PATTERN_ADDED", "pattern")
    elif original.pattern is not None and update.pattern is None:
        ctx.add("PATTERN_REMOVED", "pattern")
    elif original.pattern != update.pattern:
        ctx.add("PATTERN_CHANGED", "pattern")


def _compare_numbers(ctx, original: m.NumberSchema, update: m.NumberSchema) -> None:
    _limit(ctx, "maximum", original.maximum, update.maximum,
           "MAXIMUM_ADDED", "MAXIMUM_REMOVED", "MAXIMUM_INCREASED", "MAXIMUM_DECREASED")
    _limit(ctx, "minimum", original.minimum, update.minimum,
           "MINIMUM_ADDED", "MINIMUM_REMOVED", "MINIMUM_INCREASED", "MINIMUM_DECREASED")
    _limit(ctx, "exclusiveMaximum", original.exclusive_maximum, update.exclusive_maximum,
           "EXCLUSIVE_MAXIMUM_ADDED", "EXCLUSIVE_MAXIMUM_REMOVED", "EXCLUSIVE_MAXIMUM_INCREASED",
           "EXCLUSIVE_MAXIMUM_DECREASED")
    _limit(ctx, "exclusiveMinimum", original.exclusive_minimum, update.exclusive_minimum,
           "EXCLUSIVE_MINIMUM_ADDED", "EXCLUSIVE_MINIMUM_REMOVED", "EXCLUSIVE_MINIMUM_INCREASED",
           "EXCLUSIVE_MINIMUM_DECREASED")
    before = Decimal(str(original.multiple_of)) if original.multiple_of is not None else None
    after = Decimal(str(update.multiple_of)) if update.multiple_of is not None else None
    if before != after:
        if before is None:
            ctx.add("MULTIPLE_OF_ADDED", "multipleOf")
        elif after is None:
            ctx.add("MULTIPLE_OF_REMOVED", "multipleOf")
        elif before != 0 and after % before == 0:
            ctx.add("MULTIPLE_OF_EXPANDED", "multipleOf")
        elif after != 0 and before % after == 0:
            ctx.add("MULTIPLE_OF_REDUCED", "multipleOf")
        else:
            ctx.add("MULTIPLE_OF_CHANGED", "multipleOf")
    if original.requires_integer != update.requires_integer:
        ctx.add("TYPE_EXTENDED" if original.requires_integer else "TYPE_NARROWED")


def _compare_enums(ctx, original: m.EnumSchema, update: m.EnumSchema) -> None:
    before, after = _value_set(original.values), _value_set(update.values)
    if before != after:
        if after >= before:
            ctx.add("ENUM_ARRAY_EXTENDED", "enum")
        elif before >= after:
            ctx.add("ENUM_ARRAY_NARROWED", "enum")
        else:
            ctx.add("ENUM_ARRAY_CHANGED", "enum")


def _value_set(values: list) -> set[str]:
    return {json.dumps(v, sort_keys=True, default=str) for v in values}


def _compare_consts(ctx, original: m.ConstSchema, update: m.ConstSchema) -> None:
    if _value_set([original.value]) != _value_set([update.value]):
        ctx.add("ENUM_ARRAY_CHANGED", "const")


def _compare_nots(ctx, original: m.NotSchema, update: m.NotSchema) -> None:
    with ctx.enter("not"):
        sub = ctx.sub()
        compare(sub, update.must_not_match, original.must_not_match)  # reversed: not inverts the direction
        ctx.add("NOT_TYPE_NARROWED" if sub.compatible() else "NOT_TYPE_EXTENDED")


def _compare_combined(ctx, original: m.CombinedSchema, update: m.CombinedSchema) -> None:
    if original.criterion != update.criterion:
        singleton_before, singleton_after = len(original.subschemas) == 1, len(update.subschemas) == 1
        if (update.criterion == "anyOf" or (singleton_before and singleton_after)
                or (singleton_before and update.criterion == "oneOf")
                or (singleton_after and original.criterion == "allOf")):
            ctx.add("COMBINED_TYPE_EXTENDED")
        else:
            ctx.add("COMBINED_TYPE_CHANGED")
            return
    before, after = _distinct(original.subschemas), _distinct(update.subschemas)
    if len(before) < len(after):
        ctx.add("PRODUCT_TYPE_EXTENDED" if update.criterion == "allOf" else "SUM_TYPE_EXTENDED")
    elif len(before) > len(after):
        ctx.add("SUM_TYPE_NARROWED" if original.criterion in ("anyOf", "oneOf") else "PRODUCT_TYPE_NARROWED")
    edges: dict[int, dict[int, list[Difference]]] = {}
    for i, subschema in enumerate(before):
        with ctx.enter(f"{original.criterion}/{i}"):
            for j, candidate in enumerate(after):
                sub = ctx.sub()
                compare(sub, subschema, candidate)
                if sub.compatible():
                    edges.setdefault(i, {})[j] = sub.differences
    matching = _maximum_matching(edges)
    for i, j in sorted(matching.items()):
        ctx.differences += edges[i][j]
    if len(matching) < min(len(before), len(after)):
        ctx.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED")


def _distinct(subschemas: list[m.Schema]) -> list[m.Schema]:
    seen, distinct = set(), []
    for subschema in subschemas:
        key = json.dumps(subschema.raw, sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            distinct.append(subschema)
    return distinct


def _maximum_matching(edges: dict[int, dict[int, object]]) -> dict[int, int]:
    """Left index -> right index, as many pairs as the compatible edges allow (augmenting paths)."""
    right_to_left: dict[int, int] = {}

    def augment(left: int, visited: set[int]) -> bool:
        for right in edges.get(left, {}):
            if right in visited:
                continue
            visited.add(right)
            if right not in right_to_left or augment(right_to_left[right], visited):
                right_to_left[right] = left
                return True
        return False

    for left in edges:
        augment(left, set())
    return {left: right for right, left in right_to_left.items()}


def _compare_objects(ctx, original: m.ObjectSchema, update: m.ObjectSchema) -> None:
    with ctx.enter("required"):
        for name in original.properties:
            if name in update.properties:
                was, now = name in original.required, name in update.required
                if was and not now:
                    ctx.add("REQUIRED_ATTRIBUTE_REMOVED", name)
                elif now and not was:
                    with_default = update.properties[name].has_default
                    ctx.add("REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED" if with_default else "REQUIRED_ATTRIBUTE_ADDED",
                            name)
    with ctx.enter("properties"):
        for name in list(original.properties) + [n for n in update.properties if n not in original.properties]:
            with ctx.enter(name):
                _compare_property(ctx, original, update, name)
    _compare_dependencies(ctx, original, update)
    with ctx.enter("additionalProperties"):
        if original.permits_additional_properties != update.permits_additional_properties:
            ctx.add("ADDITIONAL_PROPERTIES_ADDED" if update.permits_additional_properties
                    else "ADDITIONAL_PROPERTIES_REMOVED")
        elif original.additional_properties is None and update.additional_properties is not None:
            ctx.add("ADDITIONAL_PROPERTIES_NARROWED")
        elif update.additional_properties is None and original.additional_properties is not None:
            ctx.add("ADDITIONAL_PROPERTIES_EXTENDED")
        else:
            compare(ctx, original.additional_properties, update.additional_properties)
    _compare_unevaluated(ctx, "unevaluatedProperties", original.unevaluated_properties,
                         update.unevaluated_properties, "PROPERTIES")
    _limit(ctx, "maxProperties", original.max_properties, update.max_properties, "MAX_PROPERTIES_ADDED",
           "MAX_PROPERTIES_REMOVED", "MAX_PROPERTIES_INCREASED", "MAX_PROPERTIES_DECREASED")
    _limit(ctx, "minProperties", original.min_properties, update.min_properties, "MIN_PROPERTIES_ADDED",
           "MIN_PROPERTIES_REMOVED", "MIN_PROPERTIES_INCREASED", "MIN_PROPERTIES_DECREASED")


def _compare_property(ctx, original: m.ObjectSchema, update: m.ObjectSchema, name: str) -> None:
    before, after = original.properties.get(name), update.properties.get(name)
    if after is None:
        # removing is safe only where the update still admits the property
        _removed(ctx, "PROPERTY", before, _is_open(update), lambda: _covering_schema(update, name))
    elif before is None:
        # adding is safe only where the original did not let the property through unchecked
        required = name in update.required
        if _is_open(original):
            if isinstance(after, m.EmptySchema):
                ctx.add("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL")
            elif required:
                ctx.add("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL" if after.has_default
                        else "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
            else:
                ctx.add("OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
            return
        covering = _covering_schema(original, name)
        if covering is not None:
            sub = ctx.sub()
            compare(sub, covering, after)
            ctx.differences += sub.differences
            ctx.add("PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible()
                    else "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
        if required:
            ctx.add("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL" if after.has_default
                    else "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")
        else:
            ctx.add("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")
    else:
        compare(ctx, before, after)


def _is_open(schema: m.ObjectSchema) -> bool:
    if not schema.permits_additional_properties or schema.additional_properties is not None:
        return False
    if schema.pattern_properties:
        return False
    return schema.unevaluated_properties is None or isinstance(schema.unevaluated_properties, m.EmptySchema)


def _covering_schema(schema: m.ObjectSchema, name: str) -> m.Schema | None:
    """The schema a partially open object applies to a property it does not declare."""
    for pattern, subschema in schema.pattern_properties.items():
        try:
            if re.search(pattern, name):
                return subschema
        except re.error:
            continue
    if schema.additional_properties is not None:
        return schema.additional_properties
    uneval = schema.unevaluated_properties
    if schema.permits_additional_properties and uneval is not None and not isinstance(
            uneval, (m.FalseSchema, m.EmptySchema)):
        return uneval
    return None


def _compare_dependencies(ctx, original: m.ObjectSchema, update: m.ObjectSchema) -> None:
    with ctx.enter("dependencies"):
        names = list(original.property_dependencies) + [
            n for n in update.property_dependencies if n not in original.property_dependencies]
        for name in names:
            before, after = original.property_dependencies.get(name), update.property_dependencies.get(name)
            if after is None:
                ctx.add("DEPENDENCY_ARRAY_REMOVED", name)
            elif before is None:
                ctx.add("DEPENDENCY_ARRAY_ADDED", name)
            elif before != after:
                if after >= before:
                    ctx.add("DEPENDENCY_ARRAY_EXTENDED", name)
                elif before >= after:
                    ctx.add("DEPENDENCY_ARRAY_NARROWED", name)
                else:
                    ctx.add("DEPENDENCY_ARRAY_CHANGED", name)
        names = list(original.schema_dependencies) + [
            n for n in update.schema_dependencies if n not in original.schema_dependencies]
        for name in names:
            before, after = original.schema_dependencies.get(name), update.schema_dependencies.get(name)
            if after is None:
                ctx.add("DEPENDENCY_SCHEMA_REMOVED", name)
            elif before is None:
                ctx.add("DEPENDENCY_SCHEMA_ADDED", name)
            else:
                with ctx.enter(name):
                    compare(ctx, before, after)


def _compare_unevaluated(ctx, keyword: str, before, after, what: str) -> None:
    if before is None and after is None:
        return
    with ctx.enter(keyword):
        if before is None:
            ctx.add(f"UNEVALUATED_{what}_REMOVED" if isinstance(after, m.FalseSchema)
                    else f"UNEVALUATED_{what}_NARROWED")
        elif after is None:
            ctx.add(f"UNEVALUATED_{what}_ADDED" if isinstance(before, m.FalseSchema)
                    else f"UNEVALUATED_{what}_EXTENDED")
        elif isinstance(before, m.FalseSchema) and not isinstance(after, m.FalseSchema):
            ctx.add(f"UNEVALUATED_{what}_ADDED")
        elif not isinstance(before, m.FalseSchema) and isinstance(after, m.FalseSchema):
            ctx.add(f"UNEVALUATED_{what}_REMOVED")
        elif isinstance(before, m.EmptySchema) and not isinstance(after, m.EmptySchema):
            ctx.add(f"UNEVALUATED_{what}_NARROWED")
        elif not isinstance(before, m.EmptySchema) and isinstance(after, m.EmptySchema):
            ctx.add(f"UNEVALUATED_{what}_EXTENDED")
        else:
            compare(ctx, before, after)


def _compare_arrays(ctx, original: m.ArraySchema, update: m.ArraySchema) -> None:
    with ctx.enter("items"):
        compare(ctx, original.all_items, update.all_items)
    _compare_item_lists(ctx, original, update)
    with ctx.enter("additionalItems"):
        if original.permits_additional_items != update.permits_additional_items:
            ctx.add("ADDITIONAL_ITEMS_REMOVED" if original.permits_additional_items else "ADDITIONAL_ITEMS_ADDED")
        elif original.additional_items is None and update.additional_items is not None:
            ctx.add("ADDITIONAL_ITEMS_NARROWED")
        elif update.additional_items is None and original.additional_items is not None:
            ctx.add("ADDITIONAL_ITEMS_EXTENDED")
        else:
            compare(ctx, original.additional_items, update.additional_items)
    _compare_unevaluated(ctx, "unevaluatedItems", original.unevaluated_items, update.unevaluated_items, "ITEMS")
    _limit(ctx, "maxItems", original.max_items, update.max_items,
           "MAX_ITEMS_ADDED", "MAX_ITEMS_REMOVED", "MAX_ITEMS_INCREASED", "MAX_ITEMS_DECREASED")
    _limit(ctx, "minItems", original.min_items, update.min_items,
           "MIN_ITEMS_ADDED", "MIN_ITEMS_REMOVED", "MIN_ITEMS_INCREASED", "MIN_ITEMS_DECREASED")
    if original.unique_items != update.unique_items:
        ctx.add("UNIQUE_ITEMS_REMOVED" if original.unique_items else "UNIQUE_ITEMS_ADDED", "uniqueItems")
    _limit(ctx, "maxContains", original.max_contains, update.max_contains,
           "MAX_CONTAINS_ADDED", "MAX_CONTAINS_REMOVED", "MAX_CONTAINS_INCREASED", "MAX_CONTAINS_DECREASED")
    _limit(ctx, "minContains", original.min_contains, update.min_contains,
           "MIN_CONTAINS_ADDED", "MIN_CONTAINS_REMOVED", "MIN_CONTAINS_INCREASED", "MIN_CONTAINS_DECREASED")


def _is_open_array(schema: m.ArraySchema) -> bool:
    if not schema.permits_additional_items or schema.additional_items is not None:
        return False
    return schema.unevaluated_items is None or isinstance(schema.unevaluated_items, m.EmptySchema)


def _covering_item_schema(schema: m.ArraySchema) -> m.Schema | None:
    if schema.additional_items is not None:
        return schema.additional_items
    uneval = schema.unevaluated_items
    if schema.permits_additional_items and uneval is not None and not isinstance(
            uneval, (m.FalseSchema, m.EmptySchema)):
        return uneval
    return None


def _compare_item_lists(ctx, original: m.ArraySchema, update: m.ArraySchema) -> None:
    before, after = original.item_schemas or [], update.item_schemas or []
    for index in range(max(len(before), len(after))):
        with ctx.enter(f"items/{index}"):
            if index < len(before) and index < len(after):
                compare(ctx, before[index], after[index])
            elif index < len(before):
                _item_removed(ctx, before[index], update)
            else:
                _item_added(ctx, after[index], original)


def _item_removed(ctx, item: m.Schema, update: m.ArraySchema) -> None:
    _removed(ctx, "ITEM", item, _is_open_array(update), lambda: _covering_item_schema(update))


def _removed(ctx, kind: str, removed: m.Schema, update_is_open: bool, covering_of_update) -> None:
    """A property or tuple item the update no longer names (``kind`` is Confluent's prefix,
    PROPERTY or ITEM): compatible when the update's open or partially open content model still
    admits what the original allowed there."""
    if update_is_open:
        ctx.add(f"{kind}_REMOVED_FROM_OPEN_CONTENT_MODEL")
        return
    covering = covering_of_update()
    if covering is not None:
        sub = ctx.sub()
        compare(sub, removed, covering)
        ctx.differences += sub.differences
        ctx.add(f"{kind}_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible()
                else f"{kind}_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    elif isinstance(removed, m.FalseSchema):
        ctx.add(f"{kind}_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
    else:
        ctx.add(f"{kind}_REMOVED_FROM_CLOSED_CONTENT_MODEL")


def _item_added(ctx, item: m.Schema, original: m.ArraySchema) -> None:
    if _is_open_array(original):
        ctx.add("ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL" if isinstance(item, m.EmptySchema)
                else "ITEM_ADDED_TO_OPEN_CONTENT_MODEL")
        return
    covering = _covering_item_schema(original)
    if covering is not None:
        sub = ctx.sub()
        compare(sub, covering, item)
        ctx.differences += sub.differences
        ctx.add("ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible()
                else "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    else:
        ctx.add("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL")


_BY_KIND = {
    m.StringSchema: _compare_strings,
    m.NumberSchema: _compare_numbers,
    m.ConstSchema: _compare_consts,
    m.EnumSchema: _compare_enums,
    m.CombinedSchema: _compare_combined,
    m.NotSchema: _compare_nots,
    m.ObjectSchema: _compare_objects,
    m.ArraySchema: _compare_arrays,
}
