"""Schema formats of the registry: Avro, Protobuf and JSON Schema behind one small interface.

The registry core (subjects, versions, ids, the ``_schemas`` topic, the REST API) never looks
inside a schema; it asks the format. A format is a module with one ``parse`` function, listed in
``FORMATS`` by Confluent's ``schemaType`` name (the REST API's ``"schemaType"``; absent means AVRO).

``parse(text, references)`` takes the schema text as a client sent it and the texts of every schema
it references, transitively, keyed by reference name (Avro: the referenced schema's full name as the
registering client named it; Protobuf: the import path; JSON Schema: the ``$ref`` URL), in dependency
order (a schema's own references come before it). It returns a ``ParsedSchema`` or raises
``InvalidSchema`` with the message Confluent's registry would give (answered as error 42201).

A ``ParsedSchema`` gives:

- ``schema_type``: "AVRO", "PROTOBUF" or "JSON";
- ``canonical()``: the text the registry stores and returns, and compares to decide that two
  registrations are the same schema (same id). Confluent's forms: Avro's compact JSON
  (``Schema.toString()``), Protobuf's .proto text as printed from its descriptor, JSON Schema's text;
- ``normalized()``: a ``ParsedSchema`` in Confluent's normalized form (``?normalize=true``);
- ``formatted(name)``: the schema in a named output format (``GET /schemas/ids/{id}?format=``:
  Protobuf's "serialized" is the base64 FileDescriptorProto that confluent-kafka's deserializers
  ask for); None when the format does not know the name;
- ``is_backward_compatible(previous)``: the list of Confluent-worded incompatibilities when
  ``self`` is the new schema and ``previous`` an older version; empty when data written with
  ``previous`` can be read with ``self``. FORWARD is ``previous.is_backward_compatible(self)``
  and FULL both, as Confluent's ``CompatibilityChecker`` composes them.
"""

from __future__ import annotations

import importlib
from typing import Mapping, Protocol


class InvalidSchema(ValueError):
    """A schema text its format refuses: Confluent's 42201 ("Invalid schema ...")."""


class ParsedSchema(Protocol):
    schema_type: str

    def canonical(self) -> str: ...

    def normalized(self) -> "ParsedSchema": ...

    def formatted(self, name: str) -> str | None: ...

    def is_backward_compatible(self, previous: "ParsedSchema") -> list[str]: ...


# schemaType -> the module holding its parse(text, references) (imported on first use: a broker
# without a registry listener never loads avro, protobuf or jsonschema)
FORMATS = {
    "AVRO": "kbroker.schema_registry.formats.avro",
    "PROTOBUF": "kbroker.schema_registry.formats.protobuf",
    "JSON": "kbroker.schema_registry.formats.json_schema",
}


def parse(schema_type: str | None, text: str, references: Mapping[str, str]) -> ParsedSchema:
    """Parse ``text`` as ``schema_type`` (None means AVRO, as in Confluent's API)."""
    name = (schema_type or "AVRO").upper()
    module = FORMATS.get(name)
    if module is None:
        raise InvalidSchema(f"Invalid schema type {schema_type}")
    return importlib.import_module(module).parse(text, references)
