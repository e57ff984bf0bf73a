"""Replay of the streams-group records into a shard's streams groups (pure: no clock, timers or
futures). Loading a shard and applying an operation's own records go through here alike.

A record for a group not known yet creates it (tombstones for unknown groups are ignored); the
tombstone of its StreamsGroupMetadata record removes it.
"""

from __future__ import annotations

from dataclasses import replace

from kbroker.coordinator.group.modern import group_to_replay
from kbroker.coordinator.group.streams import records as rec
from kbroker.coordinator.group.streams.group import INITIAL_EPOCH, StreamsGroup
from kbroker.coordinator.group.streams.member import (NO_TASKS, AssignedTasks, Endpoint,
                                                      MemberState, StreamsGroupMember, TaskTuple,
                                                      tasks, tasks_with_epochs)
from kbroker.coordinator.group.streams.topology import StreamsTopology


def replay(shard, record_type: int, key_view: memoryview, value: bytes | None) -> str:
    """Apply one record to the shard's groups; returns the group id."""
    key = rec.decode_key(record_type, key_view)
    group_id = key.group_id
    group = group_to_replay(shard, StreamsGroup, group_id, value)
    if group is None:
        return group_id
    v = rec.decode_value(record_type, value) if value is not None else None
    if record_type == rec.GROUP_METADATA:
        if v is None:
            del shard.groups[group_id]
        else:
            group.group_epoch, group.metadata_hash = v.epoch, v.metadata_hash
            group.validated_topology_epoch = v.validated_topology_epoch
            group.last_assignment_configs = {c.key: c.value
                                             for c in v.last_assignment_configs or ()}
    elif record_type == rec.TOPOLOGY:
        group.topology = None if v is None else StreamsTopology.from_record(v)
        group.configured = None
    elif record_type == rec.MEMBER_METADATA:
        if v is None:
            group.members.pop(key.member_id, None)
        else:
            old = group.members.get(key.member_id) or StreamsGroupMember(key.member_id)
            endpoint = None
            if v.user_endpoint is not None:
                endpoint = Endpoint(v.user_endpoint.host, v.user_endpoint.port)
            group.members[key.member_id] = replace(
                old, instance_id=v.instance_id, rack_id=v.rack_id, client_id=v.client_id,
                client_host=v.client_host, rebalance_timeout_ms=v.rebalance_timeout_ms,
                topology_epoch=v.topology_epoch, process_id=v.process_id, user_endpoint=endpoint,
                client_tags={t.key: t.value for t in v.client_tags or ()})
    elif record_type == rec.TARGET_METADATA:
        if v is None:
            group.assignment_epoch, group.assignment_timestamp = INITIAL_EPOCH, 0
        else:
            group.assignment_epoch = v.assignment_epoch
            group.assignment_timestamp = v.assignment_timestamp
    elif record_type == rec.TARGET_MEMBER:
        if v is None:
            group.target.pop(key.member_id, None)
        else:
            group.target[key.member_id] = TaskTuple.of(rec.tasks_of(v.active_tasks),
                                                       rec.tasks_of(v.standby_tasks),
                                                       rec.tasks_of(v.warmup_tasks))
    elif record_type == rec.CURRENT_ASSIGNMENT:
        old = group.members.get(key.member_id)
        if v is None:
            if old is not None:
                group.members[key.member_id] = replace(
                    old, member_epoch=-1, previous_member_epoch=-1, assigned=NO_TASKS,
                    pending_revocation=NO_TASKS)
        else:
            old = old or StreamsGroupMember(key.member_id)
            group.members[key.member_id] = replace(
                old, member_epoch=v.member_epoch, previous_member_epoch=v.previous_member_epoch,
                state=MemberState.of(v.state),
                assigned=AssignedTasks(
                    tasks_with_epochs(rec.active_epochs_of(v.active_tasks, v.member_epoch)),
                    tasks(rec.tasks_of(v.standby_tasks)), tasks(rec.tasks_of(v.warmup_tasks))),
                pending_revocation=AssignedTasks(
                    tasks_with_epochs(rec.active_epochs_of(v.active_tasks_pending_revocation,
                                                           v.member_epoch)),
                    tasks(rec.tasks_of(v.standby_tasks_pending_revocation)),
                    tasks(rec.tasks_of(v.warmup_tasks_pending_revocation))))
    return group_id
