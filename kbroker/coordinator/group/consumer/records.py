"""The consumer-group records of ``__consumer_offsets``, in Kafka's formats (record types 3-8 and
16; keys version 0, values version 0, flexible). A key is the int16 record type followed by the
key struct; a value the int16 version followed by the value struct; None is a tombstone.

What Kafka 4.4 writes, and so do we: ConsumerGroupMetadata (group epoch and the KIP-1101 metadata
hash, which replaced ConsumerGroupPartitionMetadata: that record is only ever tombstoned, when a
group written by an older Kafka still has one), ConsumerGroupMemberMetadata (a member's
subscription), ConsumerGroupTargetAssignmentMember / ...Metadata (the target assignment and its
epoch and timestamp, KIP-1263), ConsumerGroupCurrentMemberAssignment (a member's epochs, state,
owned partitions with their KIP-1251 assignment epochs, and partitions pending revocation), and
ConsumerGroupRegularExpression (what a subscribed regex resolved to).
"""

from __future__ import annotations

import struct

from kbroker.coordinator.group.consumer.member import ClassicMetadata, ConsumerGroupMember
from kbroker.protocol.messages.consumer_group_current_member_assignment_key import \
    ConsumerGroupCurrentMemberAssignmentKey
from kbroker.protocol.messages.consumer_group_current_member_assignment_value import \
    ConsumerGroupCurrentMemberAssignmentValue
from kbroker.protocol.messages.consumer_group_member_metadata_key import \
    ConsumerGroupMemberMetadataKey
from kbroker.protocol.messages.consumer_group_member_metadata_value import \
    ConsumerGroupMemberMetadataValue
from kbroker.protocol.messages.consumer_group_metadata_key import ConsumerGroupMetadataKey
from kbroker.protocol.messages.consumer_group_metadata_value import ConsumerGroupMetadataValue
from kbroker.protocol.messages.consumer_group_partition_metadata_key import \
    ConsumerGroupPartitionMetadataKey
from kbroker.protocol.messages.consumer_group_partition_metadata_value import \
    ConsumerGroupPartitionMetadataValue
from kbroker.protocol.messages.consumer_group_regular_expression_key import \
    ConsumerGroupRegularExpressionKey
from kbroker.protocol.messages.consumer_group_regular_expression_value import \
    ConsumerGroupRegularExpressionValue
from kbroker.protocol.messages.consumer_group_target_assignment_member_key import \
    ConsumerGroupTargetAssignmentMemberKey
from kbroker.protocol.messages.consumer_group_target_assignment_member_value import \
    ConsumerGroupTargetAssignmentMemberValue
from kbroker.protocol.messages.consumer_group_target_assignment_metadata_key import \
    ConsumerGroupTargetAssignmentMetadataKey
from kbroker.protocol.messages.consumer_group_target_assignment_metadata_value import \
    ConsumerGroupTargetAssignmentMetadataValue

_INT16 = struct.Struct(">h")

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_METADATA = 6
TARGET_MEMBER = 7
CURRENT_ASSIGNMENT = 8
REGULAR_EXPRESSION = 16

KEYS = {
    GROUP_METADATA: ConsumerGroupMetadataKey,
    PARTITION_METADATA: ConsumerGroupPartitionMetadataKey,
    MEMBER_METADATA: ConsumerGroupMemberMetadataKey,
    TARGET_METADATA: ConsumerGroupTargetAssignmentMetadataKey,
    TARGET_MEMBER: ConsumerGroupTargetAssignmentMemberKey,
    CURRENT_ASSIGNMENT: ConsumerGroupCurrentMemberAssignmentKey,
    REGULAR_EXPRESSION: ConsumerGroupRegularExpressionKey,
}
VALUES = {
    GROUP_METADATA: ConsumerGroupMetadataValue,
    PARTITION_METADATA: ConsumerGroupPartitionMetadataValue,
    MEMBER_METADATA: ConsumerGroupMemberMetadataValue,
    TARGET_METADATA: ConsumerGroupTargetAssignmentMetadataValue,
    TARGET_MEMBER: ConsumerGroupTargetAssignmentMemberValue,
    CURRENT_ASSIGNMENT: ConsumerGroupCurrentMemberAssignmentValue,
    REGULAR_EXPRESSION: ConsumerGroupRegularExpressionValue,
}


def _key(record_type: int, key) -> bytes:
    return _INT16.pack(record_type) + key.to_bytes(0)


def _value(value) -> bytes:
    return _INT16.pack(0) + value.to_bytes(0)


def decode_key(record_type: int, view: memoryview):
    return KEYS[record_type].decode(view, 0)


def decode_value(record_type: int, value: bytes):
    view = memoryview(value)
    (version,) = _INT16.unpack_from(view, 0)
    cls = VALUES[record_type]
    return cls.decode(view[2:], min(version, cls.VALID_VERSIONS[1]))


# --- the group -----------------------------------------------------------------------------------

def group_epoch(group_id: str, epoch: int, metadata_hash: int) -> tuple[bytes, bytes]:
    return (_key(GROUP_METADATA, ConsumerGroupMetadataKey(group_id=group_id)),
            _value(ConsumerGroupMetadataValue(epoch=epoch, metadata_hash=metadata_hash)))


def group_epoch_tombstone(group_id: str) -> tuple[bytes, None]:
    return _key(GROUP_METADATA, ConsumerGroupMetadataKey(group_id=group_id)), None


def partition_metadata_tombstone(group_id: str) -> tuple[bytes, None]:
    return _key(PARTITION_METADATA, ConsumerGroupPartitionMetadataKey(group_id=group_id)), None


# --- members -------------------------------------------------------------------------------------

def member_subscription(group_id: str, m: ConsumerGroupMember) -> tuple[bytes, bytes]:
    V = ConsumerGroupMemberMetadataValue
    classic = None
    if m.classic is not None:
        classic = V.ClassicMemberMetadata(
            session_timeout_ms=m.classic.session_timeout_ms,
            supported_protocols=[V.ClassicProtocol(name=n, metadata=bytes(md))
                                 for n, md in m.classic.protocols])
    value = V(instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id,
              client_host=m.client_host, subscribed_topic_names=sorted(m.subscribed_topic_names),
              subscribed_topic_regex=m.subscribed_topic_regex,
              rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor,
              classic_member_metadata=classic)
    return (_key(MEMBER_METADATA, ConsumerGroupMemberMetadataKey(group_id=group_id,
                                                                  member_id=m.member_id)),
            _value(value))


def member_subscription_tombstone(group_id: str, member_id: str) -> tuple[bytes, None]:
    return _key(MEMBER_METADATA, ConsumerGroupMemberMetadataKey(group_id=group_id,
                                                                member_id=member_id)), None


def classic_metadata(value) -> ClassicMetadata | None:
    classic = value.classic_member_metadata
    if classic is None:
        return None
    return ClassicMetadata(classic.session_timeout_ms,
                           tuple((p.name, bytes(p.metadata)) for p in classic.supported_protocols))


def _topic_partitions(cls, assignment, with_epochs: bool):
    out = []
    for topic_id in sorted(assignment, key=lambda t: t.bytes):
        parts = assignment[topic_id]
        partitions = sorted(parts)
        out.append(cls(topic_id=topic_id, partitions=partitions,
                       assignment_epochs=[parts[p] for p in partitions] if with_epochs else None)
                   if with_epochs else cls(topic_id=topic_id, partitions=partitions))
    return out


def current_assignment(group_id: str, m: ConsumerGroupMember) -> tuple[bytes, bytes]:
    V = ConsumerGroupCurrentMemberAssignmentValue
    value = V(member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch,
              state=int(m.state),
              assigned_partitions=_topic_partitions(V.TopicPartitions, m.assigned, True),
              partitions_pending_revocation=_topic_partitions(V.TopicPartitions,
                                                              m.pending_revocation, True))
    return (_key(CURRENT_ASSIGNMENT, ConsumerGroupCurrentMemberAssignmentKey(
        group_id=group_id, member_id=m.member_id)), _value(value))


def current_assignment_tombstone(group_id: str, member_id: str) -> tuple[bytes, None]:
    return _key(CURRENT_ASSIGNMENT, ConsumerGroupCurrentMemberAssignmentKey(
        group_id=group_id, member_id=member_id)), None


def epochs_of(topic_partitions, default_epoch: int) -> dict:
    """{topic: {partition: epoch}} from a record; records without (or with mismatched)
    assignment epochs get the member epoch (at least 0), as Kafka reads them."""
    default_epoch = max(default_epoch, 0)
    out = {}
    for tp in topic_partitions:
        epochs = tp.assignment_epochs
        if epochs is not None and len(epochs) == len(tp.partitions):
            out[tp.topic_id] = dict(zip(tp.partitions, epochs))
        else:
            out[tp.topic_id] = {p: default_epoch for p in tp.partitions}
    return out


# --- target assignment ---------------------------------------------------------------------------

def target_member(group_id: str, member_id: str, partitions: dict) -> tuple[bytes, bytes]:
    V = ConsumerGroupTargetAssignmentMemberValue
    topics = [V.TopicPartition(topic_id=t, partitions=sorted(partitions[t]))
              for t in sorted(partitions, key=lambda t: t.bytes) if partitions[t]]
    return (_key(TARGET_MEMBER, ConsumerGroupTargetAssignmentMemberKey(group_id=group_id,
                                                                       member_id=member_id)),
            _value(V(topic_partitions=topics)))


def target_member_tombstone(group_id: str, member_id: str) -> tuple[bytes, None]:
    return _key(TARGET_MEMBER, ConsumerGroupTargetAssignmentMemberKey(group_id=group_id,
                                                                      member_id=member_id)), None


def target_metadata(group_id: str, epoch: int, timestamp: int) -> tuple[bytes, bytes]:
    return (_key(TARGET_METADATA, ConsumerGroupTargetAssignmentMetadataKey(group_id=group_id)),
            _value(ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=epoch,
                                                              assignment_timestamp=timestamp)))


def target_metadata_tombstone(group_id: str) -> tuple[bytes, None]:
    return _key(TARGET_METADATA, ConsumerGroupTargetAssignmentMetadataKey(group_id=group_id)), None


# --- regular expressions -------------------------------------------------------------------------

def regex(group_id: str, pattern: str, topics, version: int, timestamp: int):
    return (_key(REGULAR_EXPRESSION, ConsumerGroupRegularExpressionKey(
        group_id=group_id, regular_expression=pattern)),
        _value(ConsumerGroupRegularExpressionValue(topics=sorted(topics), version=version,
                                                   timestamp=timestamp)))


def regex_tombstone(group_id: str, pattern: str) -> tuple[bytes, None]:
    return _key(REGULAR_EXPRESSION, ConsumerGroupRegularExpressionKey(
        group_id=group_id, regular_expression=pattern)), None


# --- a whole group -------------------------------------------------------------------------------

def group_records(group) -> list:
    """The records that write ``group`` whole (a classic group converted to a consumer group):
    subscriptions, epoch, target assignment, its metadata, current assignments."""
    gid = group.group_id
    records = [member_subscription(gid, m) for m in group.members.values()]
    records.append(group_epoch(gid, group.group_epoch, group.metadata_hash))
    records += [target_member(gid, mid, group.target_of(mid)) for mid in group.members]
    records.append(target_metadata(gid, group.assignment_epoch, group.assignment_timestamp))
    records += [current_assignment(gid, m) for m in group.members.values()]
    return records


def group_tombstones(group, replaced: tuple[str, str] | None = None) -> list:
    """The tombstones that delete ``group`` (Kafka's order). ``replaced`` (old id, new id): a
    static member replaced in this same batch is deleted under its new id."""
    gid = group.group_id

    def ids():
        for mid in group.members:
            yield replaced[1] if replaced is not None and mid == replaced[0] else mid

    records = [current_assignment_tombstone(gid, mid) for mid in ids()]
    records += [target_member_tombstone(gid, mid) for mid in ids()]
    records.append(target_metadata_tombstone(gid))
    records += [member_subscription_tombstone(gid, mid) for mid in ids()]
    records += [regex_tombstone(gid, r) for r in group.resolved]
    records.append(partition_metadata_tombstone(gid))
    records.append(group_epoch_tombstone(gid))
    return records
