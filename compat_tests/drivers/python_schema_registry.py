"""The schema-registry commands of the Python driver: confluent-kafka's ``SchemaRegistryClient``
with its Avro, JSON Schema and Protobuf serializers and deserializers (the contract's ``sr-produce``,
``sr-consume`` and ``sr-register``, ``compat_tests/README.md``).

The serializer registers the schema itself (``auto.register.schemas``, its default), as an
application using it does; the records travel through the confluent adapter of
``compat_tests/clients`` like every other produce and consume of this driver. Only confluent-kafka
has a registry client: the other Python clients answer ``unsupported`` (exit 64).
"""

from __future__ import annotations

import argparse
import json
import struct

from contract import EXIT_ERROR, EXIT_OK, EXIT_USAGE, done_consuming, emit, error_fields, text

from compat_tests.clients import adapter
from compat_tests.clients.records import Ack, Rec

FORMATS = {"avro": "AVRO", "json": "JSON", "protobuf": "PROTOBUF"}


def serializer(a, client, schema: str):
    """A function of (value as JSON, context) -> the value in Confluent's wire format."""
    if a.format == "json":
        from confluent_kafka.schema_registry.json_schema import JSONSerializer
        return JSONSerializer(schema, client)
    if a.format == "protobuf":
        from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
        from google.protobuf.json_format import ParseDict

        message = message_class(schema)
        serialize = ProtobufSerializer(message, client)
        return lambda value, context: serialize(ParseDict(value, message()), context)
    from confluent_kafka.schema_registry.avro import AvroSerializer
    return AvroSerializer(client, schema)


def deserializer(a, client):
    """A function of (wire, context) -> the value as JSON, decoded with the writer's schema,
    which it fetches by the id in the value."""
    if a.format == "json":
        from confluent_kafka.schema_registry.json_schema import JSONDeserializer
        return JSONDeserializer(None, schema_registry_client=client)
    if a.format == "protobuf":
        return protobuf_deserializer(client)
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    return AvroDeserializer(client)


def protobuf_deserializer(client):
    """confluent-kafka's ProtobufDeserializer decodes into a message class the application
    has; this driver makes one from the writer's schema, fetched by id (once per id)."""
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from google.protobuf.json_format import MessageToDict

    by_id = {}

    def deserialize(wire: bytes, context):
        ident = schema_id(wire)
        if ident not in by_id:
            message = message_class(client.get_schema(ident).schema_str)
            by_id[ident] = ProtobufDeserializer(message, {"use.deprecated.format": False})
        return MessageToDict(by_id[ident](wire, context), preserving_proto_field_name=True)
    return deserialize


def message_class(proto: str):
    """The first message of a .proto text as a Python class, compiled by the protoc that
    grpcio-tools ships, in a descriptor pool of its own (v1 and v2 define the same names)."""
    import tempfile
    from pathlib import Path

    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    from grpc_tools import protoc

    includes = Path(protoc.__file__).parent / "_proto"
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "schema.proto").write_text(proto)
        out = Path(tmp) / "schema.pb"
        if protoc.main(["protoc", f"-I{tmp}", f"-I{includes}", f"--descriptor_set_out={out}",
                        "--include_imports", str(Path(tmp) / "schema.proto")]) != 0:
            raise ValueError("protoc could not compile the schema")
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
    pool = descriptor_pool.DescriptorPool()
    for file in files:
        pool.Add(file)
    schema = files[-1]
    name = ".".join(filter(None, [schema.package, schema.message_type[0].name]))
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


def add_parsers(sub, common) -> None:
    """``common`` has --bootstrap, --client-id, --property and --timeout-ms; sr-register talks
    to the registry only."""
    registry = argparse.ArgumentParser(add_help=False)
    registry.add_argument("--registry", required=True, help="the registry's URL")
    registry.add_argument("--format", default="avro", choices=sorted(FORMATS))

    prod = sub.add_parser("sr-produce", parents=[common, registry])
    prod.add_argument("--topic", required=True)
    prod.add_argument("--schema-file", required=True)
    prod.add_argument("--values-file", required=True, help="one JSON object per line")
    prod.add_argument("--key-prefix", default="key-")

    cons = sub.add_parser("sr-consume", parents=[common, registry])
    cons.add_argument("--topic", required=True)
    cons.add_argument("--count", type=int, default=10)

    reg = sub.add_parser("sr-register", parents=[registry])
    reg.add_argument("--subject", required=True)
    reg.add_argument("--schema-file", required=True)
    reg.add_argument("--timeout-ms", type=int, default=30000)


def confluent_only(command):
    """The other Python clients have no registry client: the contract's "unsupported"."""
    def run(a) -> int:
        if a.client == "confluent":
            return command(a)
        emit("error", error="unsupported",
             message=f"{a.client} has no schema registry client or serializers")
        return EXIT_USAGE
    return run


def registry_client(a):
    from confluent_kafka.schema_registry import SchemaRegistryClient

    return SchemaRegistryClient({"url": a.registry, "timeout": max(1, a.timeout_ms // 1000)})


def schema_id(wire: bytes) -> int:
    """The id in Confluent's wire format: magic byte 0, then the id as a big-endian int32."""
    magic, ident = struct.unpack(">bI", wire[:5])
    assert magic == 0, f"magic byte {magic}"
    return ident


def sr_produce(a) -> int:
    """Serialize each value of --values-file with the schema (registered on the first
    serialization under <topic>-value), key record i <key-prefix>i, produce them in order."""
    from confluent_kafka.serialization import MessageField, SerializationContext

    schema = open(a.schema_file).read()
    values = [json.loads(line) for line in open(a.values_file) if line.strip()]
    serialize = serializer(a, registry_client(a), schema)
    context = SerializationContext(a.topic, MessageField.VALUE)
    wires = [serialize(value, context) for value in values]
    emit("registered", subject=f"{a.topic}-value", id=schema_id(wires[0]))
    records = [Rec(value=wire, key=f"{a.key_prefix}{i}".encode())
               for i, wire in enumerate(wires)]
    results = adapter("confluent").produce(a.bootstrap, a.topic, records,
                                           timeout=a.timeout_ms / 1000)
    acked = 0
    for i, result in enumerate(results):
        if isinstance(result, Ack):
            acked += 1
            emit("produced", index=i, topic=a.topic, partition=result.partition,
                 offset=result.offset)
        else:
            emit("error", index=i, **error_fields(result.error))
    emit("done", produced=acked, requested=len(records))
    return EXIT_OK if acked == len(records) else EXIT_ERROR


def sr_consume(a) -> int:
    """Every partition from the beginning; each value decoded with its writer's schema, which
    the deserializer fetches from the registry by the id in the value's header."""
    from confluent_kafka.serialization import MessageField, SerializationContext

    deserialize = deserializer(a, registry_client(a))
    context = SerializationContext(a.topic, MessageField.VALUE)

    def on_record(got) -> None:
        emit("record", topic=got.topic, partition=got.partition, offset=got.offset,
             key=text(got.key), schemaId=schema_id(got.value),
             value=deserialize(got.value, context))

    got = adapter("confluent").consume(a.bootstrap, a.topic, a.count, start="beginning",
                                       timeout=a.timeout_ms / 1000, on_record=on_record)
    return done_consuming(len(got), a.count)


def sr_register(a) -> int:
    """Register --schema-file under --subject: `registered` {subject, id}, or the registry's
    refusal as an `error` with its HTTP status and Confluent error code."""
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    schema = Schema(open(a.schema_file).read(), FORMATS[a.format])
    try:
        ident = registry_client(a).register_schema(a.subject, schema)
    except SchemaRegistryError as exc:
        emit("error", error="refused", status=exc.http_status_code, code=exc.error_code,
             message=exc.error_message)
        return EXIT_ERROR
    emit("registered", subject=a.subject, id=ident)
    return EXIT_OK


COMMANDS = {"sr-produce": confluent_only(sr_produce), "sr-consume": confluent_only(sr_consume),
            "sr-register": confluent_only(sr_register)}
