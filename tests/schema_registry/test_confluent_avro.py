"""confluent-kafka's SchemaRegistryClient and Avro serializers against kbroker's registry:
records produced through kbroker in Confluent's wire format and read back, as an application
does against Confluent's registry. Also: the registry survives a restart and a kill -9."""

from __future__ import annotations

import json
import struct
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.schema_registry.conftest import start_registry

USER = json.dumps({"type": "record", "name": "User", "namespace": "example",
                   "fields": [{"name": "name", "type": "string"},
                              {"name": "age", "type": "int"}]})
USER_V2 = json.dumps({"type": "record", "name": "User", "namespace": "example",
                      "fields": [{"name": "name", "type": "string"},
                                 {"name": "age", "type": "int"},
                                 {"name": "email", "type": ["null", "string"],
                                  "default": None}]})


def _consume(bootstrap: str, topic: str, count: int) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got = []
    try:
        for _ in range(200):
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            got.append(message)
            if len(got) == count:
                break
    finally:
        consumer.close()
    return got


def test_avro_serializer_round_trip_through_kbroker(registry):
    client = SchemaRegistryClient({"url": registry.url})
    serializer = AvroSerializer(client, USER)
    topic = "users"
    producer = Producer({"bootstrap.servers": registry.broker.bootstrap})
    values = [{"name": f"user-{i}", "age": 20 + i} for i in range(5)]
    for value in values:
        producer.produce(topic, serializer(value, SerializationContext(topic,
                                                                        MessageField.VALUE)))
    assert producer.flush(30) == 0

    messages = _consume(registry.broker.bootstrap, topic, len(values))
    raw = messages[0].value()
    magic, schema_id = struct.unpack(">bI", raw[:5])
    assert magic == 0 and schema_id == 1  # Confluent's wire format, the registry's first id

    # A fresh client (cold cache) fetches the writer's schema by id from kbroker.
    deserializer = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))
    decoded = [deserializer(m.value(), SerializationContext(topic, MessageField.VALUE))
               for m in messages]
    assert decoded == values
    latest = client.get_latest_version(f"{topic}-value")
    assert (latest.schema_id, latest.version, latest.subject) == (1, 1, "users-value")
    assert json.loads(latest.schema.schema_str) == json.loads(USER)


def test_evolution_and_rejection_through_the_client(registry):
    client = SchemaRegistryClient({"url": registry.url})
    subject = "orders-value"
    first = client.register_schema(subject, Schema(USER, "AVRO"))
    second = client.register_schema(subject, Schema(USER_V2, "AVRO"))
    assert (first, second) == (1, 2)
    assert client.get_versions(subject) == [1, 2]
    # the same schema under another subject keeps its id
    assert client.register_schema("other-value", Schema(USER_V2, "AVRO")) == 2
    incompatible = json.dumps({"type": "record", "name": "User", "namespace": "example",
                               "fields": [{"name": "name", "type": "int"}]})
    with pytest.raises(SchemaRegistryError) as caught:
        client.register_schema(subject, Schema(incompatible, "AVRO"))
    assert caught.value.http_status_code == 409
    assert client.test_compatibility(subject, Schema(incompatible, "AVRO")) is False
    found = client.lookup_schema(subject, Schema(USER, "AVRO"))
    assert (found.schema_id, found.version) == (1, 1)
    client.set_compatibility(subject, "NONE")
    assert client.register_schema(subject, Schema(incompatible, "AVRO")) == 3
    assert client.get_compatibility(subject) == "NONE"
    assert client.delete_subject("other-value") == [1]
    assert sorted(client.get_subjects()) == ["orders-value"]


def test_restart_and_kill_keep_ids_and_versions(tmp_path):
    registry = start_registry(tmp_path)
    try:
        client = SchemaRegistryClient({"url": registry.url})
        assert client.register_schema("a-value", Schema(USER, "AVRO")) == 1
        assert client.register_schema("a-value", Schema(USER_V2, "AVRO")) == 2
        client.set_compatibility("a-value", "FULL")
        registry.broker.restart()  # SIGTERM, then the same data dir
        assert registry.call("GET", "/subjects/a-value/versions")[1] == [1, 2]
        assert registry.call("GET", "/config/a-value")[1] == {"compatibilityLevel": "FULL"}
        registry.broker.kill()  # kill -9: nothing flushed but what acks=all committed
        registry.broker.start()
        fresh = SchemaRegistryClient({"url": registry.url})
        assert json.loads(fresh.get_schema(2).schema_str) == json.loads(USER_V2)
        # ids never repeat: the next new schema gets 3
        third = json.dumps({"type": "record", "name": "Other", "fields": []})
        assert fresh.register_schema("b-value", Schema(third, "AVRO")) == 3
    finally:
        registry.broker.kill()
