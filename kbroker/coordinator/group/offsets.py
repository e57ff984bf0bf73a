"""Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete and expiry.

Commits are OffsetCommit records; the offsets map of the shard changes only when they replay.

Validation of a commit (Kafka's ClassicGroup.validateOffsetCommit): a group that does not exist
accepts only standalone commits (generation -1), which create an Empty group; an Empty group
accepts them too; otherwise the member must be known (FENCED_INSTANCE_ID / UNKNOWN_MEMBER_ID),
the generation current (ILLEGAL_GENERATION), and the group not be in CompletingRebalance
(REBALANCE_IN_PROGRESS). Commits during PreparingRebalance are allowed, so members can commit
while revoking partitions.

Expiry (offsets.retention.minutes, Kafka's rule): an Empty group's offsets expire that long after
the group became empty (a group that never used group management: after each commit); a stable
consumer group's offsets of topics nobody subscribes to expire that long after their commit; an
explicit expire timestamp (OffsetCommit v2-4 retention time) wins. An Empty group left with no
offsets is deleted.
"""

from __future__ import annotations

import logging

from kbroker.coordinator.group import records as rec
from kbroker.coordinator.group.shard import GroupShard
from kbroker.coordinator.group.state import GroupState
from kbroker.coordinator.group.sync import validate_member
from kbroker.coordinator.runtime import now_ms
from kbroker.protocol.errors import Errors, KafkaError

log = logging.getLogger("kbroker.coordinator.group")
S = GroupState


def validate_commit(shard: GroupShard, group_id: str, generation_id: int, member_id: str,
                    group_instance_id: str | None) -> None:
    group = shard.group(group_id)
    if group is None:
        if generation_id < 0:
            return
        raise KafkaError(Errors.ILLEGAL_GENERATION)
    if generation_id < 0 and group.is_in(S.EMPTY):
        return
    if generation_id >= 0 or member_id or group_instance_id is not None:
        error = validate_member(group, member_id, group_instance_id)
        if error is not None:
            raise KafkaError(error)
        if generation_id != group.generation:
            raise KafkaError(Errors.ILLEGAL_GENERATION)
    elif not group.is_in(S.EMPTY):
        raise KafkaError(Errors.UNKNOWN_MEMBER_ID)
    if group.is_in(S.COMPLETING_REBALANCE):
        raise KafkaError(Errors.REBALANCE_IN_PROGRESS)
    member = group.members.get(member_id)
    if member is not None:
        shard.schedule_session_expiry(group, member)  # a commit counts as a heartbeat


def commit(shard: GroupShard, group_id: str, offsets: list, expire_timestamp: int = -1) -> list:
    """``offsets``: [(topic, partition, topic_id, offset, leader_epoch, metadata)], already
    validated. Writes them as one batch; returns one error per entry."""
    max_metadata = shard.config.get("offset.metadata.max.bytes")
    now = now_ms()
    records, errors = [], []
    for topic, partition, topic_id, offset, leader_epoch, metadata in offsets:
        metadata = metadata or ""
        if len(metadata.encode("utf-8")) > max_metadata:
            errors.append(Errors.OFFSET_METADATA_TOO_LARGE)
            continue
        committed = rec.CommittedOffset(offset, leader_epoch, metadata, now, expire_timestamp,
                                        topic_id)
        records.append((rec.offset_commit_key(group_id, topic, partition),
                        rec.offset_commit_value(committed)))
        errors.append(Errors.NONE)
    try:
        shard.write(records)
    except KafkaError as exc:
        return [exc.error if e is Errors.NONE else e for e in errors]
    return errors


def fetch(shard: GroupShard, group_id: str, wanted: list | None) -> list:
    """``wanted``: [(topic, [partitions])] or None for all. Returns
    [(topic, partition, CommittedOffset or None)]."""
    committed = shard.offsets.get(group_id, {})
    if wanted is None:
        return [(t, p, c) for (t, p), c in sorted(committed.items())]
    return [(topic, p, committed.get((topic, p))) for topic, partitions in wanted
            for p in partitions]


def delete(shard: GroupShard, group_id: str, wanted: list) -> tuple[Errors, list]:
    """OffsetDelete: ``wanted`` [(topic, partition)]; returns (group error, per-entry errors)."""
    group = shard.group(group_id)
    if group is None:
        return Errors.GROUP_ID_NOT_FOUND, []
    subscribed: set[str] = set()
    if not group.is_in(S.EMPTY):
        topics = group.subscribed_topics()
        if topics is None:
            return Errors.NON_EMPTY_GROUP, []
        subscribed = topics
    committed = shard.offsets.get(group_id, {})
    records, errors = [], []
    for topic, partition in wanted:
        if topic in subscribed:
            errors.append(Errors.GROUP_SUBSCRIBED_TO_TOPIC)
            continue
        errors.append(Errors.NONE)
        if (topic, partition) in committed:
            records.append((rec.offset_commit_key(group_id, topic, partition), None))
    try:
        shard.write(records)
    except KafkaError as exc:
        return exc.error, []
    return Errors.NONE, errors


def expire(shard: GroupShard, retention_ms: int, now: int | None = None) -> int:
    """Write tombstones for expired offsets (and emptied Empty groups); the number expired."""
    now = now_ms() if now is None else now
    expired_total = 0
    for group_id in list(shard.offsets.keys() | shard.groups.keys()):
        group = shard.group(group_id)
        committed = shard.offsets.get(group_id, {})
        records = []
        for (topic, partition), c in committed.items():
            if _expired(group, topic, c, retention_ms, now):
                records.append((rec.offset_commit_key(group_id, topic, partition), None))
        expired = len(records)
        drop_group = group is not None and group.is_in(S.EMPTY) and expired == len(committed)
        if drop_group:
            records.append((rec.group_metadata_key(group_id), None))
        if not records:
            continue
        try:
            shard.write(records)
        except KafkaError as exc:
            log.warning("could not expire offsets of group %s: %s", group_id, exc)
            continue
        expired_total += expired
        log.info("expired %d offset(s) of group %s%s", expired, group_id,
                 "; removed the empty group" if drop_group else "")
    return expired_total


def _expired(group, topic: str, c: rec.CommittedOffset, retention_ms: int, now: int) -> bool:
    if c.expire_timestamp >= 0:
        return now >= c.expire_timestamp
    if group is None or group.is_in(S.EMPTY):
        if group is None or group.protocol_type is None or group.state_timestamp < 0:
            base = c.commit_timestamp
        else:
            base = group.state_timestamp
        return now - base >= retention_ms
    if group.is_in(S.STABLE):
        topics = group.subscribed_topics()
        if topics is not None and topic not in topics:
            return now - c.commit_timestamp >= retention_ms
    return False
