"""JSON Schema schemas for the registry (Confluent's schemaType "JSON").

A schema is checked against its draft's meta-schema with ``jsonschema`` (drafts 4, 6, 7, 2019-09
and 2020-12, chosen by ``$schema`` as Confluent chooses it; draft 7 when absent or unknown), and
every ``$ref`` in it must resolve, within the document or to a reference (``referencing`` holds the
references, each under its name, the ``$ref`` URL, and under that name resolved against the root
``$id``). Nothing is fetched over the network: an unresolvable ``$ref`` is an invalid schema.

- ``model``: the schema as the typed tree Confluent's diff works on;
- ``compat``: Confluent's compatibility rules between two trees.

The canonical form is Confluent's: the JSON as given, compact, keys in their order. Imported only
when a registry parses a JSON schema: a broker without one never loads jsonschema.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any, Mapping
from urllib.parse import urljoin

import jsonschema
import referencing
import referencing.exceptions
import referencing.jsonschema

from kbroker.schema_registry.formats import InvalidSchema
from kbroker.schema_registry.formats.json_schema import compat
from kbroker.schema_registry.formats.json_schema.model import Loader

# $schema URL (without a trailing "#") -> draft, as Confluent's SpecificationVersion maps them
_DRAFTS = {
    "http://json-schema.org/draft-04/schema": "4", "https://json-schema.org/draft-04/schema": "4",
    "http://json-schema.org/schema": "4", "https://json-schema.org/schema": "4",
    "http://json-schema.org/draft-06/schema": "6", "https://json-schema.org/draft-06/schema": "6",
    "http://json-schema.org/draft-07/schema": "7", "https://json-schema.org/draft-07/schema": "7",
    "http://json-schema.org/draft/2019-09/schema": "2019-09", "https://json-schema.org/draft/2019-09/schema": "2019-09",
    "http://json-schema.org/draft/2020-12/schema": "2020-12", "https://json-schema.org/draft/2020-12/schema": "2020-12",
}
_VALIDATORS = {
    "4": jsonschema.Draft4Validator, "6": jsonschema.Draft6Validator, "7": jsonschema.Draft7Validator,
    "2019-09": jsonschema.Draft201909Validator, "2020-12": jsonschema.Draft202012Validator,
}
_SPECIFICATIONS = {
    "4": referencing.jsonschema.DRAFT4, "6": referencing.jsonschema.DRAFT6, "7": referencing.jsonschema.DRAFT7,
    "2019-09": referencing.jsonschema.DRAFT201909, "2020-12": referencing.jsonschema.DRAFT202012,
}


class JsonSchema:
    schema_type = "JSON"

    def __init__(self, document: Any, draft: str, references: Mapping[str, Any], canonical: str | None = None):
        self.document = document
        self.draft = draft
        self.references = dict(references)  # $ref name -> its parsed JSON
        self._canonical = canonical if canonical is not None else dump(document)
        self._tree = None

    def canonical(self) -> str:
        return self._canonical

    def normalized(self) -> "JsonSchema":
        # Confluent's normalize() reads the schema back with every object's keys sorted
        return JsonSchema(self.document, self.draft, self.references, canonical=dump(self.document, sort_keys=True))

    def formatted(self, name: str) -> str | None:
        return self._canonical if name in ("", "default") else None

    def is_backward_compatible(self, previous) -> list[str]:
        if getattr(previous, "schema_type", None) != self.schema_type:
            return ["Incompatible because of different schema type"]
        found = compat.differences(previous.tree(), self.tree())
        return [d.message() for d in found if d.type not in compat.COMPATIBLE]

    def tree(self):
        """The typed tree of ``model`` (built on first use; references resolve lazily)."""
        if self._tree is None:
            self._tree = _load_tree(self.document, self.draft, self.references)
        return self._tree

    def __repr__(self) -> str:
        return f"JsonSchema({self._canonical!r})"


def parse(text: str, references: Mapping[str, str]) -> JsonSchema:
    """Parse and check a JSON Schema; ``references``: $ref name -> the referenced schema's text."""
    try:
        return _parse(text, references)
    except InvalidSchema as invalid:
        raise InvalidSchema(f"Invalid schema {text}, details: {invalid}") from None


def _parse(text: str, references: Mapping[str, str]) -> JsonSchema:
    document = _load_json(text, "schema")
    if not isinstance(document, (dict, bool)):
        raise InvalidSchema(f"a JSON Schema is an object or a boolean, not {type(document).__name__}")
    draft = _draft(document)
    try:
        _VALIDATORS[draft].check_schema(document)
    except jsonschema.SchemaError as error:
        where = "/".join(str(p) for p in error.absolute_path)
        raise InvalidSchema(error.message + (f" at '#/{where}'" if where else "")) from None
    parsed_references = {name: _load_json(text, f"reference {name!r}") for name, text in references.items()}
    schema = JsonSchema(document, draft, parsed_references)
    _check_references(schema)
    return schema


def dump(value: Any, sort_keys: bool = False) -> str:
    """Compact JSON as Jackson writes it: no spaces, non-ASCII kept, decimals exactly as read."""
    if isinstance(value, dict):
        items = sorted(value.items()) if sort_keys else value.items()
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + dump(v, sort_keys) for k, v in items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(dump(v, sort_keys) for v in value) + "]"
    if isinstance(value, Decimal):
        if value.is_nan():
            return "NaN"
        if value.is_infinite():
            return "Infinity" if value > 0 else "-Infinity"
        return str(value)
    return json.dumps(value, ensure_ascii=False)


def _load_json(text: str, what: str) -> Any:
    # Decimals keep a number's digits as written (Jackson's exact BigDecimal); Jackson also allows
    # NaN and Infinity (ALLOW_NON_NUMERIC_NUMBERS), as Python's json does.
    try:
        return json.loads(text, parse_float=Decimal, parse_constant=Decimal)
    except (ValueError, TypeError) as error:
        raise InvalidSchema(f"{what} is not JSON: {error}") from None


def _draft(document: Any) -> str:
    if isinstance(document, dict) and isinstance(document.get("$schema"), str):
        return _DRAFTS.get(document["$schema"].removesuffix("#"), "7")
    return "7"


def _registry(schema: JsonSchema):
    """The references as ``referencing`` resources, each under its name and that name resolved
    against the root's ``$id`` (Confluent registers both)."""
    specification = _SPECIFICATIONS[schema.draft]
    root_id = schema.document.get("$id" if schema.draft != "4" else "id") if isinstance(schema.document, dict) else None
    resources = []
    for name, contents in schema.references.items():
        resource = specification.create_resource(contents)
        resources.append((name, resource))
        if isinstance(root_id, str):
            resources.append((urljoin(root_id, name), resource))
    return referencing.Registry().with_resources(resources), specification


def _load_tree(document: Any, draft: str, references: Mapping[str, Any]):
    schema = JsonSchema(document, draft, references)
    registry, specification = _registry(schema)
    root = specification.create_resource(document)
    resolver = registry.resolver_with_root(root)
    loader = Loader(draft, specification)
    tree = loader.load(document, resolver)
    loader.remember(document, tree)  # a "$ref": "#" is this very tree: recursion meets itself at once
    return tree


def _check_references(schema: JsonSchema) -> None:
    """Every $ref, in the schema and in what it reaches, must resolve (Confluent fails to load it)."""
    tree = schema.tree()
    seen: set[int] = set()
    pending = [tree]
    while pending:
        node = pending.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.kind == "reference":
            try:
                pending.append(compat.dereference(node))
            except referencing.exceptions.Unresolvable as error:
                raise InvalidSchema(f"$ref {node.ref!r} cannot be resolved ({error})") from None
            except compat.EndlessReference:
                raise InvalidSchema(f"$ref {node.ref!r} refers to nothing but references") from None
            continue
        pending.extend(_children(node))


def _children(node) -> list:
    children = []
    for value in vars(node).values():
        if hasattr(value, "kind") and value is not node:
            children.append(value)
        elif isinstance(value, list):
            children.extend(v for v in value if hasattr(v, "kind"))
        elif isinstance(value, dict):
            children.extend(v for v in value.values() if hasattr(v, "kind"))
    return children
