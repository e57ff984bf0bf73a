"""The target assignment of a share group: run the assignor over the members' subscriptions and
the *initialized* partitions of the topics they subscribe to, and write what changed (the members
whose target moved, then the target's epoch and timestamp, always)."""

from __future__ import annotations

import logging

from kbroker.coordinator.group.share import assignor
from kbroker.coordinator.group.share import records as rec

log = logging.getLogger("kbroker.coordinator.group")


def build(shard, group, members: dict, epoch: int, now: int) -> tuple[list, dict]:
    """(records, {member id: {topic id: set}}) for ``members`` (member id -> member)."""
    image = shard.image
    subscriptions, assignable = {}, {}
    for member_id, m in members.items():
        ids = set()
        for name in m.subscribed:
            topic = image.topic(name)
            if topic is None:
                continue
            parts = {p for p in group.initialized_partitions(topic.topic_id)
                     if p < topic.num_partitions}
            if parts:
                ids.add(topic.topic_id)
                assignable[topic.topic_id] = parts
        subscriptions[member_id] = ids
    target = assignor.assign(subscriptions, assignable, group.target)
    records = []
    for member_id in members:
        new = {t: frozenset(p) for t, p in target.get(member_id, {}).items() if p}
        old = group.target.get(member_id)
        if old is None or dict(old) != new:
            records.append(rec.target_member(group.group_id, member_id, new))
    records.append(rec.target_metadata(group.group_id, epoch, now))
    log.info("group %s: new target assignment at epoch %d: %s", group.group_id, epoch,
             {m: {str(t): sorted(p) for t, p in a.items()} for m, a in target.items()})
    return records, target
