"""The ``_schemas`` records: kbroker writes Confluent's bytes, and replays a topic Confluent
Schema Registry wrote (fields it does not use, record types it does not serve) into the same
state. The shard is fed records directly, as a load replays them."""

from __future__ import annotations

import json

from kbroker.schema_registry import records
from kbroker.schema_registry.records import Key, Reference, SchemaValue
from kbroker.schema_registry.service import Defaults
from kbroker.schema_registry.store import RegistryShard


def _shard() -> RegistryShard:
    shard = RegistryShard(None, 0, Defaults("BACKWARD"))
    shard.loading = False
    return shard


def test_keys_and_values_are_confluents_bytes():
    assert Key(records.SCHEMA, "t-value", 3).encode() == \
        b'{"keytype":"SCHEMA","subject":"t-value","version":3,"magic":1}'
    assert Key(records.CONFIG).encode() == b'{"keytype":"CONFIG","magic":0}'
    assert Key(records.MODE, "s").encode() == b'{"keytype":"MODE","subject":"s","magic":0}'
    assert Key(records.DELETE_SUBJECT, "s").encode() == \
        b'{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}'
    value = SchemaValue("t-value", 1, 7, '"string"', "AVRO",
                        (Reference("x.Y", "y-value", 2),))
    assert json.loads(value.encode()) == {
        "subject": "t-value", "version": 1, "id": 7, "schemaType": "AVRO",
        "references": [{"name": "x.Y", "subject": "y-value", "version": 2}],
        "schema": '"string"', "deleted": False}
    assert SchemaValue.decode(value.encode()) == value
    assert records.config_value(None, "FULL") == b'{"compatibilityLevel":"FULL"}'
    assert records.delete_subject_value("s", 4) == b'{"subject":"s","version":4}'


CONFLUENT_TOPIC = [  # as Confluent Schema Registry 7.x writes them (key, value)
    ('{"keytype":"NOOP","magic":0}', None),
    ('{"keytype":"SCHEMA","subject":"t-value","version":1,"magic":1}',
     '{"subject":"t-value","version":1,"id":1,"schema":"\\"string\\"","deleted":false}'),
    ('{"keytype":"SCHEMA","subject":"t-value","version":2,"magic":1}',
     '{"subject":"t-value","version":2,"id":2,"md5":"abc=","schema":"\\"bytes\\"",'
     '"metadata":{"properties":{"owner":"me"}},"deleted":false,"ts":1700000000000}'),
    ('{"keytype":"SCHEMA","subject":"p-value","version":1,"magic":1}',
     '{"subject":"p-value","version":1,"id":3,"schemaType":"PROTOBUF",'
     '"schema":"syntax = \\"proto3\\";\\nmessage M {}\\n","deleted":false}'),
    ('{"keytype":"CONFIG","subject":null,"magic":0}', '{"compatibilityLevel":"FULL"}'),
    ('{"keytype":"CONFIG","subject":"p-value","magic":0}',
     '{"subject":"p-value","compatibilityLevel":"NONE","normalize":true}'),
    ('{"keytype":"MODE","subject":"p-value","magic":0}', '{"subject":"p-value","mode":"READONLY"}'),
    ('{"keytype":"CONTEXT","tenant":"default","context":".ctx","magic":0}',
     '{"tenant":"default","context":".ctx"}'),
    ('{"keytype":"DELETE_SUBJECT","subject":"t-value","magic":0}',
     '{"subject":"t-value","version":1}'),
    ('{"keytype":"SCHEMA","subject":"gone","version":1,"magic":1}',
     '{"subject":"gone","version":1,"id":4,"schema":"\\"int\\"","deleted":true}'),
    ('{"keytype":"SCHEMA","subject":"gone","version":1,"magic":1}', None),
]


def test_replays_a_topic_confluent_wrote():
    shard = _shard()
    for offset, (key, value) in enumerate(CONFLUENT_TOPIC):
        shard.replay(offset, key.encode(), value.encode() if value is not None else None)
    assert shard.subjects() == ["p-value", "t-value"]
    assert [e.version for e in shard.subject_entries("t-value")] == [2]  # v1 soft-deleted
    assert shard.versions[("t-value", 1)].deleted
    assert shard.schema_by_id(3).schema_type == "PROTOBUF"
    assert shard.schema_by_id(4) is None  # hard-deleted: unknown, but never handed out again
    assert shard.max_id.get() == 4
    assert shard.compatibility("t-value") == "FULL"
    assert shard.compatibility("p-value") == "NONE"
    assert shard.mode("p-value") == "READONLY" and shard.mode("t-value") == "READWRITE"
    # the same schema text, type and references find the existing id
    assert shard.id_of[("AVRO", '"bytes"', ())] == 2


def test_an_unreadable_record_is_skipped():
    shard = _shard()
    shard.replay(0, b"not json", b"x")
    shard.replay(1, b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}', b"{broken")
    shard.replay(2, b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}',
                 b'{"subject":"s","version":1,"id":1,"schema":"\\"int\\"","deleted":false}')
    assert shard.subjects() == ["s"]
