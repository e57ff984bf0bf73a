"""The share-group records of ``__consumer_offsets``, in Kafka's formats (record types 10-15; keys
and values version 0). A key is the int16 record type then the key struct; a value the int16
version then the value struct; None is a tombstone.

ShareGroupMemberMetadata (10: rack, client, subscription), ShareGroupMetadata (11: group epoch,
metadata hash), ShareGroupTargetAssignmentMetadata (12) / ...Member (13), ShareGroupCurrentMember
Assignment (14: epochs and partitions) and ShareGroupStatePartitionMetadata (15: which topics'
share partitions are initializing, initialized or being deleted).
"""

from __future__ import annotations

from kbroker.coordinator.group.modern import decode_record_value, record_key, record_value
from kbroker.protocol.messages.share_group_current_member_assignment_key import \
    ShareGroupCurrentMemberAssignmentKey as CurrentKey
from kbroker.protocol.messages.share_group_current_member_assignment_value import \
    ShareGroupCurrentMemberAssignmentValue as CurrentValue
from kbroker.protocol.messages.share_group_member_metadata_key import \
    ShareGroupMemberMetadataKey as MemberKey
from kbroker.protocol.messages.share_group_member_metadata_value import \
    ShareGroupMemberMetadataValue as MemberValue
from kbroker.protocol.messages.share_group_metadata_key import ShareGroupMetadataKey as MetadataKey
from kbroker.protocol.messages.share_group_metadata_value import \
    ShareGroupMetadataValue as MetadataValue
from kbroker.protocol.messages.share_group_state_partition_metadata_key import \
    ShareGroupStatePartitionMetadataKey as StateKey
from kbroker.protocol.messages.share_group_state_partition_metadata_value import \
    ShareGroupStatePartitionMetadataValue as StateValue
from kbroker.protocol.messages.share_group_target_assignment_member_key import \
    ShareGroupTargetAssignmentMemberKey as TargetMemberKey
from kbroker.protocol.messages.share_group_target_assignment_member_value import \
    ShareGroupTargetAssignmentMemberValue as TargetMemberValue
from kbroker.protocol.messages.share_group_target_assignment_metadata_key import \
    ShareGroupTargetAssignmentMetadataKey as TargetMetadataKey
from kbroker.protocol.messages.share_group_target_assignment_metadata_value import \
    ShareGroupTargetAssignmentMetadataValue as TargetMetadataValue

MEMBER_METADATA = 10
GROUP_METADATA = 11
TARGET_METADATA = 12
TARGET_MEMBER = 13
CURRENT_ASSIGNMENT = 14
STATE_PARTITION_METADATA = 15

KEYS = {MEMBER_METADATA: MemberKey, GROUP_METADATA: MetadataKey,
        TARGET_METADATA: TargetMetadataKey, TARGET_MEMBER: TargetMemberKey,
        CURRENT_ASSIGNMENT: CurrentKey, STATE_PARTITION_METADATA: StateKey}
VALUES = {MEMBER_METADATA: MemberValue, GROUP_METADATA: MetadataValue,
          TARGET_METADATA: TargetMetadataValue, TARGET_MEMBER: TargetMemberValue,
          CURRENT_ASSIGNMENT: CurrentValue, STATE_PARTITION_METADATA: StateValue}


def decode_key(record_type: int, view: memoryview):
    return KEYS[record_type].decode(view, 0)


def decode_value(record_type: int, value: bytes):
    return decode_record_value(VALUES[record_type], value)


def _sorted_partitions(cls, assignment) -> list:
    return [cls(topic_id=t, partitions=sorted(p)) for t, p in
            sorted(assignment.items(), key=lambda kv: str(kv[0])) if p]


def partitions_of(topic_partitions) -> dict:
    return {t.topic_id: frozenset(t.partitions) for t in topic_partitions or ()}


# --- the group -------------------------------------------------------------------------------------

def group_epoch(group_id: str, epoch: int, metadata_hash: int):
    return (record_key(GROUP_METADATA, MetadataKey(group_id=group_id)),
            record_value(MetadataValue(epoch=epoch, metadata_hash=metadata_hash)))


def group_epoch_tombstone(group_id: str):
    return record_key(GROUP_METADATA, MetadataKey(group_id=group_id)), None


# --- members ---------------------------------------------------------------------------------------

def member_metadata(group_id: str, m):
    value = MemberValue(rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
                        subscribed_topic_names=list(m.subscribed))
    return (record_key(MEMBER_METADATA, MemberKey(group_id=group_id, member_id=m.member_id)),
            record_value(value))


def member_metadata_tombstone(group_id: str, member_id: str):
    return record_key(MEMBER_METADATA, MemberKey(group_id=group_id, member_id=member_id)), None


def current_assignment(group_id: str, m):
    value = CurrentValue(member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch,
                         state=m.state,
                         assigned_partitions=_sorted_partitions(CurrentValue.TopicPartitions,
                                                                m.assigned))
    return (record_key(CURRENT_ASSIGNMENT, CurrentKey(group_id=group_id, member_id=m.member_id)),
            record_value(value))


def current_assignment_tombstone(group_id: str, member_id: str):
    return record_key(CURRENT_ASSIGNMENT, CurrentKey(group_id=group_id, member_id=member_id)), None


# --- target assignment -----------------------------------------------------------------------------

def target_member(group_id: str, member_id: str, assignment):
    value = TargetMemberValue(
        topic_partitions=_sorted_partitions(TargetMemberValue.TopicPartition, assignment))
    return (record_key(TARGET_MEMBER, TargetMemberKey(group_id=group_id, member_id=member_id)),
            record_value(value))


def target_member_tombstone(group_id: str, member_id: str):
    return record_key(TARGET_MEMBER, TargetMemberKey(group_id=group_id, member_id=member_id)), None


def target_metadata(group_id: str, epoch: int, timestamp: int):
    return (record_key(TARGET_METADATA, TargetMetadataKey(group_id=group_id)),
            record_value(TargetMetadataValue(assignment_epoch=epoch,
                                             assignment_timestamp=timestamp)))


def target_metadata_tombstone(group_id: str):
    return record_key(TARGET_METADATA, TargetMetadataKey(group_id=group_id)), None


# --- share-partition initialization state ----------------------------------------------------------

def state_metadata(group_id: str, initializing: dict, initialized: dict, deleting: dict):
    """``initializing``/``initialized``: {topic id: TopicInit}; ``deleting``: {topic id: name}."""
    def infos(entries):
        return [StateValue.TopicPartitionsInfo(topic_id=t, topic_name=e.name,
                                               partitions=sorted(e.partitions))
                for t, e in sorted(entries.items(), key=lambda kv: str(kv[0]))]
    value = StateValue(initializing_topics=infos(initializing),
                       initialized_topics=infos(initialized),
                       deleting_topics=[StateValue.TopicInfo(topic_id=t, topic_name=n) for t, n in
                                        sorted(deleting.items(), key=lambda kv: str(kv[0]))])
    return record_key(STATE_PARTITION_METADATA, StateKey(group_id=group_id)), record_value(value)


def state_metadata_tombstone(group_id: str):
    return record_key(STATE_PARTITION_METADATA, StateKey(group_id=group_id)), None


# --- a member's removal, the whole group's deletion ------------------------------------------------

def remove_member_records(group_id: str, member_id: str) -> list:
    """Kafka's order: current assignment, target, then the member's metadata."""
    return [current_assignment_tombstone(group_id, member_id),
            target_member_tombstone(group_id, member_id),
            member_metadata_tombstone(group_id, member_id)]


def group_tombstones(group) -> list:
    gid = group.group_id
    records = [current_assignment_tombstone(gid, m) for m in group.members]
    records += [target_member_tombstone(gid, m) for m in group.target]
    records.append(target_metadata_tombstone(gid))
    records += [member_metadata_tombstone(gid, m) for m in group.members]
    if group.has_state_metadata:
        records.append(state_metadata_tombstone(gid))
    records.append(group_epoch_tombstone(gid))
    return records
