"""Avro schemas as Confluent's registry treats them (its ``AvroSchema``).

Parsing and the compatibility rules are the Apache Avro package's (``avro.schema``,
``avro.compatibility.ReaderWriterCompatibilityChecker``, the port of Java's
``SchemaCompatibility`` that Confluent's checker calls). What no library does is written here:

- the canonical text, Java's ``Schema.toString()`` (what Confluent stores and compares): compact
  JSON; a named type in full where it first appears and by name after; ``namespace`` only where it
  differs from the enclosing one; keys in Java's order (record: type, name, namespace, doc,
  fields, other props, aliases; field: name, type, doc, default, order unless ascending, aliases,
  other props); a primitive without props as a bare string. Types defined by referenced schemas
  are written by name, as Confluent's ``toString(referencedSchemas)`` does;
- the normalized text (``?normalize=true``), Confluent's ``AvroSchemaUtils.toNormalizedString``:
  full names, ``name`` before ``type``, other props sorted, aliases sorted;
- references: ``references`` maps each reference's name to its schema text, in dependency order;
  they are parsed first into the same names, so the schema may use the types they define.
"""

from __future__ import annotations

import json
from typing import Mapping

import avro.errors
import avro.name
import avro.schema
from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

from kbroker.schema_registry.formats import InvalidSchema

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
NAMED = frozenset({"record", "error", "enum", "fixed"})
# Keys Java's parser reads itself; every other key of a schema object is a "prop".
_SCHEMA_KEYS = frozenset({"type", "name", "namespace", "doc", "fields", "symbols", "size",
                          "items", "values", "aliases", "default"})
_FIELD_KEYS = frozenset({"name", "type", "doc", "default", "order", "aliases"})


# Confluent's wording of each of Avro's incompatibility kinds (its AvroSchema's Difference).
_DESCRIPTIONS = {
    "READER_FIELD_MISSING_DEFAULT_VALUE": "The field '{info}' at path '{location}' in the new "
                                          "schema has no default value and is missing in the old "
                                          "schema",
    "TYPE_MISMATCH": "The type (path '{location}') of a field in the new schema does not match "
                     "with the old schema",
    "NAME_MISMATCH": "The name of the schema has changed (path '{location}')",
    "MISSING_ENUM_SYMBOLS": "The new schema is missing enum symbols '{info}' at path "
                            "'{location}' in the old schema",
    "MISSING_UNION_BRANCH": "The new schema is missing a type inside a union field at path "
                            "'{location}' in the old schema",
    "FIXED_SIZE_MISMATCH": "The size of FIXED type field at path '{location}' in the new schema "
                           "does not match with the old schema",
}


class AvroSchema:
    schema_type = "AVRO"

    def __init__(self, parsed: avro.schema.Schema, raw: object, references: Mapping[str, str],
                 canonical: str):
        self.parsed = parsed
        self.raw = raw  # the JSON as the client sent it (for the canonical and normalized texts)
        self.references = dict(references)
        self._canonical = canonical

    def canonical(self) -> str:
        return self._canonical

    def normalized(self) -> "AvroSchema":
        known = {_full_name(raw, None): f'"{_full_name(raw, None)}"'
                 for raw in (_loads(text) for text in self.references.values())
                 if isinstance(raw, dict) and raw.get("type") in NAMED}
        text = _normalized(self.raw, None, known)
        return parse(text, self.references)

    def formatted(self, name: str) -> str | None:
        if name in ("", "default"):
            return self._canonical
        return None

    def is_backward_compatible(self, previous) -> list[str]:
        if getattr(previous, "schema_type", None) != "AVRO":
            return ["Incompatible because of different schema type"]
        result = ReaderWriterCompatibilityChecker().get_compatibility(self.parsed, previous.parsed)
        if result.compatibility is SchemaCompatibilityType.compatible:
            return []
        kinds = [kind.name.upper() for kind in result.incompatibilities] or ["TYPE_MISMATCH"]
        locations = sorted(result.locations) or ["/"]
        infos = sorted(result.messages) or [""]
        differences = []
        for i, kind in enumerate(kinds):
            location = locations[min(i, len(locations) - 1)]
            info = infos[min(i, len(infos) - 1)]
            description = _DESCRIPTIONS.get(kind, "{kind} at path '{location}'").format(
                kind=kind, location=location, info=info)
            differences.append(f"{{errorType:'{kind}', description:'{description}', "
                               f"additionalInfo:'{info}'}}")
        return differences

    def __repr__(self) -> str:
        return f"AvroSchema({self._canonical})"


def parse(text: str, references: Mapping[str, str]) -> AvroSchema:
    names = avro.name.Names()
    reference_raws = []
    try:
        for name, ref_text in references.items():
            raw_ref = _loads(ref_text)
            avro.schema.make_avsc_object(raw_ref, names)
            reference_raws.append(raw_ref)
        raw = _loads(text)
        parsed = avro.schema.make_avsc_object(raw, names)
    except InvalidSchema:
        raise
    except (avro.errors.AvroException, ValueError, TypeError, AttributeError, KeyError) as exc:
        raise InvalidSchema(f"Invalid schema {text}, details: {exc}") from None
    known: set[str] = set()
    for raw_ref in reference_raws:
        _collect_names(raw_ref, None, known)
    canonical = _compact(_java_json(raw, None, known))
    return AvroSchema(parsed, raw, references, canonical)


def _loads(text: str) -> object:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, TypeError) as exc:
        raise InvalidSchema(f"Invalid schema {text}, details: {exc}") from None


def _compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _split(name: str, namespace: str | None) -> tuple[str, str | None]:
    """(simple name, namespace) of a name as Avro resolves it inside ``namespace``."""
    if "." in name:
        space, _, simple = name.rpartition(".")
        return simple, space or None
    return name, namespace or None


def _full_name(raw: dict, enclosing: str | None) -> str:
    simple, space = _split(raw["name"], raw.get("namespace", enclosing))
    return f"{space}.{simple}" if space else simple


def _resolve_ref(name: str, enclosing: str | None) -> str:
    if name in PRIMITIVES or "." in name:
        return name
    return f"{enclosing}.{name}" if enclosing else name


def _collect_names(raw: object, space: str | None, known: set[str]) -> None:
    """Every named type ``raw`` defines (a referenced schema's types are written by name)."""
    if isinstance(raw, list):
        for branch in raw:
            _collect_names(branch, space, known)
    elif isinstance(raw, dict):
        kind = raw.get("type")
        if kind in NAMED:
            full = _full_name(raw, space)
            known.add(full)
            inner = full.rpartition(".")[0] or None
            for field in raw.get("fields") or ():
                _collect_names(field.get("type"), inner, known)
        elif kind == "array":
            _collect_names(raw.get("items"), space, known)
        elif kind == "map":
            _collect_names(raw.get("values"), space, known)
        elif isinstance(kind, (dict, list)):
            _collect_names(kind, space, known)


def _java_json(raw: object, space: str | None, known: set[str]) -> object:
    """``raw`` as Java's ``Schema.toString()`` writes it, ``space`` the enclosing namespace."""
    if isinstance(raw, str):
        if raw in PRIMITIVES:
            return raw
        full = _resolve_ref(raw, space)
        return _short(full, space)
    if isinstance(raw, list):
        return [_java_json(branch, space, known) for branch in raw]
    kind = raw.get("type")
    if isinstance(kind, (dict, list)):  # {"type": {...}} is the inner schema
        return _java_json(kind, space, known)
    props = {k: v for k, v in raw.items() if k not in _SCHEMA_KEYS}
    if kind in PRIMITIVES:
        return {"type": kind, **props} if props else kind
    if kind == "array":
        return {"type": "array", "items": _java_json(raw["items"], space, known), **props}
    if kind == "map":
        return {"type": "map", "values": _java_json(raw["values"], space, known), **props}
    if kind not in NAMED:  # a named type given by name as {"type": "com.x.Y"}
        return _java_json(kind, space, known)
    full = _full_name(raw, space)
    if full in known:
        return _short(full, space)
    known.add(full)
    simple, _, own_space = full.rpartition(".")[::-1] if "." in full else (full, "", "")
    own_space = own_space or None
    out: dict = {"type": kind, "name": simple}
    if own_space != space:
        out["namespace"] = own_space or ""
    if raw.get("doc") is not None:
        out["doc"] = raw["doc"]
    if kind in ("record", "error"):
        out["fields"] = [_java_field(field, own_space, known) for field in raw["fields"]]
    elif kind == "enum":
        out["symbols"] = raw["symbols"]
        if raw.get("default") is not None:
            out["default"] = raw["default"]
    else:
        out["size"] = raw["size"]
    out.update(props)
    if raw.get("aliases"):
        out["aliases"] = raw["aliases"]
    return out


def _java_field(field: dict, space: str | None, known: set[str]) -> dict:
    out = {"name": field["name"], "type": _java_json(field["type"], space, known)}
    if field.get("doc") is not None:
        out["doc"] = field["doc"]
    if "default" in field:
        out["default"] = field["default"]
    if field.get("order", "ascending") != "ascending":
        out["order"] = field["order"]
    if field.get("aliases"):
        out["aliases"] = field["aliases"]
    out.update({k: v for k, v in field.items() if k not in _FIELD_KEYS})
    return out


def _short(full: str, space: str | None) -> str:
    head, _, simple = full.rpartition(".")
    return simple if head and head == space else full


def _normalized(raw: object, space: str | None, env: dict[str, str]) -> str:
    """Confluent's AvroSchemaUtils.build: the normalized text of ``raw``."""
    if isinstance(raw, str):
        if raw in PRIMITIVES:
            return f'"{raw}"'
        full = _resolve_ref(raw, space)
        return env.get(full, f'"{full}"')
    if isinstance(raw, list):
        return "[" + ",".join(_normalized(b, space, env) for b in raw) + "]"
    kind = raw.get("type")
    if isinstance(kind, (dict, list)) or (isinstance(kind, str) and kind not in PRIMITIVES
                                           and kind not in NAMED and kind not in ("array", "map")):
        return _normalized(kind, space, env)
    props = {k: v for k, v in raw.items() if k not in _SCHEMA_KEYS and k not in
             ("logicalType", "precision", "scale")}
    logical = _logical(raw)
    simple_props = "".join(f',"{k}":{_compact(props[k])}' for k in sorted(props))
    if kind in ("array", "map"):
        inner = "items" if kind == "array" else "values"
        return (f'{{"type":"{kind}","{inner}":{_normalized(raw[inner], space, env)}'
                f'{logical}{simple_props}}}')
    if kind in PRIMITIVES:
        if logical:
            return f'{{"type":"{kind}"{logical}{simple_props}}}'
        if props:
            return f'{{"type":"{kind}"{simple_props}}}'
        return f'"{kind}"'
    full = _full_name(raw, space)
    if full in env:
        return env[full]
    qname = f'"{full}"'
    env[full] = qname
    own_space = full.rpartition(".")[0] or None
    out = [f'{{"name":{qname},"type":"{"error" if kind == "error" else kind}"']
    if kind == "enum":
        out.append(',"symbols":' + _compact(raw["symbols"]))
    elif kind == "fixed":
        out.append(f',"size":{raw["size"]}')
    else:
        fields = []
        for field in raw["fields"]:
            text = f'{{"name":"{field["name"]}","type":{_normalized(field["type"], own_space, env)}'
            if field.get("order") is not None:
                text += f',"order":"{field["order"].upper()}"'
            if field.get("doc") is not None:
                text += ',"doc":' + _compact(field["doc"])
            if field.get("aliases"):
                text += ',"aliases":' + _compact(sorted(field["aliases"]))
            if "default" in field:
                text += ',"default":' + _compact(field["default"])
            extra = {k: v for k, v in field.items() if k not in _FIELD_KEYS}
            text += "".join(f',"{k}":{_compact(extra[k])}' for k in sorted(extra)) + "}"
            fields.append(text)
        out.append(',"fields":[' + ",".join(fields) + "]")
    out.append(logical)
    if raw.get("doc"):
        out.append(',"doc":' + _compact(raw["doc"]))
    if raw.get("aliases"):
        out.append(',"aliases":' + _compact(sorted(raw["aliases"])))
    if kind == "enum" and raw.get("default") is not None:
        out.append(',"default":' + _compact(raw["default"]))
    out.append(simple_props + "}")
    return "".join(out)


def _logical(raw: dict) -> str:
    name = raw.get("logicalType")
    if not name:
        return ""
    text = f',"logicalType":"{name}"'
    if name == "decimal":
        text += f',"precision":{raw.get("precision")}'
        if raw.get("scale"):
            text += f',"scale":{raw["scale"]}'
    return text
