"""The internal record formats of __consumer_offsets and __transaction_state (generated like the
API messages, from the record schemas in Kafka's group and transaction coordinator jars, see
schemas/pin.json): round trips for every version, fixed layouts of the
non-flexible versions, and the records a real Apache Kafka 4.3.1 wrote
(tests/golden/internal/records.jsonl, see capture_internal_records.py there) decode to what the
clients did and re-encode to the same bytes.

On disk a key is an int16 record type followed by the key struct (always version 0); a value is an
int16 value version followed by the value struct of that version."""

from __future__ import annotations

import json
import struct
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbroker.protocol import messages
from kbroker.protocol.messages.group_metadata_key import GroupMetadataKey
from kbroker.protocol.messages.group_metadata_value import GroupMetadataValue
from kbroker.protocol.messages.offset_commit_key import OffsetCommitKey
from kbroker.protocol.messages.offset_commit_value import OffsetCommitValue
from kbroker.protocol.messages.transaction_log_key import TransactionLogKey
from kbroker.protocol.messages.transaction_log_value import TransactionLogValue
from kbroker.protocol.primitives import ZERO_UUID, DecodeError

from .message_strategies import message_strategy

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "internal" / "records.jsonl"

# (topic, record type) -> (key class, value class)
RECORD_TYPES = {
    ("__consumer_offsets", 1): (OffsetCommitKey, OffsetCommitValue),
    ("__consumer_offsets", 2): (GroupMetadataKey, GroupMetadataValue),
    ("__transaction_state", 0): (TransactionLogKey, TransactionLogValue),
}
ALL = [OffsetCommitKey, OffsetCommitValue, GroupMetadataKey, GroupMetadataValue,
       TransactionLogKey, TransactionLogValue]

# TransactionState codes as Kafka writes them in TransactionStatus.
EMPTY, ONGOING, PREPARE_COMMIT, COMPLETE_COMMIT = 0, 1, 2, 4


def _cases():
    for cls in ALL:
        lo, hi = cls.VALID_VERSIONS
        for version in range(lo, hi + 1):
            yield pytest.param(cls, version, id=f"{cls.__name__}-v{version}")


def test_schema_facts():
    assert [(c.MESSAGE_TYPE, c.API_KEY, c.VALID_VERSIONS, c.FLEXIBLE_VERSION) for c in ALL] == [
        ("coordinator-key", 1, (0, 0), None),
        ("coordinator-value", 1, (0, 4), 4),
        ("coordinator-key", 2, (0, 0), None),
        ("coordinator-value", 2, (0, 4), 4),
        ("coordinator-key", 0, (0, 0), None),
        ("coordinator-value", 0, (0, 1), 1),
    ]


def test_not_in_the_api_registry():
    modules = {info.module for info in messages.API_BY_KEY.values()}
    for cls in ALL:
        assert cls.__module__.rsplit(".", 1)[1] not in modules


@pytest.mark.parametrize("cls,version", list(_cases()))
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_round_trip(cls, version, data):
    message = data.draw(message_strategy(cls, version))
    encoded = message.to_bytes(version)
    decoded, end = cls.read(memoryview(encoded), 0, version)
    assert end == len(encoded)
    assert decoded == message
    assert decoded.to_bytes(version) == encoded
    for cut in range(len(encoded)):
        with pytest.raises(DecodeError):
            cls.decode(memoryview(encoded[:cut]), version)


# --- fixed layouts of the versions the golden capture does not cover -----------------------------

def _str(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def test_offset_commit_value_layouts():
    v = OffsetCommitValue(offset=42, leader_epoch=7, metadata="m", commit_timestamp=1000,
                          expire_timestamp=2000)
    assert v.to_bytes(0) == struct.pack(">q", 42) + _str("m") + struct.pack(">q", 1000)
    # v1 (and only v1) carries the expire timestamp.
    assert v.to_bytes(1) == struct.pack(">q", 42) + _str("m") + struct.pack(">qq", 1000, 2000)
    assert v.to_bytes(2) == v.to_bytes(0)
    # v3 adds the leader epoch after the offset.
    assert v.to_bytes(3) == struct.pack(">qi", 42, 7) + _str("m") + struct.pack(">q", 1000)
    # v4 is flexible: compact string, empty tag section while topicId is zero.
    assert v.to_bytes(4) == struct.pack(">qi", 42, 7) + b"\x02m" + struct.pack(">q", 1000) + b"\x00"
    old = OffsetCommitValue.decode(memoryview(v.to_bytes(0)), 0)
    assert (old.leader_epoch, old.expire_timestamp, old.topic_id) == (-1, -1, ZERO_UUID)


def test_group_metadata_value_layouts():
    member = GroupMetadataValue.MemberMetadata(
        member_id="m-1", group_instance_id="static", client_id="c", client_host="/h",
        rebalance_timeout=300, session_timeout=100, subscription=b"S", assignment=b"A")
    v = GroupMetadataValue(protocol_type="consumer", generation=3, protocol="range", leader="m-1",
                           current_state_timestamp=55, members=[member])
    head = _str("consumer") + struct.pack(">i", 3) + _str("range") + _str("m-1")
    tail = struct.pack(">i", 100) + struct.pack(">i", 1) + b"S" + struct.pack(">i", 1) + b"A"
    m0 = _str("m-1") + _str("c") + _str("/h")
    assert v.to_bytes(0) == head + struct.pack(">i", 1) + m0 + tail
    assert v.to_bytes(1) == head + struct.pack(">i", 1) + m0 + struct.pack(">i", 300) + tail
    assert v.to_bytes(2) == (head + struct.pack(">q", 55) + struct.pack(">i", 1) + m0
                             + struct.pack(">i", 300) + tail)
    m3 = _str("m-1") + _str("static") + _str("c") + _str("/h") + struct.pack(">i", 300)
    assert v.to_bytes(3) == head + struct.pack(">q", 55) + struct.pack(">i", 1) + m3 + tail
    decoded = GroupMetadataValue.decode(memoryview(v.to_bytes(0)), 0)
    assert decoded.current_state_timestamp == -1
    assert decoded.members[0].rebalance_timeout == -1
    assert decoded.members[0].group_instance_id is None
    # Null protocol and leader (an Empty group).
    empty = GroupMetadataValue(protocol_type="", generation=0, protocol=None, leader=None)
    assert empty.to_bytes(3) == (_str("") + struct.pack(">i", 0) + b"\xff\xff\xff\xff"
                                 + struct.pack(">q", -1) + struct.pack(">i", 0))


def test_transaction_log_value_v0_layout():
    v = TransactionLogValue(
        producer_id=9, producer_epoch=2, transaction_timeout_ms=60000,
        transaction_status=ONGOING,
        transaction_partitions=[TransactionLogValue.PartitionsSchema(topic="t",
                                                                     partition_ids=[0, 3])],
        transaction_last_update_timestamp_ms=11, transaction_start_timestamp_ms=10)
    assert v.to_bytes(0) == (struct.pack(">qhib", 9, 2, 60000, ONGOING) + struct.pack(">i", 1)
                             + _str("t") + struct.pack(">iii", 2, 0, 3)
                             + struct.pack(">qq", 11, 10))
    # A v0 value decodes with the defaults of the v1 tagged fields.
    back = TransactionLogValue.decode(memoryview(v.to_bytes(0)), 0)
    assert back == v
    assert (back.previous_producer_id, back.next_producer_id, back.next_producer_epoch,
            back.client_transaction_version) == (-1, -1, -1, 0)


def test_transaction_log_value_v1_tags_in_order():
    v = TransactionLogValue(producer_id=5, previous_producer_id=4, next_producer_id=6,
                            producer_epoch=0, next_producer_epoch=0, client_transaction_version=2,
                            transaction_partitions=None, transaction_start_timestamp_ms=-1)
    body = v.to_bytes(1)
    tags = body[len(body) - (1 + 2 * 10 + 2 * 4):]  # count + 4 tags
    assert tags == (b"\x04" + b"\x00\x08" + struct.pack(">q", 4) + b"\x01\x08"
                    + struct.pack(">q", 6) + b"\x02\x02" + struct.pack(">h", 2)
                    + b"\x03\x02" + struct.pack(">h", 0))


# --- records written by Apache Kafka 4.3.1 ----------------------------------------------------

def _golden():
    rows = [json.loads(line) for line in GOLDEN.read_text().splitlines() if line.strip()]
    out = []
    for row in rows:
        key = bytes.fromhex(row["key"])
        value = bytes.fromhex(row["value"]) if row["value"] is not None else None
        (record_type,) = struct.unpack_from(">h", key)
        key_cls, value_cls = RECORD_TYPES[(row["topic"], record_type)]
        k, end = key_cls.read(memoryview(key), 2, 0)
        assert end == len(key)
        assert struct.pack(">h", record_type) + k.to_bytes(0) == key
        v = version = None
        if value is not None:
            (version,) = struct.unpack_from(">h", value)
            v, end = value_cls.read(memoryview(value), 2, version)
            assert end == len(value)
            assert struct.pack(">h", version) + v.to_bytes(version) == value
        out.append((row, record_type, k, version, v))
    return out


def test_golden_file_covers_all_record_kinds():
    kinds = {(row["topic"], rt, version) for row, rt, _, version, _ in _golden()}
    # What Kafka 4.3.1 wrote: GroupMetadataValue v3, OffsetCommitValue v4 (flexible, with
    # topicId), TransactionLogValue v1 (flexible).
    assert kinds == {("__consumer_offsets", 2, 3), ("__consumer_offsets", 1, 4),
                     ("__transaction_state", 0, 1)}
    assert all(row["kafka_version"] == "4.3.1" for row, *_ in _golden())


def test_golden_group_metadata():
    groups = [(k, v) for row, rt, k, _, v in _golden()
              if row["topic"] == "__consumer_offsets" and rt == 2]
    assert [k.group for k, _ in groups] == ["golden-group"] * 3
    created, stable, left = (v for _, v in groups)
    # Created empty, then generation 1 with the one member, then generation 2 after it left.
    assert (created.protocol_type, created.generation, created.protocol, created.leader,
            created.members) == ("", 0, None, None, [])
    assert (stable.protocol_type, stable.generation, stable.protocol) == ("consumer", 1, "range")
    [member] = stable.members
    assert member.member_id.startswith("golden-client-")
    assert stable.leader == member.member_id
    assert (member.client_id, member.client_host, member.group_instance_id) == (
        "golden-client", "/127.0.0.1", None)
    assert (member.session_timeout, member.rebalance_timeout) == (10000, 300000)
    assert b"golden-internal" in member.subscription and b"golden-internal" in member.assignment
    assert (left.protocol_type, left.generation, left.protocol, left.leader, left.members) == (
        "consumer", 2, None, None, [])
    assert created.current_state_timestamp <= stable.current_state_timestamp \
        <= left.current_state_timestamp


def test_golden_offset_commits():
    commits = [(k, v) for row, rt, k, _, v in _golden()
               if row["topic"] == "__consumer_offsets" and rt == 1]
    assert [(k.group, k.topic, k.partition) for k, _ in commits] == [
        ("golden-group", "golden-internal", 0)] * 2
    auto, explicit = (v for _, v in commits)
    assert (auto.offset, auto.leader_epoch, auto.metadata) == (3, 0, "")
    # librdkafka sends commit metadata with a trailing NUL.
    assert (explicit.offset, explicit.leader_epoch, explicit.metadata) == (2, -1, "golden-meta\x00")
    assert auto.expire_timestamp == explicit.expire_timestamp == -1
    assert isinstance(auto.topic_id, uuid.UUID) and auto.topic_id != ZERO_UUID
    assert explicit.topic_id == auto.topic_id
    assert auto.commit_timestamp <= explicit.commit_timestamp


def test_golden_transaction_log():
    txns = [(k, v) for row, rt, k, _, v in _golden() if row["topic"] == "__transaction_state"]
    by_id: dict[str, list] = {}
    for k, v in txns:
        by_id.setdefault(k.transactional_id, []).append(v)
    assert set(by_id) == {"golden-txn", "golden-java-txn"}
    for tid, client_tv in (("golden-txn", 0), ("golden-java-txn", 2)):
        states = by_id[tid]
        assert [v.transaction_status for v in states] == [EMPTY, ONGOING, PREPARE_COMMIT,
                                                          COMPLETE_COMMIT]
        init, ongoing, prepare, complete = states
        assert len({v.producer_id for v in states}) == 1
        assert init.transaction_partitions is None and init.transaction_start_timestamp_ms == -1
        assert init.client_transaction_version == 0
        for v in (ongoing, prepare):
            assert [(p.topic, p.partition_ids) for p in v.transaction_partitions] == [
                ("golden-txn-topic", [0])]
            assert v.client_transaction_version == client_tv
        assert complete.transaction_partitions == []
        assert all(v.transaction_timeout_ms == 60000 for v in states)
        assert ongoing.transaction_start_timestamp_ms == complete.transaction_start_timestamp_ms
        assert all(v.next_producer_id == -1 and v.next_producer_epoch == -1 for v in states)
        assert all(v.previous_producer_id == init.producer_id for v in states)
    # librdkafka (transaction version 1) keeps the epoch; the Java client (transaction version 2,
    # KIP-890) has the coordinator bump it when the transaction ends.
    assert [v.producer_epoch for v in by_id["golden-txn"]] == [0, 0, 0, 0]
    assert [v.producer_epoch for v in by_id["golden-java-txn"]] == [0, 0, 1, 1]
    assert by_id["golden-java-txn"][0].producer_id != by_id["golden-txn"][0].producer_id
