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
    group = shard.share_groups.get(group_id)
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
    group = shard.share_groups.get(group_id)
    if group is None:
        return respond(Errors.GROUP_ID_NOT_FOUND)
    if not group.is_empty:
        return respond(Errors.NON_EMPTY_GROUP)
    records = [(offsets_rec.offset_commit_key(group_id, topic, partition), None)
               for topic, partition in shard.offsets.get(group_id, {})]
    records += rec.group_tombstones(group)
    return CoordinatorResult(records, Errors.NONE, on_committed=lambda: log.info(
        "deleted share group %s", group_id), on_failed=lambda exc: exc.error)
