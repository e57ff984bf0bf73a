"""The records of ``__consumer_offsets`` in Kafka's formats, and the partition of a group.

A record key is an int16 record type followed by the key struct (version 0):
type 0 or 1 is an OffsetCommitKey (group, topic, partition), type 2 a GroupMetadataKey (group);
other types (KIP-848 consumer groups, share groups) are skipped on replay. A record value is an int16
version followed by the value struct; a null value is a tombstone. Kafka 4.3 and 4.4 write
OffsetCommitValue v4 (topic id as tagged field 0) when it knows the topic id, v3 otherwise, and v1
when the commit carries an expire timestamp (OffsetCommit v2-4 retention time); GroupMetadataValue v3.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

# The shard rule lives with the three coordinators' common parts; re-exported for group ids.
from kbroker.coordinator.partitioning import java_string_hash, partition_for  # noqa: F401
from kbroker.protocol.messages.group_metadata_key import GroupMetadataKey
from kbroker.protocol.messages.group_metadata_value import GroupMetadataValue
from kbroker.protocol.messages.offset_commit_key import OffsetCommitKey
from kbroker.protocol.messages.offset_commit_value import OffsetCommitValue
from kbroker.protocol.primitives import ZERO_UUID

_INT16 = struct.Struct(">h")

OFFSET_COMMIT_TYPE = 1
LEGACY_OFFSET_COMMIT_TYPE = 0
GROUP_METADATA_TYPE = 2
GROUP_METADATA_VERSION = 3


@dataclass(slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1
    topic_id: uuid.UUID = ZERO_UUID
    record_offset: int = -1  # where the commit sits in __consumer_offsets


# --- encoding ----------------------------------------------------------------------------------

def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    key = OffsetCommitKey(group=group, topic=topic, partition=partition)
    return _INT16.pack(OFFSET_COMMIT_TYPE) + key.to_bytes(0)


def offset_commit_value(committed: CommittedOffset) -> bytes:
    if committed.expire_timestamp >= 0:
        version = 1
    elif committed.topic_id != ZERO_UUID:
        version = 4
    else:
        version = 3
    value = OffsetCommitValue(offset=committed.offset, leader_epoch=committed.leader_epoch,
                              metadata=committed.metadata,
                              commit_timestamp=committed.commit_timestamp,
                              expire_timestamp=committed.expire_timestamp,
                              topic_id=committed.topic_id if version == 4 else ZERO_UUID)
    return _INT16.pack(version) + value.to_bytes(version)


def group_metadata_tombstone(group: str) -> tuple[bytes, None]:
    """The record that deletes a classic group (its offsets stay)."""
    return group_metadata_key(group), None


def group_metadata_key(group: str) -> bytes:
    return _INT16.pack(GROUP_METADATA_TYPE) + GroupMetadataKey(group=group).to_bytes(0)


def group_metadata_value(value: GroupMetadataValue) -> bytes:
    return _INT16.pack(GROUP_METADATA_VERSION) + value.to_bytes(GROUP_METADATA_VERSION)


# --- decoding ----------------------------------------------------------------------------------

def decode_key(key: bytes):
    """``(record type, key struct)``; the struct is None for types we do not replay."""
    view = memoryview(key)
    (record_type,) = _INT16.unpack_from(view, 0)
    if record_type in (LEGACY_OFFSET_COMMIT_TYPE, OFFSET_COMMIT_TYPE):
        return OFFSET_COMMIT_TYPE, OffsetCommitKey.decode(view[2:], 0)
    if record_type == GROUP_METADATA_TYPE:
        return GROUP_METADATA_TYPE, GroupMetadataKey.decode(view[2:], 0)
    return record_type, None


def decode_offset_commit_value(value: bytes, record_offset: int) -> CommittedOffset:
    view = memoryview(value)
    (version,) = _INT16.unpack_from(view, 0)
    v = OffsetCommitValue.decode(view[2:], min(version, OffsetCommitValue.VALID_VERSIONS[1]))
    return CommittedOffset(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp,
                           v.expire_timestamp, v.topic_id, record_offset)


def decode_group_metadata_value(value: bytes) -> GroupMetadataValue:
    view = memoryview(value)
    (version,) = _INT16.unpack_from(view, 0)
    return GroupMetadataValue.decode(view[2:], min(version, GroupMetadataValue.VALID_VERSIONS[1]))
