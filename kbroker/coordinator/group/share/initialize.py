"""Share-partition initialization (Kafka 4.4's ShareGroupStatePartitionMetadata flow).

A share partition is assigned only once its state exists in the share coordinator. When a
heartbeat finds subscribed partitions that are neither initialized nor being initialized (or
whose initialization has been pending longer than ``group.share.initialize.retry.interval.ms``),
it records them as *initializing* and hands them back; the group coordinator then calls
``persister.initialize`` for them in the background (:func:`initialize_partitions`) (start offset -1: the share partition resolves
``share.auto.offset.reset`` when it first loads, as Kafka's does) and, on success, the
:func:`initialized` operation moves them to *initialized*. The next heartbeat sees initialized
partitions that the target assignment does not cover and starts a new assignment.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from kbroker.coordinator.group.share import records as rec
from kbroker.coordinator.group.share import settings
from kbroker.coordinator.group.share.group import ShareGroup, TopicInit
from kbroker.coordinator.runtime import CoordinatorResult
from kbroker.coordinator.share.persister import NO_OFFSET, SharePartitionKey
from kbroker.protocol.errors import Errors, KafkaError

log = logging.getLogger("kbroker.coordinator.group")


@dataclass(frozen=True)
class InitializeRequest:
    """What the broker asks the persister to initialize: {topic id: frozenset(partitions)}."""
    group_id: str
    state_epoch: int
    topics: dict


def assignment_pending(group: ShareGroup, subscribed: set) -> bool:
    """Kafka's initializedAssignmentPending: initialized partitions of a subscribed topic that
    the target assignment does not cover (exactly)."""
    if group.is_empty or not group.initialized or not subscribed:
        return False
    assigned: dict = {}
    for target in group.target.values():
        for t, p in target.items():
            assigned.setdefault(t, set()).update(p)
    return any(entry.name in subscribed and assigned.get(t) != set(entry.partitions)
               for t, entry in group.initialized.items())


def to_initialize(shard, group: ShareGroup, subscribed: set, now: int) -> dict:
    """{topic id: TopicInit} of the subscribed partitions still to initialize."""
    retry = settings.initialize_retry_interval_ms(shard)
    out = {}
    for name in sorted(subscribed):
        topic = shard.image.topic(name)
        if topic is None:
            continue
        done = set(group.initialized_partitions(topic.topic_id))
        pending = group.initializing.get(topic.topic_id)
        if pending is not None and now - pending.timestamp < retry:
            done |= pending.partitions
        missing = frozenset(range(topic.num_partitions)) - done
        if missing:
            out[topic.topic_id] = TopicInit(name, missing, now)
    return out


def mark_initializing(group: ShareGroup, todo: dict) -> tuple:
    """The state record with ``todo`` added to the initializing topics."""
    initializing = dict(group.initializing)
    for t, entry in todo.items():
        old = initializing.get(t)
        parts = entry.partitions | (old.partitions if old is not None else frozenset())
        initializing[t] = TopicInit(entry.name, parts, entry.timestamp)
    return rec.state_metadata(group.group_id, initializing, group.initialized, group.deleting)


def initialized(shard, group_id: str, topics: dict) -> CoordinatorResult:
    """The persister initialized ``topics`` ({topic id: partitions}): move them from
    initializing to initialized."""
    group = shard.find_group(group_id, "share")
    if group is None:
        return CoordinatorResult()
    initializing = dict(group.initializing)
    done = dict(group.initialized)
    for t, parts in topics.items():
        pending = initializing.get(t)
        name = pending.name if pending is not None else (done[t].name if t in done else None)
        if name is None:
            continue
        if pending is not None:
            left = pending.partitions - frozenset(parts)
            if left:
                initializing[t] = TopicInit(name, left, pending.timestamp)
            else:
                del initializing[t]
        old = done.get(t)
        done[t] = TopicInit(name, frozenset(parts) | (old.partitions if old else frozenset()))
    log.info("group %s: share partitions initialized: %s", group_id,
             {done[t].name: sorted(p) for t, p in topics.items() if t in done})
    return CoordinatorResult([rec.state_metadata(group_id, initializing, done, group.deleting)])


def forget_deleted_topics(shard, topic_ids: set) -> list:
    """Kafka's maybeCleanupShareGroupState: deleted topics leave every share group's
    initializing, initialized and deleting topics (their share state is the share coordinator's
    to drop). Returns the state records to write."""
    records = []
    for group in shard.groups_of_type("share"):
        hit = topic_ids & (set(group.initializing) | set(group.initialized) | set(group.deleting))
        if not hit:
            continue
        log.info("group %s: forgetting the share state metadata of deleted topic(s) %s",
                 group.group_id, sorted(str(t) for t in hit))
        records.append(rec.state_metadata(
            group.group_id, {t: e for t, e in group.initializing.items() if t not in hit},
            {t: e for t, e in group.initialized.items() if t not in hit},
            {t: n for t, n in group.deleting.items() if t not in hit}))
    return records


async def initialize_partitions(groups, persister, request: InitializeRequest) -> None:
    """Initialize the share partitions ``request`` names through the persister, then record
    those that succeeded (:func:`initialized`); a failure is retried by a later heartbeat after
    ``group.share.initialize.retry.interval.ms``."""
    gid = request.group_id
    done: dict = {}
    for topic_id, partitions in request.topics.items():
        for p in sorted(partitions):
            try:
                result = await persister.initialize(SharePartitionKey(gid, topic_id, p),
                                                    request.state_epoch, NO_OFFSET)
            except Exception:  # noqa: BLE001 - retried after the initialize retry interval
                log.exception("group %s: initializing share partition %s-%d failed", gid,
                              topic_id, p)
                continue
            if result.error is Errors.NONE:
                done.setdefault(topic_id, set()).add(p)
            else:
                log.warning("group %s: initializing share partition %s-%d: %s %s", gid, topic_id,
                            p, result.error.name, result.error_message or "")
    if not done:
        return
    try:
        await groups.write(gid, lambda shard: initialized(shard, gid, done))
    except KafkaError as exc:
        log.warning("group %s: recording initialized share partitions failed: %s", gid,
                    exc.error.name)
