"""confluent-kafka's Protobuf and JSON Schema serializers against kbroker's registry: records
produced through kbroker in Confluent's wire format and read back with a fresh client (cold cache),
as an application does against Confluent's registry; and evolution checked by the registry."""

from __future__ import annotations

import json
import struct

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.schema_registry.test_confluent_avro import _consume
from tests.schema_registry.test_protobuf_format import generated_module

MONEY = """
syntax = "proto3";
package shop.common;
message Money {
  int64 units = 1;
  string currency = 2;
}
"""

ORDER = """
syntax = "proto3";
package shop.orders;
import "google/protobuf/timestamp.proto";
import "shop/common/money.proto";

message Order {
  string id = 1;
  shop.common.Money total = 2;
  repeated string items = 3;
  map<string, int32> quantities = 4;
  google.protobuf.Timestamp placed = 5;
  oneof payment {
    string card = 6;
    string voucher = 7;
  }
}
"""


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0


def test_protobuf_serializer_round_trip_with_a_reference(registry, tmp_path):
    module = generated_module(tmp_path, ORDER, {"shop/common/money.proto": MONEY})
    client = SchemaRegistryClient({"url": registry.url})
    serializer = ProtobufSerializer(module.Order, client, {"use.deprecated.format": False})
    topic = "orders"
    context = SerializationContext(topic, MessageField.VALUE)
    orders = []
    for i in range(4):
        order = module.Order(id=f"o-{i}", items=["a", "b"], quantities={"a": i}, card=f"card-{i}")
        order.total.units, order.total.currency = 100 + i, "EUR"
        order.placed.seconds = 1_700_000_000 + i
        orders.append(order)
    _produce(registry.broker.bootstrap, topic, [serializer(o, context) for o in orders])

    messages = _consume(registry.broker.bootstrap, topic, len(orders))
    magic, schema_id = struct.unpack(">bI", messages[0].value()[:5])
    assert magic == 0
    # the import was registered first, under its own name as subject, and referenced
    assert client.get_subjects() == ["orders-value", "shop/common/money.proto"]
    latest = client.get_latest_version("orders-value")
    assert latest.schema_id == schema_id and latest.schema.schema_type == "PROTOBUF"
    assert [(r.name, r.subject, r.version) for r in latest.schema.references] == [
        ("shop/common/money.proto", "shop/common/money.proto", 1)]
    # stored as .proto text, whatever the client sent (a base64 descriptor)
    assert "message Order {" in latest.schema.schema_str

    deserializer = ProtobufDeserializer(module.Order, {"use.deprecated.format": False},
                                        SchemaRegistryClient({"url": registry.url}))
    assert [deserializer(m.value(), context) for m in messages] == orders


def test_protobuf_evolution_is_checked(registry):
    client = SchemaRegistryClient({"url": registry.url})
    subject = "evolve-value"
    v1 = 'syntax = "proto3"; package e; message M { int32 a = 1; string b = 2; }'
    v2 = 'syntax = "proto3"; package e; message M { int64 a = 1; string b = 2; bool c = 3; }'
    bad = 'syntax = "proto3"; package e; message M { string a = 1; string b = 2; }'
    assert client.register_schema(subject, Schema(v1, "PROTOBUF")) == 1
    assert client.register_schema(subject, Schema(v2, "PROTOBUF")) == 2
    # the same schema spelled differently is the same schema
    assert client.register_schema(subject, Schema(v2.replace("; ", ";\n  "), "PROTOBUF")) == 2
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(bad, "PROTOBUF"))
    assert refused.value.http_status_code == 409
    status, answer = registry.call("POST", f"/compatibility/subjects/{subject}/versions/latest?verbose=true",
                                   {"schemaType": "PROTOBUF", "schema": bad})
    assert status == 200 and answer["is_compatible"] is False
    assert "FIELD_SCALAR_KIND_CHANGED" in answer["messages"][0]
    status, answer = registry.call("POST", "/subjects/broken-value/versions",
                                   {"schemaType": "PROTOBUF", "schema": 'syntax = "proto3"; message M { X x = 1; }'})
    assert status == 422 and answer["error_code"] == 42201
    assert '"X" is not defined' in answer["message"]


PERSON = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Person",
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0},
        "address": {"$ref": "address.json"},
    },
    "required": ["name"],
    "additionalProperties": False,
}
ADDRESS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def test_json_serializer_round_trip_with_a_reference(registry):
    client = SchemaRegistryClient({"url": registry.url})
    address_id = client.register_schema("address", Schema(json.dumps(ADDRESS), "JSON"))
    from confluent_kafka.schema_registry import SchemaReference

    person = Schema(json.dumps(PERSON), "JSON", [SchemaReference("address.json", "address", 1)])
    person_id = client.register_schema("people-value", person)
    assert person_id != address_id

    serializer = JSONSerializer(person, client, conf={"auto.register.schemas": False, "use.latest.version": True})
    topic = "people"
    context = SerializationContext(topic, MessageField.VALUE)
    people = [{"name": f"p{i}", "age": 30 + i, "address": {"city": "Lyon"}} for i in range(3)]
    _produce(registry.broker.bootstrap, topic, [serializer(p, context) for p in people])

    messages = _consume(registry.broker.bootstrap, topic, len(people))
    assert struct.unpack(">bI", messages[0].value()[:5]) == (0, person_id)
    deserializer = JSONDeserializer(None, schema_registry_client=SchemaRegistryClient({"url": registry.url}))
    assert [deserializer(m.value(), context) for m in messages] == people
    # the registry keeps the text compact, keys in the order given
    assert client.get_schema(person_id).schema_str == json.dumps(PERSON, separators=(",", ":"))


def test_json_evolution_is_checked(registry):
    client = SchemaRegistryClient({"url": registry.url})
    subject = "evolve-json-value"
    closed = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}
    widened = {**closed, "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}
    assert client.register_schema(subject, Schema(json.dumps(closed), "JSON")) == 1
    # an optional property added to a closed content model: BACKWARD compatible
    assert client.register_schema(subject, Schema(json.dumps(widened), "JSON")) == 2
    narrowed = {**widened, "properties": {"b": {"type": "integer"}}}
    with pytest.raises(SchemaRegistryError) as refused:  # removed from a closed model
        client.register_schema(subject, Schema(json.dumps(narrowed), "JSON"))
    assert refused.value.http_status_code == 409
    status, answer = registry.call("POST", "/subjects/bad-json-value/versions",
                                   {"schemaType": "JSON", "schema": '{"type": "strin"}'})
    assert status == 422 and answer["error_code"] == 42201


def test_protobuf_serializer_with_normalized_schemas(registry, tmp_path):
    module = generated_module(tmp_path, ORDER.replace("package shop.orders;", "package shop.normal;"),
                              {"shop/common/money.proto": MONEY})
    client = SchemaRegistryClient({"url": registry.url})
    conf = {"use.deprecated.format": False, "normalize.schemas": True}
    serializer = ProtobufSerializer(module.Order, client, conf)
    topic = "normalized-orders"
    context = SerializationContext(topic, MessageField.VALUE)
    order = module.Order(id="n-1", items=["x"], voucher="v")
    order.total.units = 7
    _produce(registry.broker.bootstrap, topic, [serializer(order, context)])
    [message] = _consume(registry.broker.bootstrap, topic, 1)
    stored = client.get_latest_version(f"{topic}-value").schema.schema_str
    assert ".shop.common.Money total = 2;" in stored  # the normalized text: names fully qualified
    deserializer = ProtobufDeserializer(module.Order, {"use.deprecated.format": False},
                                        SchemaRegistryClient({"url": registry.url}))
    assert deserializer(message.value(), context) == order


def test_json_serializer_registers_a_2020_12_schema_itself(registry):
    event = json.dumps({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
                        "properties": {"kind": {"enum": ["click", "view"]}, "at": {"type": "integer"}},
                        "required": ["kind"]})
    client = SchemaRegistryClient({"url": registry.url})
    serializer = JSONSerializer(event, client)  # auto-registers events-value on first use
    topic = "events"
    context = SerializationContext(topic, MessageField.VALUE)
    values = [{"kind": "click", "at": 1}, {"kind": "view", "at": 2}]
    _produce(registry.broker.bootstrap, topic, [serializer(v, context) for v in values])
    messages = _consume(registry.broker.bootstrap, topic, len(values))
    deserializer = JSONDeserializer(None, schema_registry_client=SchemaRegistryClient({"url": registry.url}))
    assert [deserializer(m.value(), context) for m in messages] == values
    assert client.get_latest_version("events-value").schema.schema_type == "JSON"
