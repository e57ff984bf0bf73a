"""Spark reads Avro records in Confluent's wire format with ``from_avro`` (spark-avro), using the
writers' schemas from kbroker's schema registry (issue 37).

confluent-kafka's ``AvroSerializer`` registers two versions of a schema (the second adds a field
with a default) under ``<topic>-value`` and writes records with each to a 2-partition topic of a
broker whose registry is on. Spark reads the topic with its Kafka source, takes the schema id
from each value's 5-byte header (magic byte 0, big-endian id), fetches that id's schema from the
registry over HTTP, strips the header and decodes the rest with ``from_avro``, as a Spark job
reading CDC or Confluent-serialized topics does. Every decoded row must equal the value written,
under the id it was written with.
"""

from __future__ import annotations

import json
import urllib.request

import pytest

from compat_tests.spark.test_spark import kafka_options, new_topic, spark  # noqa: F401 (fixture)
from kbroker.cluster.processes import free_port
from tests.integration.clients import Rec, produce_confluent, running_broker

FIELDS_V1 = [{"name": "index", "type": "long"},
             {"name": "name", "type": "string"},
             {"name": "tags", "type": {"type": "array", "items": "string"}},
             {"name": "note", "type": ["null", "string"], "default": None}]
V1 = {"type": "record", "name": "Reading", "namespace": "dev.kbroker.spark",
      "fields": FIELDS_V1}
V2 = {**V1, "fields": [*FIELDS_V1, {"name": "unit", "type": "string", "default": "none"}]}
PER_VERSION = 8


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    registry = f"http://127.0.0.1:{free_port()}"
    with running_broker(tmp_path_factory.mktemp("spark-avro-broker") / "data",
                        {"auto.create.topics.enable": "false",
                         "schema.registry.listeners": registry}) as process:
        process.registry = registry
        yield process


def values(version: int) -> list[dict]:
    out = []
    for i in range(PER_VERSION):
        value = {"index": 1_700_000_000_000 + 1000 * version + i,
                 "name": f"reading-{version}-{i}-é", "tags": [f"t{j}" for j in range(i % 3)],
                 "note": None if i % 2 else f"note {i}"}
        if version == 2:
            value["unit"] = f"unit-{i}"
        out.append(value)
    return out


def schema_by_id(registry: str, ident: int) -> str:
    with urllib.request.urlopen(f"{registry}/schemas/ids/{ident}", timeout=10) as response:
        return json.load(response)["schema"]


@pytest.mark.compat("spark: from_avro of Confluent wire-format records, schemas from the registry")
def test_from_avro_with_registry_schemas(spark, broker):  # noqa: F811 (the imported fixture)
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from pyspark.sql.avro.functions import from_avro
    from pyspark.sql.functions import col, expr

    topic = new_topic(broker, "spark-avro", 2)
    client = SchemaRegistryClient({"url": broker.registry})
    context = SerializationContext(topic, MessageField.VALUE)
    written = {}  # key -> (schema id, value)
    records = []
    for version, schema in ((1, V1), (2, V2)):
        serializer = AvroSerializer(client, json.dumps(schema))
        for i, value in enumerate(values(version)):
            wire = serializer(value, context)
            key = f"v{version}-{i}"
            written[key] = (int.from_bytes(wire[1:5], "big"), value)
            records.append(Rec(value=wire, key=key.encode(), partition=i % 2))
    produce_confluent(broker.bootstrap, topic, records)
    ids = sorted({ident for ident, _ in written.values()})
    assert len(ids) == 2, f"two schema versions, ids {ids}"

    raw = (spark.read.format("kafka").options(**kafka_options(broker))
           .option("subscribe", topic).load()
           .select(col("key").cast("string").alias("key"),
                   expr("substring(value, 1, 1)").alias("magic"),
                   expr("conv(hex(substring(value, 2, 4)), 16, 10)").cast("int").alias("id"),
                   expr("substring(value, 6, length(value) - 5)").alias("payload")))
    assert {bytes(r.magic) for r in raw.select("magic").distinct().collect()} == {b"\0"}
    assert sorted(r.id for r in raw.select("id").distinct().collect()) == ids
    got = {}
    for ident in ids:
        decoded = (raw.where(col("id") == ident)
                   .select("key", from_avro(col("payload"), schema_by_id(broker.registry, ident),
                                            {"mode": "FAILFAST"}).alias("value")))
        for row in decoded.collect():
            assert row.key not in got, f"{row.key} read twice"
            got[row.key] = (ident, row.value.asDict(recursive=True))
    assert got == written
