"""Replay of the share-group records into a shard's share groups (pure: no timers, futures or
clock). A pending initialization is stamped with the time of its record, which the runtime passes:
the write's time, or the batch's timestamp when a shard loads (Kafka stamps it with the time of
replay, so a load restarts every pending initialization's retry interval; here it runs on from
when the initialization began).

A record for a group not known yet creates it (tombstones for unknown groups are ignored); the
tombstone of its ShareGroupMetadata record removes it.
"""

from __future__ import annotations

from dataclasses import replace

from kbroker.coordinator.group.modern import group_to_replay
from kbroker.coordinator.group.share import records as rec
from kbroker.coordinator.group.share.group import INITIAL_EPOCH, ShareGroup, TopicInit
from kbroker.coordinator.group.share.member import ShareGroupMember, partitions


def replay(shard, record_type: int, key_view: memoryview, value: bytes | None) -> str:
    """Apply one record to the shard's groups; returns the group id."""
    key = rec.decode_key(record_type, key_view)
    group_id = key.group_id
    group = group_to_replay(shard, ShareGroup, group_id, value)
    if group is None:
        return group_id
    v = rec.decode_value(record_type, value) if value is not None else None
    if record_type == rec.GROUP_METADATA:
        if v is None:
            del shard.groups[group_id]
        else:
            group.group_epoch, group.metadata_hash = v.epoch, v.metadata_hash
    elif record_type == rec.MEMBER_METADATA:
        if v is None:
            group.members.pop(key.member_id, None)
        else:
            old = group.members.get(key.member_id) or ShareGroupMember(key.member_id)
            group.members[key.member_id] = replace(
                old, rack_id=v.rack_id or None, client_id=v.client_id,
                client_host=v.client_host,
                subscribed=tuple(sorted(v.subscribed_topic_names or ())))
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
            group.target[key.member_id] = partitions(rec.partitions_of(v.topic_partitions))
    elif record_type == rec.CURRENT_ASSIGNMENT:
        old = group.members.get(key.member_id)
        if v is None:
            if old is not None:
                group.members[key.member_id] = replace(old, member_epoch=-1,
                                                       previous_member_epoch=-1,
                                                       assigned=partitions({}))
        else:
            old = old or ShareGroupMember(key.member_id)
            group.members[key.member_id] = replace(
                old, member_epoch=v.member_epoch, previous_member_epoch=v.previous_member_epoch,
                state=v.state, assigned=partitions(rec.partitions_of(v.assigned_partitions)))
    elif record_type == rec.STATE_PARTITION_METADATA:
        now = shard.replay_time_ms
        if v is None:
            group.initializing, group.initialized, group.deleting = {}, {}, {}
            group.has_state_metadata = False
        else:
            group.has_state_metadata = True
            group.initializing = {t.topic_id: TopicInit(t.topic_name, frozenset(t.partitions), now)
                                  for t in v.initializing_topics or ()}
            group.initialized = {t.topic_id: TopicInit(t.topic_name, frozenset(t.partitions), now)
                                 for t in v.initialized_topics or ()}
            group.deleting = {t.topic_id: t.topic_name for t in v.deleting_topics or ()}
    return group_id
