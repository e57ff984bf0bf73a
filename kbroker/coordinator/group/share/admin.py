"""Deleting a share group (DeleteGroups), as Kafka 4.4's coordinator does it in two steps:

1. :func:`prepare_delete` — only an Empty group (NON_EMPTY_GROUP otherwise); every initialized or
   initializing topic (and any still marked deleting from an earlier attempt, if it exists) moves
   to *deleting* in ShareGroupStatePartitionMetadata; the answer is the share partitions whose
   state the persister must delete;
2. the broker calls ``persister.delete`` for each; only when all succeed does
   :func:`delete` tombstone the group (its offsets and every record, the state metadata too).
"""

from __future__ import annotations

import logging

from kbroker.coordinator.group import records as offsets_rec
from kbroker.coordinator.group.share import records as rec
from kbroker.coordinator.group.share.group import TopicInit
from kbroker.coordinator.runtime import CoordinatorResult, respond
from kbroker.protocol.errors import Errors

log = logging.getLogger("kbroker.coordinator.group")


def partitions_to_delete(shard, group) -> dict:
    """{topic id: frozenset(partitions)}: initialized and initializing partitions, and every
    partition of a topic still marked deleting that exists."""
    out: dict = {}
    for entries in (group.initialized, group.initializing):
        for t, entry in entries.items():
            out[t] = out.get(t, frozenset()) | entry.partitions
    for t in group.deleting:
        topic = shard.image.topic_by_id(t)
        if topic is not None:
            out[t] = out.get(t, frozenset()) | frozenset(range(topic.num_partitions))
    return out


def prepare_delete(shard, group_id: str) -> CoordinatorResult:
    """Response: Errors (NON_EMPTY_GROUP, or GROUP_ID_NOT_FOUND when it is no share group) or
    {topic id: partitions} to delete through the persister."""
    group = shard.find_group(group_id, "share")
    if group is None:
        return respond(Errors.GROUP_ID_NOT_FOUND)
    if not group.is_empty:
        return respond(Errors.NON_EMPTY_GROUP)
    todo = partitions_to_delete(shard, group)
    if not todo:
        return respond({})
    deleting = dict(group.deleting)
    for t, entry in list(group.initialized.items()) + list(group.initializing.items()):
        deleting[t] = entry.name
    for t in list(deleting):
        if shard.image.topic_by_id(t) is None and t not in todo:
            del deleting[t]
    return CoordinatorResult([rec.state_metadata(group_id, {}, {}, deleting)], todo)


def delete(shard, group_id: str) -> CoordinatorResult:
    """The share state is gone: tombstone the group and its offsets."""
    group = shard.find_group(group_id, "share")
    if group is None:
        return respond(Errors.GROUP_ID_NOT_FOUND)
    if not group.is_empty:
        return respond(Errors.NON_EMPTY_GROUP)
    records = [(offsets_rec.offset_commit_key(group_id, topic, partition), None)
               for topic, partition in shard.offsets.get(group_id, {})]
    records += rec.group_tombstones(group)
    return CoordinatorResult(records, Errors.NONE, on_committed=lambda: log.info(
        "deleted share group %s", group_id), on_failed=lambda exc: exc.error)


# --- the share-group offsets admin APIs (KIP-932) ---------------------------------------------------

def share_group_or_error(shard, group_id: str, create: bool = False):
    """The share group; GROUP_ID_NOT_FOUND with Kafka's message when it is missing (unless
    ``create``: a new, empty, unrecorded one) or of another type."""
    from kbroker.coordinator.group.share.group import ShareGroup
    from kbroker.protocol.errors import KafkaError
    group = shard.group_of_type(group_id, "share")
    if group is not None:
        return group
    if create:
        return ShareGroup(group_id)
    raise KafkaError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")


def initialized_partitions(shard, group_id: str) -> dict:
    """{topic id: set(partitions)} initialized for the group (none for an unknown group)."""
    group = shard.find_group(group_id, "share")
    if group is None:
        return {}
    return {t: set(e.partitions) for t, e in group.initialized.items()}


def alter_offsets(shard, group_id: str, topics: list) -> CoordinatorResult:
    """AlterShareGroupOffsets, the coordinator's part. ``topics``: [(name, [(partition, start
    offset)])]. Only an empty group (NON_EMPTY_GROUP); a missing one is created. Response:
    ([(name, topic id or None, [(partition, Errors)])], {topic id: {partition: offset}}, state
    epoch); the partitions to set are recorded as initializing."""
    from kbroker.coordinator.group.share import initialize
    from kbroker.coordinator.runtime import now_ms
    from kbroker.protocol.errors import KafkaError
    group = share_group_or_error(shard, group_id, create=True)
    if not group.is_empty:
        raise KafkaError(Errors.NON_EMPTY_GROUP, "The group is not empty.")
    now = now_ms()
    answer, offsets, todo = [], {}, {}
    for name, partitions in topics:
        topic = shard.image.topic(name)
        if topic is None:
            answer.append((name, None, [(p, Errors.UNKNOWN_TOPIC_OR_PARTITION)
                                        for p, _ in partitions]))
            continue
        results = []
        for p, offset in partitions:
            if p < topic.num_partitions:
                results.append((p, Errors.NONE))
                offsets.setdefault(topic.topic_id, {})[p] = offset
            else:
                results.append((p, Errors.UNKNOWN_TOPIC_OR_PARTITION))
        if topic.topic_id in offsets:
            todo[topic.topic_id] = TopicInit(name, frozenset(offsets[topic.topic_id]), now)
        answer.append((name, topic.topic_id, results))
    records = [initialize.mark_initializing(group, todo)] if todo else []
    return CoordinatorResult(records, (answer, offsets, group.group_epoch))


def start_delete_offsets(shard, group_id: str, names: list) -> CoordinatorResult:
    """DeleteShareGroupOffsets, first step: only an empty share group (NON_EMPTY_GROUP,
    GROUP_ID_NOT_FOUND); each named topic's initialized partitions move to deleting. Response:
    (topic errors [(name, Errors, message)], {topic id: (name, partitions)} to delete)."""
    from kbroker.protocol.errors import KafkaError
    group = share_group_or_error(shard, group_id)
    if not group.is_empty:
        raise KafkaError(Errors.NON_EMPTY_GROUP, "The group is not empty.")
    initialized = dict(group.initialized)
    deleting = dict(group.deleting)
    errors, todo = [], {}
    for name in names:
        topic = shard.image.topic(name)
        if topic is None:
            errors.append((name, Errors.UNKNOWN_TOPIC_OR_PARTITION,
                           "This server does not host this topic-partition."))
            continue
        t = topic.topic_id
        if t in initialized:
            todo[t] = (name, initialized.pop(t).partitions)
            deleting[t] = name
        elif t in deleting:
            todo[t] = (name, frozenset(range(topic.num_partitions)))
        else:
            errors.append((name, Errors.UNKNOWN_TOPIC_OR_PARTITION,
                           "There is no offset information to delete."))
    records = [rec.state_metadata(group_id, group.initializing, initialized, deleting)] \
        if group.has_state_metadata else []
    return CoordinatorResult(records, (errors, todo))


def complete_delete_offsets(shard, group_id: str, topic_ids) -> CoordinatorResult:
    """The persister deleted these topics' state: they leave the deleting topics."""
    group = shard.find_group(group_id, "share")
    if group is None or not group.has_state_metadata:
        return respond(None)
    deleting = {t: n for t, n in group.deleting.items() if t not in set(topic_ids)}
    return CoordinatorResult([rec.state_metadata(group_id, group.initializing, group.initialized,
                                                 deleting)], None)
