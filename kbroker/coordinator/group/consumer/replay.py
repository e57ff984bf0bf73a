"""Replay of the consumer-group records into a shard's consumer groups (pure: no clock, timers or
futures). Loading a shard and applying an operation's own records go through here alike.

A record for a group that does not exist yet creates it (except tombstones, which are then
ignored); the group's epoch-record tombstone removes it. Kafka's invariants for a deletion (no
members or target assignment left) hold by construction of the tombstone batches
(:func:`records.group_tombstones`), so they are not re-checked here.
"""

from __future__ import annotations

from dataclasses import replace

from kbroker.coordinator.group.consumer import records as rec
from kbroker.coordinator.group.consumer.group import ConsumerGroup, ResolvedRegex
from kbroker.coordinator.group.consumer.member import (EMPTY, LEAVE_EPOCH, ConsumerGroupMember,
                                                       MemberState, freeze)
from kbroker.coordinator.group.modern import group_to_replay


def replay(shard, record_type: int, key_view: memoryview, value: bytes | None) -> str:
    """Apply one record to the shard's groups; returns the group id."""
    key = rec.decode_key(record_type, key_view)
    group_id = key.group_id
    group = group_to_replay(shard, ConsumerGroup, group_id, value)
    if group is None:
        return group_id
    v = rec.decode_value(record_type, value) if value is not None else None
    if record_type == rec.GROUP_METADATA:
        if v is None:
            del shard.groups[group_id]
        else:
            group.group_epoch, group.metadata_hash = v.epoch, v.metadata_hash
    elif record_type == rec.PARTITION_METADATA:
        group.has_partition_metadata_record = v is not None
    elif record_type == rec.MEMBER_METADATA:
        if v is None:
            group.remove_member(key.member_id)
        else:
            old = group.members.get(key.member_id) or ConsumerGroupMember(key.member_id)
            group.update_member(replace(
                old, instance_id=v.instance_id, rack_id=v.rack_id, client_id=v.client_id,
                client_host=v.client_host, subscribed_topic_names=frozenset(
                    v.subscribed_topic_names), subscribed_topic_regex=v.subscribed_topic_regex
                or "", rebalance_timeout_ms=v.rebalance_timeout_ms,
                server_assignor=v.server_assignor, classic=rec.classic_metadata(v)))
    elif record_type == rec.TARGET_METADATA:
        if v is None:
            group.assignment_epoch, group.assignment_timestamp = -1, 0
        else:
            group.assignment_epoch = v.assignment_epoch
            group.assignment_timestamp = v.assignment_timestamp
    elif record_type == rec.TARGET_MEMBER:
        if v is None:
            group.remove_target(key.member_id)
        else:
            group.update_target(key.member_id, {tp.topic_id: frozenset(tp.partitions)
                                                for tp in v.topic_partitions if tp.partitions})
    elif record_type == rec.CURRENT_ASSIGNMENT:
        old = group.members.get(key.member_id)
        if v is None:
            if old is not None:
                group.update_member(replace(old, member_epoch=LEAVE_EPOCH,
                                            previous_member_epoch=LEAVE_EPOCH,
                                            assigned=EMPTY, pending_revocation=EMPTY))
        else:
            old = old or ConsumerGroupMember(key.member_id)
            group.update_member(replace(
                old, member_epoch=v.member_epoch, previous_member_epoch=v.previous_member_epoch,
                state=MemberState.of(v.state),
                assigned=freeze(rec.epochs_of(v.assigned_partitions, v.member_epoch)),
                pending_revocation=freeze(rec.epochs_of(v.partitions_pending_revocation,
                                                        v.member_epoch))))
    elif record_type == rec.REGULAR_EXPRESSION:
        if v is None:
            group.update_resolved(key.regular_expression, None)
        else:
            group.update_resolved(key.regular_expression,
                                  ResolvedRegex(frozenset(v.topics), v.version, v.timestamp))
    return group_id
