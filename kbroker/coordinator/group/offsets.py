"""Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete and expiry.

Commits are OffsetCommit records; the offsets map of the shard changes only when they replay.
Each function here is (part of) an operation: it returns a CoordinatorResult and writes nothing.

Validation of a commit (Kafka's ClassicGroup.validateOffsetCommit): a group that does not exist
accepts only standalone commits (generation -1), which create an Empty group; an Empty group
accepts them too; otherwise the member must be known (FENCED_INSTANCE_ID / UNKNOWN_MEMBER_ID),
the generation current (ILLEGAL_GENERATION), and the group not be in CompletingRebalance
(REBALANCE_IN_PROGRESS). Commits during PreparingRebalance are allowed, so members can commit
while revoking partitions; they count as a heartbeat there and in Stable. A generation >= 0 for a
group that does not exist is GROUP_ID_NOT_FOUND from v9 on, ILLEGAL_GENERATION before. A member
that left (LeaveGroup) or was removed is UNKNOWN_MEMBER_ID; a static member replaced by a newer
instance FENCED_INSTANCE_ID.

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
from kbroker.coordinator.group.state import ClassicGroup, GroupState, classic_expired_offsets
from kbroker.coordinator.group.sync import validate_member
from kbroker.coordinator.runtime import CoordinatorResult, now_ms, respond
from kbroker.protocol.errors import Errors, KafkaError

log = logging.getLogger("kbroker.coordinator.group")
S = GroupState


def validate_commit(shard: GroupShard, group_id: str, generation_id: int, member_id: str,
                    group_instance_id: str | None, group_id_not_found: bool,
                    transactional: bool = False, api_version: int = -1):
    """Kafka's ClassicGroup.validateOffsetCommit. ``group_id_not_found``: a commit with a
    generation to a group that does not exist is GROUP_ID_NOT_FOUND (OffsetCommit v9+ and
    TxnOffsetCommit v6+, KIP-848 / KIP-1319) rather than the ILLEGAL_GENERATION older clients know.
    A ``transactional`` commit (TxnOffsetCommit) without a member is accepted whatever the group's
    state (a producer may send offsets for a group id alone), and is not held back by a
    rebalance. A consumer-protocol group has its own rules
    (:func:`kbroker.coordinator.group.consumer.offsets.validate_commit`), which may return a
    per-partition validator for :func:`commit`; a classic group returns None."""
    group = shard.find_group(group_id)
    if group is not None and group.group_type != ClassicGroup.group_type:
        # Each type's own rules; a share group keeps no committed offsets (its share partitions
        # do): "not a consumer group", as Kafka.
        return group.validate_offset_commit(member_id, group_instance_id, generation_id,
                                            transactional, api_version)
    if group is None:
        if generation_id < 0:
            return
        raise KafkaError(Errors.GROUP_ID_NOT_FOUND if group_id_not_found
                         else Errors.ILLEGAL_GENERATION)
    if generation_id < 0 and group.is_in(S.EMPTY):
        return
    if generation_id >= 0 or member_id or group_instance_id is not None:
        error = validate_member(group, member_id, group_instance_id)
        if error is not None:
            raise KafkaError(error)
        if generation_id != group.generation:
            raise KafkaError(Errors.ILLEGAL_GENERATION)
    elif not transactional and not group.is_in(S.EMPTY):
        raise KafkaError(Errors.UNKNOWN_MEMBER_ID)
    if not transactional and group.is_in(S.COMPLETING_REBALANCE):
        raise KafkaError(Errors.REBALANCE_IN_PROGRESS)
    member = group.members.get(member_id)
    if member is not None:
        shard.schedule_session_expiry(group, member)  # a commit counts as a heartbeat


def commit(shard: GroupShard, group_id: str, offsets: list,
           expire_timestamp: int = -1, validator=None) -> CoordinatorResult:
    """``offsets``: [(topic, partition, topic_id, offset, leader_epoch, metadata)], written as
    one batch; ``validator(topic, topic_id, partition)`` (a consumer group's member epoch
    check) raises KafkaError for the whole request. The response is one error per entry."""
    max_metadata = shard.config.get("offset.metadata.max.bytes")
    now = now_ms()
    records, errors = [], []
    for topic, partition, topic_id, offset, leader_epoch, metadata in offsets:
        metadata = metadata or ""
        if len(metadata.encode("utf-8")) > max_metadata:
            errors.append(Errors.OFFSET_METADATA_TOO_LARGE)
            continue
        if validator is not None:
            validator(topic, topic_id, partition)
        committed = rec.CommittedOffset(offset, leader_epoch, metadata, now, expire_timestamp,
                                        topic_id)
        records.append((rec.offset_commit_key(group_id, topic, partition),
                        rec.offset_commit_value(committed)))
        errors.append(Errors.NONE)
    if not records:
        return respond(errors)
    return CoordinatorResult(
        records, errors,
        # A standalone commit (no group management) makes an Empty group (Kafka).
        on_committed=lambda: shard.add_group(group_id),
        on_failed=lambda exc: [exc.error if e is Errors.NONE else e for e in errors])


def fetch(shard: GroupShard, group_id: str, wanted: list | None) -> list:
    """``wanted``: [(topic, [partitions])] or None for all. Returns
    [(topic, partition, CommittedOffset or None)]."""
    committed = shard.offsets.get(group_id, {})
    if wanted is None:
        return [(t, p, c) for (t, p), c in sorted(committed.items())]
    return [(topic, p, committed.get((topic, p))) for topic, partitions in wanted
            for p in partitions]


def delete(shard: GroupShard, group_id: str, wanted: list) -> CoordinatorResult:
    """OffsetDelete: ``wanted`` [(topic, partition)]; the response is (group error, per-entry
    errors). A consumer group's subscribed topics (by name or regex) answer
    GROUP_SUBSCRIBED_TO_TOPIC, whatever its state."""
    group = shard.find_group(group_id)
    if group is None:
        return respond((Errors.GROUP_ID_NOT_FOUND, []))
    try:
        subscribed = group.guarded_topics()
    except KafkaError as exc:
        return respond((exc.error, []))
    if subscribed is None:
        return respond((Errors.NON_EMPTY_GROUP, []))
    committed = shard.offsets.get(group_id, {})
    records, errors = [], []
    for topic, partition in wanted:
        if topic in subscribed:
            errors.append(Errors.GROUP_SUBSCRIBED_TO_TOPIC)
            continue
        errors.append(Errors.NONE)
        if (topic, partition) in committed:
            records.append((rec.offset_commit_key(group_id, topic, partition), None))
    return CoordinatorResult(records, (Errors.NONE, errors),
                             on_failed=lambda exc: (exc.error, []))


def expire(shard: GroupShard, retention_ms: int, now: int | None = None) -> CoordinatorResult:
    """Tombstones for expired offsets (and emptied Empty groups), one batch for the shard; the
    response is the number of offsets expired."""
    now = now_ms() if now is None else now
    all_records, dropped, logged = [], [], []
    for group_id in list(shard.offsets.keys() | shard.groups.keys()):
        group = shard.find_group(group_id)
        committed = shard.offsets.get(group_id, {})
        expired_offsets = classic_expired_offsets(None, committed, retention_ms, now) \
            if group is None else group.expired_offsets(committed, retention_ms, now)
        records = [(rec.offset_commit_key(group_id, topic, partition), None)
                   for topic, partition in expired_offsets]
        expired = len(records)
        drop_group = group is not None and group.expires_with_offsets(expired, len(committed))
        if drop_group:
            records += group.tombstones()
        if not records:
            continue
        all_records += records
        logged.append((group_id, expired, drop_group))
        if drop_group:
            dropped.append(group_id)

    def expired_committed() -> None:
        for group_id in dropped:
            shard.drop_group(group_id)
        for group_id, expired, drop_group in logged:
            log.info("expired %d offset(s) of group %s%s", expired, group_id,
                     "; removed the empty group" if drop_group else "")

    def failed(exc: KafkaError) -> int:
        log.warning("could not expire offsets of %d group(s): %s", len(logged), exc)
        return 0

    return CoordinatorResult(all_records, sum(expired for _, expired, _ in logged),
                             on_committed=expired_committed, on_failed=failed)
