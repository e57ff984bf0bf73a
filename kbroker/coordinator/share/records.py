"""``__share_group_state`` records in Kafka's formats, and the partition of a share key.

Key: int16 record type (0 ShareSnapshot, 1 ShareUpdate) then the key struct v0 (group id, topic
id, partition). Value: int16 version 0 then ShareSnapshotValue / ShareUpdateValue v0 (flexible;
the delivery complete count is tagged field 0). A deletion is a ShareSnapshot key with a null
value. Other record types are skipped on replay.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
import uuid
from dataclasses import dataclass

from kbroker.coordinator.partitioning import partition_for as _partition_for
from kbroker.coordinator.share.persister import NO_OFFSET, SharePartitionKey, StateBatch
from kbroker.protocol.messages.share_snapshot_key import ShareSnapshotKey
from kbroker.protocol.messages.share_snapshot_value import ShareSnapshotValue
from kbroker.protocol.messages.share_update_key import ShareUpdateKey
from kbroker.protocol.messages.share_update_value import ShareUpdateValue

_INT16 = struct.Struct(">h")
SNAPSHOT_TYPE = 0
UPDATE_TYPE = 1
VALUE_VERSION = 0


def kafka_uuid_str(topic_id: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString()``: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def parse_kafka_uuid(text: str) -> uuid.UUID:
    """Kafka's ``Uuid.fromString``: URL-safe base64 of exactly 16 bytes. ValueError else."""
    try:
        raw = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"Invalid topic ID: {text}") from None
    if len(raw) != 16:
        raise ValueError(f"Invalid topic ID: {text}")
    return uuid.UUID(bytes=raw)


def partition_for(coordinator_key: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(key.asCoordinatorKey().hashCode()) % numPartitions``."""
    return _partition_for(coordinator_key, num_partitions)


_JAVA_INT = re.compile(r"[+-]?[0-9]+")


def parse_coordinator_key(text: str) -> SharePartitionKey:
    """A FindCoordinator SHARE key ``group:topicId:partition``, parsed from the right (the group
    id may hold colons), with the checks of Kafka's ``SharePartitionKey.getInstance(String)``.
    ValueError when malformed."""
    if not text:
        raise ValueError("Share partition key cannot be empty")
    tokens = text.split(":")
    while tokens and tokens[-1] == "":  # Java's split drops trailing empty strings
        tokens.pop()
    if len(tokens) < 3:
        raise ValueError(f"Invalid key format: expected - groupId:topicId:partition, "
                         f"found - {text}")
    group_id = ":".join(tokens[:-2])
    if not group_id.strip():
        raise ValueError("GroupId must not be empty")
    topic_id = parse_kafka_uuid(tokens[-2])
    if not _JAVA_INT.fullmatch(tokens[-1]) or not -2**31 <= int(tokens[-1]) < 2**31:
        raise ValueError(f"Invalid partition: {tokens[-1]}")
    return SharePartitionKey(group_id, topic_id, int(tokens[-1]))


@dataclass(frozen=True)
class ShareState:
    """One share partition's state as the coordinator holds it (Kafka's ShareGroupOffset)."""
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    batches: tuple[StateBatch, ...]
    create_timestamp: int = 0
    write_timestamp: int = 0


def _key(record_type: int, cls, key: SharePartitionKey) -> bytes:
    return _INT16.pack(record_type) + cls(group_id=key.group_id, topic_id=key.topic_id,
                                          partition=key.partition).to_bytes(0)


def snapshot_record(key: SharePartitionKey, s: ShareState) -> tuple[bytes, bytes]:
    value = ShareSnapshotValue(
        snapshot_epoch=s.snapshot_epoch, state_epoch=s.state_epoch, leader_epoch=s.leader_epoch,
        start_offset=s.start_offset, delivery_complete_count=s.delivery_complete_count,
        create_timestamp=s.create_timestamp, write_timestamp=s.write_timestamp,
        state_batches=[ShareSnapshotValue.StateBatch(
            first_offset=b.first_offset, last_offset=b.last_offset,
            delivery_state=b.delivery_state, delivery_count=b.delivery_count)
            for b in s.batches])
    return (_key(SNAPSHOT_TYPE, ShareSnapshotKey, key),
            _INT16.pack(VALUE_VERSION) + value.to_bytes(VALUE_VERSION))


def update_record(key: SharePartitionKey, snapshot_epoch: int, leader_epoch: int,
                  start_offset: int, delivery_complete_count: int,
                  batches: list[StateBatch]) -> tuple[bytes, bytes]:
    value = ShareUpdateValue(
        snapshot_epoch=snapshot_epoch, leader_epoch=leader_epoch, start_offset=start_offset,
        delivery_complete_count=delivery_complete_count,
        state_batches=[ShareUpdateValue.StateBatch(
            first_offset=b.first_offset, last_offset=b.last_offset,
            delivery_state=b.delivery_state, delivery_count=b.delivery_count)
            for b in batches])
    return (_key(UPDATE_TYPE, ShareUpdateKey, key),
            _INT16.pack(VALUE_VERSION) + value.to_bytes(VALUE_VERSION))


def tombstone(key: SharePartitionKey) -> tuple[bytes, None]:
    return _key(SNAPSHOT_TYPE, ShareSnapshotKey, key), None


@dataclass(frozen=True)
class Decoded:
    record_type: int
    key: SharePartitionKey
    value: object  # ShareSnapshotValue, ShareUpdateValue or None (a tombstone)


def decode(key: bytes, value: bytes | None) -> Decoded | None:
    """The record, or None for a type (or a future version) this coordinator does not know."""
    view = memoryview(key)
    (record_type,) = _INT16.unpack_from(view, 0)
    if record_type == SNAPSHOT_TYPE:
        key_cls, value_cls = ShareSnapshotKey, ShareSnapshotValue
    elif record_type == UPDATE_TYPE:
        key_cls, value_cls = ShareUpdateKey, ShareUpdateValue
    else:
        return None
    k = key_cls.decode(view[2:], 0)
    spk = SharePartitionKey(k.group_id, k.topic_id, k.partition)
    if value is None:
        return Decoded(record_type, spk, None)
    vview = memoryview(value)
    (version,) = _INT16.unpack_from(vview, 0)
    if version != VALUE_VERSION:
        return None  # Kafka ignores a version it does not support (UnsupportedVersionException)
    return Decoded(record_type, spk, value_cls.decode(vview[2:], version))


def batches_of(value) -> tuple[StateBatch, ...]:
    return tuple(StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                 for b in value.state_batches)


__all__ = ["NO_OFFSET", "ShareState", "partition_for", "kafka_uuid_str"]
