"""Each client's schema-registry serializers against kbroker's own registry (issue 37).

Per driver and format (Avro, JSON Schema, Protobuf), on the shared broker's registry (``broker.registry``):

1. ``sr-produce`` with schema v1: the client registers it under ``<topic>-value`` (its
   serializer's auto-registration or its register call) and produces records in Confluent's wire
   format (magic byte 0, the 4-byte schema id, then the Avro binary, the JSON text, or the
   Protobuf message indexes and the message);
2. ``sr-produce`` again with v2, compatible under the default BACKWARD rule (a field added with
   a default; in JSON Schema an optional property added to a closed content model; in Protobuf
   a new field): a new id
   and version 2 of the subject;
3. ``sr-consume`` reads every record back and decodes each with the schema fetched by the id in
   its header: keys, decoded values and ids must be exactly what was written, each record once,
   at the offset its producer was told;
4. ``sr-register`` of a schema that changes a field's type is refused with HTTP 409, and the
   subject still has versions [1, 2].

The registry is checked over HTTP after each step, so a client that only thinks it registered
fails. The values use the types whose encodings differ most between libraries: a long past 32
bits, a non-ASCII string, an array, a nullable union (null and set).
"""

from __future__ import annotations

import json
import urllib.request
from dataclasses import dataclass

import pytest

from compat_tests import harness
from tests.integration.clients import consume_confluent, ensure_topic

NAMESPACE = "dev.kbroker.compat"
FIELDS_V1 = [{"name": "index", "type": "long"},
             {"name": "name", "type": "string"},
             {"name": "tags", "type": {"type": "array", "items": "string"}},
             {"name": "note", "type": ["null", "string"], "default": None}]
AVRO_V1 = {"type": "record", "name": "Reading", "namespace": NAMESPACE, "fields": FIELDS_V1}
# BACKWARD compatible: a reader with v2 fills unit from its default in v1 records.
AVRO_V2 = {**AVRO_V1, "fields": [*FIELDS_V1, {"name": "unit", "type": "string",
                                              "default": "none"}]}
# Not BACKWARD compatible: a v1 long cannot be read as a string.
AVRO_INCOMPATIBLE = {**AVRO_V1, "fields": [{"name": "index", "type": "string"}, *FIELDS_V1[1:]]}

PROPERTIES_V1 = {"index": {"type": "integer"}, "name": {"type": "string"},
                 "tags": {"type": "array", "items": {"type": "string"}},
                 "note": {"type": ["null", "string"]}}
JSON_V1 = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Reading",
           "type": "object", "properties": PROPERTIES_V1, "required": ["index", "name", "tags"],
           "additionalProperties": False}
# BACKWARD compatible in Confluent's rules: an optional property added to a closed content model.
JSON_V2 = {**JSON_V1, "properties": {**PROPERTIES_V1, "unit": {"type": "string",
                                                               "default": "none"}}}
JSON_INCOMPATIBLE = {**JSON_V1, "properties": {**PROPERTIES_V1, "index": {"type": "string"}}}

PROTO_V1 = """syntax = "proto3";
package dev.kbroker.compat;

message Reading {
  int64 index = 1;
  string name = 2;
  repeated string tags = 3;
  optional string note = 4;
}
"""
# BACKWARD compatible: a new field (proto3 fields all have defaults).
PROTO_V2 = PROTO_V1.replace("  optional string note = 4;\n",
                            "  optional string note = 4;\n  string unit = 5;\n")
# Confluent's FIELD_SCALAR_KIND_CHANGED.
PROTO_INCOMPATIBLE = PROTO_V1.replace("int64 index", "string index")

# --format: (feature, schema v1, compatible v2, incompatible)
FORMATS = {"avro": ("schema-registry.avro", AVRO_V1, AVRO_V2, AVRO_INCOMPATIBLE),
           "json": ("schema-registry.json", JSON_V1, JSON_V2, JSON_INCOMPATIBLE),
           "protobuf": ("schema-registry.protobuf", PROTO_V1, PROTO_V2, PROTO_INCOMPATIBLE)}

# What each driver's sr-* commands use (the report's notes).
SERDES = {
    "confluent": "confluent-kafka's SchemaRegistryClient with its Avro, JSON and Protobuf "
                 "serializers (which auto-register) and deserializers; Protobuf message classes "
                 "compiled from the .proto by grpcio-tools' protoc",
    "go": "franz-go's sr.Client and sr.Serde; Avro by hamba/avro, JSON by encoding/json, "
          "Protobuf by protocompile's dynamic messages",
    "kafkajs": "@kafkajs/confluent-schema-registry (register, encode, decode; avsc, ajv)",
    "java": "Spring Cloud Stream's ConfluentSchemaRegistryClient 4.2.0 (register, fetch by id) "
            "with Apache Avro's generic datum writer and reader; Confluent's own Java serializers "
            "are not on Maven Central",
}
PER_VERSION = 6
BASE = 1_700_000_000_000  # longs past 2**32, inside JavaScript's exact integers


def values(version: int, fmt: str) -> list[dict]:
    """What record i of ``version`` holds; for Protobuf in its canonical JSON mapping (what the
    drivers read and print): int64 as a string, unset and empty fields left out."""
    if fmt != "protobuf":
        return plain_values(version)
    return [{"index": str(v["index"]), **{k: x for k, x in v.items()
                                           if k != "index" and x not in (None, [])}}
            for v in plain_values(version)]


def plain_values(version: int) -> list[dict]:
    out = []
    for i in range(PER_VERSION):
        value = {"index": BASE + 1000 * version + i, "name": f"reading-{version}-{i}-é",
                 "tags": [f"t{j}" for j in range(i % 3)],
                 "note": None if i % 2 else f"note {i}"}
        if version == 2:
            value["unit"] = f"unit-{i}"
        out.append(value)
    return out


def registry_get(url: str, path: str):
    with urllib.request.urlopen(url + path, timeout=10) as response:
        return json.load(response)


def write(tmp_path, name: str, content) -> str:
    path = tmp_path / name
    if isinstance(content, str):
        path.write_text(content)
    elif isinstance(content, list):
        path.write_text("".join(json.dumps(v) + "\n" for v in content))
    else:
        path.write_text(json.dumps(content))
    return str(path)


def sr_produce(driver, broker, topic: str, fmt: str, schema_file: str, values_file: str,
               key_prefix: str) -> harness.Run:
    return harness.run(driver, "sr-produce", broker.bootstrap, registry=broker.registry,
                       topic=topic, format=fmt, schema_file=schema_file, values_file=values_file,
                       key_prefix=key_prefix, timeout_ms=30000).ok()


def registered_id(run: harness.Run, subject: str) -> int:
    events = run.of("registered")
    assert events and events[0]["subject"] == subject, f"no registration of {subject}: {events}"
    return events[0]["id"]


@pytest.mark.compat("schema-registry: avro")
def test_avro_serializers(broker, driver, cell, tmp_path):
    round_trip(broker, driver, cell, tmp_path, "avro")


@pytest.mark.compat("schema-registry: json schema")
def test_json_schema_serializers(broker, driver, cell, tmp_path):
    round_trip(broker, driver, cell, tmp_path, "json")


@pytest.mark.compat("schema-registry: protobuf")
def test_protobuf_serializers(broker, driver, cell, tmp_path):
    round_trip(broker, driver, cell, tmp_path, "protobuf")


def round_trip(broker, driver, cell, tmp_path, fmt: str) -> None:
    feature, _, _, incompatible = FORMATS[fmt]
    cell.need(driver, feature)
    if driver.name in SERDES:
        cell.note(SERDES[driver.name])
    production = produce_two_versions(broker, driver, tmp_path, fmt)
    problems = consume_and_check(broker, driver, production, fmt)
    assert not problems, "; ".join(problems[:5])

    subject = f"{production.topic}-value"
    refused = harness.run(driver, "sr-register", None, registry=broker.registry,
                          subject=subject, format=fmt,
                          schema_file=write(tmp_path, "incompatible.schema", incompatible))
    assert refused.rc == 1 and refused.errors, f"not refused: {refused.describe()}"
    assert refused.errors[0].get("status") == 409, refused.describe()
    assert registry_get(broker.registry, f"/subjects/{subject}/versions") == [1, 2]


_productions: dict[str, "Production"] = {}


@pytest.mark.pairs_of("schema-registry.avro")
@pytest.mark.compat("schema-registry: avro, cross-client")
def test_avro_cross_client(broker, producer, consumer, cell, tmp_path_factory):
    cross_client(broker, producer, consumer, cell, tmp_path_factory, "avro")


@pytest.mark.pairs_of("schema-registry.json")
@pytest.mark.compat("schema-registry: json schema, cross-client")
def test_json_schema_cross_client(broker, producer, consumer, cell, tmp_path_factory):
    cross_client(broker, producer, consumer, cell, tmp_path_factory, "json")


@pytest.mark.pairs_of("schema-registry.protobuf")
@pytest.mark.compat("schema-registry: protobuf, cross-client")
def test_protobuf_cross_client(broker, producer, consumer, cell, tmp_path_factory):
    cross_client(broker, producer, consumer, cell, tmp_path_factory, "protobuf")


def cross_client(broker, producer, consumer, cell, tmp_path_factory, fmt: str) -> None:
    """Each client reads what every other one wrote: the wire format and the ids are the
    registry's, not a library's. One production per (producer, format), shared by its row;
    only clients with the format are paired (``pairs_of``)."""
    feature = FORMATS[fmt][0]
    cell.need(producer, feature)
    cell.need(consumer, feature)
    key = f"{producer.name}-{fmt}"
    if key not in _productions:
        _productions[key] = produce_two_versions(broker, producer,
                                                 tmp_path_factory.mktemp(f"sr-{key}"), fmt)
    problems = consume_and_check(broker, consumer, _productions[key], fmt)
    assert not problems, "; ".join(problems[:5])


@dataclass
class Production:
    topic: str
    expected: dict  # key -> (value, schema id)
    acks: dict      # key -> (partition, offset) as the producer was told


def produce_two_versions(broker, driver, tmp_path, fmt: str) -> Production:
    """v1 then v2 records (keys v1-i, v2-i) to a new 2-partition topic; the registry must hold
    each schema under <topic>-value with the id the client reported."""
    _, v1, v2, _ = FORMATS[fmt]
    topic = harness.unique(f"sr-{fmt}", driver.name)
    subject = f"{topic}-value"
    ensure_topic(broker.bootstrap, topic, partitions=2)
    production = Production(topic, {}, {})
    ids = []
    for version, schema in ((1, v1), (2, v2)):
        run = sr_produce(driver, broker, topic, fmt, write(tmp_path, f"v{version}.schema", schema),
                         write(tmp_path, f"v{version}.jsonl", values(version, fmt)),
                         f"v{version}-")
        ident = registered_id(run, subject)
        stored = registry_get(broker.registry, f"/subjects/{subject}/versions/{version}")
        assert stored["id"] == ident, f"v{version} registered as {ident}, stored as {stored}"
        if fmt == "protobuf":
            # Serializers register the .proto their message classes print, not this text.
            assert stored.get("schemaType") == "PROTOBUF" and "message Reading" in \
                stored["schema"], stored
        else:
            assert json.loads(stored["schema"]) == schema
        ids.append(ident)
        for i, value in enumerate(values(version, fmt)):
            production.expected[f"v{version}-{i}"] = (value, ident)
        for ack in run.of("produced"):
            production.acks[f"v{version}-{ack['index']}"] = (ack["partition"], ack["offset"])
    assert ids[0] != ids[1], f"v1 and v2 share id {ids[0]}"
    problems = wire_format_problems(broker, production, fmt)
    assert not problems, f"{driver.name} did not write Confluent's wire format: {problems[:3]}"
    return production


def wire_format_problems(broker, production: Production, fmt: str) -> list[str]:
    """The raw values: magic byte 0, the id as a big-endian int32, and for Protobuf the message
    indexes ([0], the first message, is the single byte 0) before the message."""
    problems = []
    for got in consume_confluent(broker.bootstrap, production.topic, len(production.expected)):
        key, wire = got.key.decode(), got.value
        ident = production.expected[key][1]
        if wire[:5] != b"\0" + ident.to_bytes(4, "big"):
            problems.append(f"{key} starts {wire[:5].hex()}, not 00 and id {ident}")
        elif fmt == "protobuf" and wire[5:6] != b"\0":
            problems.append(f"{key}: message indexes {wire[5:6].hex()}, not 00 (the first "
                            "message)")
    return problems


def consume_and_check(broker, driver, production: Production, fmt: str) -> list[str]:
    """Problems with what ``driver`` decodes from the production's topic: every record once,
    value and schema id exact, at the offset its producer was told."""
    expected, acks = production.expected, production.acks
    consumed = harness.run(driver, "sr-consume", broker.bootstrap, registry=broker.registry,
                           topic=production.topic, count=len(expected), format=fmt,
                           timeout_ms=20000).ok()
    problems = []
    seen = set()
    for record in consumed.records:
        key = record["key"]
        if key not in expected or key in seen:
            problems.append(f"unexpected or repeated record {harness.short(record)}")
            continue
        seen.add(key)
        if (record["value"], record["schemaId"]) != expected[key]:
            problems.append(f"{key}: {record['value']} (id {record['schemaId']}) != "
                            f"{expected[key][0]} (id {expected[key][1]})")
        if acks.get(key) not in (None, (record["partition"], record["offset"])):
            problems.append(f"{key} at {record['partition']}/{record['offset']}, acknowledged "
                            f"at {acks[key]}")
    missing = sorted(set(expected) - seen)
    return [f"missing {missing}"] * bool(missing) + problems
