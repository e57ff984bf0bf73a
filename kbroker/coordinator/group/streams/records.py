"""The streams-group records of ``__consumer_offsets``, in Kafka's formats (record types 17 and
19-23; keys and values version 0, flexible). A key is the int16 record type then the key struct;
a value the int16 version then the value struct; None is a tombstone.

StreamsGroupMetadata (group epoch, KIP-1101 metadata hash, validated topology epoch, the
assignment configs of the last target assignment), StreamsGroupTopology (the topology the first
member sent), StreamsGroupMemberMetadata (a member's process, endpoint, client tags, topology
epoch), StreamsGroupTargetAssignmentMember / ...Metadata (the target tasks, its epoch and
timestamp) and StreamsGroupCurrentMemberAssignment (a member's epochs, state and tasks, active
ones with their assignment epochs). Type 18 (StreamsGroupPartitionMetadata) is gone from Kafka 4.4.
"""

from __future__ import annotations

from kbroker.coordinator.group.modern import decode_record_value, record_key, record_value
from kbroker.coordinator.group.streams.member import StreamsGroupMember
from kbroker.protocol.messages.streams_group_current_member_assignment_key import \
    StreamsGroupCurrentMemberAssignmentKey as CurrentKey
from kbroker.protocol.messages.streams_group_current_member_assignment_value import \
    StreamsGroupCurrentMemberAssignmentValue as CurrentValue
from kbroker.protocol.messages.streams_group_member_metadata_key import \
    StreamsGroupMemberMetadataKey as MemberKey
from kbroker.protocol.messages.streams_group_member_metadata_value import \
    StreamsGroupMemberMetadataValue as MemberValue
from kbroker.protocol.messages.streams_group_metadata_key import \
    StreamsGroupMetadataKey as MetadataKey
from kbroker.protocol.messages.streams_group_metadata_value import \
    StreamsGroupMetadataValue as MetadataValue
from kbroker.protocol.messages.streams_group_target_assignment_member_key import \
    StreamsGroupTargetAssignmentMemberKey as TargetMemberKey
from kbroker.protocol.messages.streams_group_target_assignment_member_value import \
    StreamsGroupTargetAssignmentMemberValue as TargetMemberValue
from kbroker.protocol.messages.streams_group_target_assignment_metadata_key import \
    StreamsGroupTargetAssignmentMetadataKey as TargetMetadataKey
from kbroker.protocol.messages.streams_group_target_assignment_metadata_value import \
    StreamsGroupTargetAssignmentMetadataValue as TargetMetadataValue
from kbroker.protocol.messages.streams_group_topology_key import \
    StreamsGroupTopologyKey as TopologyKey
from kbroker.protocol.messages.streams_group_topology_value import \
    StreamsGroupTopologyValue as TopologyValue

GROUP_METADATA = 17
MEMBER_METADATA = 19
TARGET_METADATA = 20
TARGET_MEMBER = 21
CURRENT_ASSIGNMENT = 22
TOPOLOGY = 23

KEYS = {GROUP_METADATA: MetadataKey, MEMBER_METADATA: MemberKey,
        TARGET_METADATA: TargetMetadataKey, TARGET_MEMBER: TargetMemberKey,
        CURRENT_ASSIGNMENT: CurrentKey, TOPOLOGY: TopologyKey}
VALUES = {GROUP_METADATA: MetadataValue, MEMBER_METADATA: MemberValue,
          TARGET_METADATA: TargetMetadataValue, TARGET_MEMBER: TargetMemberValue,
          CURRENT_ASSIGNMENT: CurrentValue, TOPOLOGY: TopologyValue}


def decode_key(record_type: int, view: memoryview):
    return KEYS[record_type].decode(view, 0)


def decode_value(record_type: int, value: bytes):
    return decode_record_value(VALUES[record_type], value)


# --- the group -------------------------------------------------------------------------------------

def group_epoch(group_id: str, epoch: int, metadata_hash: int, validated_topology_epoch: int,
                assignment_configs: dict) -> tuple[bytes, bytes]:
    value = MetadataValue(
        epoch=epoch, metadata_hash=metadata_hash,
        validated_topology_epoch=validated_topology_epoch,
        last_assignment_configs=[MetadataValue.LastAssignmentConfig(key=k, value=v)
                                 for k, v in sorted(assignment_configs.items())])
    return record_key(GROUP_METADATA, MetadataKey(group_id=group_id)), record_value(value)


def group_epoch_tombstone(group_id: str):
    return record_key(GROUP_METADATA, MetadataKey(group_id=group_id)), None


def topology(group_id: str, value: TopologyValue):
    return record_key(TOPOLOGY, TopologyKey(group_id=group_id)), record_value(value)


def topology_tombstone(group_id: str):
    return record_key(TOPOLOGY, TopologyKey(group_id=group_id)), None


# --- members ---------------------------------------------------------------------------------------

def member_metadata(group_id: str, m: StreamsGroupMember):
    endpoint = None
    if m.user_endpoint is not None:
        endpoint = MemberValue.Endpoint(host=m.user_endpoint.host, port=m.user_endpoint.port)
    value = MemberValue(instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id,
                        client_host=m.client_host, rebalance_timeout_ms=m.rebalance_timeout_ms,
                        topology_epoch=m.topology_epoch, process_id=m.process_id,
                        user_endpoint=endpoint,
                        client_tags=[MemberValue.KeyValue(key=k, value=v)
                                     for k, v in sorted(m.client_tags.items())])
    return (record_key(MEMBER_METADATA, MemberKey(group_id=group_id, member_id=m.member_id)),
            record_value(value))


def member_metadata_tombstone(group_id: str, member_id: str):
    return record_key(MEMBER_METADATA, MemberKey(group_id=group_id, member_id=member_id)), None


def _task_ids(cls, tasks) -> list:
    return [cls(subtopology_id=s, partitions=sorted(tasks[s])) for s in sorted(tasks) if tasks[s]]


def _task_ids_with_epochs(tasks) -> list:
    out = []
    for s in sorted(tasks):
        partitions = sorted(tasks[s])
        if partitions:
            out.append(CurrentValue.TaskIds(subtopology_id=s, partitions=partitions,
                                            assignment_epochs=[tasks[s][p] for p in partitions]))
    return out


def current_assignment(group_id: str, m: StreamsGroupMember):
    T = CurrentValue.TaskIds
    a, r = m.assigned, m.pending_revocation
    value = CurrentValue(
        member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch,
        state=int(m.state), active_tasks=_task_ids_with_epochs(a.active),
        standby_tasks=_task_ids(T, a.standby), warmup_tasks=_task_ids(T, a.warmup),
        active_tasks_pending_revocation=_task_ids_with_epochs(r.active),
        standby_tasks_pending_revocation=_task_ids(T, r.standby),
        warmup_tasks_pending_revocation=_task_ids(T, r.warmup))
    return (record_key(CURRENT_ASSIGNMENT, CurrentKey(group_id=group_id, member_id=m.member_id)),
            record_value(value))


def current_assignment_tombstone(group_id: str, member_id: str):
    return record_key(CURRENT_ASSIGNMENT, CurrentKey(group_id=group_id, member_id=member_id)), None


def active_epochs_of(task_ids, default_epoch: int) -> dict:
    """{subtopology: {partition: epoch}}; a record without (or with mismatched) assignment
    epochs gives its tasks the member epoch (at least 0), as Kafka reads them."""
    default_epoch = max(default_epoch, 0)
    out = {}
    for t in task_ids:
        epochs = t.assignment_epochs
        if epochs and len(epochs) == len(t.partitions):
            out[t.subtopology_id] = dict(zip(t.partitions, epochs))
        else:
            out[t.subtopology_id] = {p: default_epoch for p in t.partitions}
    return out


def tasks_of(task_ids) -> dict:
    return {t.subtopology_id: set(t.partitions) for t in task_ids}


# --- target assignment -----------------------------------------------------------------------------

def target_member(group_id: str, member_id: str, target) -> tuple[bytes, bytes]:
    T = TargetMemberValue.TaskIds
    value = TargetMemberValue(active_tasks=_task_ids(T, target.active),
                              standby_tasks=_task_ids(T, target.standby),
                              warmup_tasks=_task_ids(T, target.warmup))
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
    records.append(topology_tombstone(gid))
    records.append(group_epoch_tombstone(gid))
    return records
