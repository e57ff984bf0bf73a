"""Server-side assignors of consumer groups (``group.consumer.assignors``): ``uniform`` (the
default) and ``range``, working on topic ids.

An assignor gets the members (:class:`MemberSpec`: subscribed topic ids, instance id, rack and
current target assignment), the partition count of every subscribed topic and whether the group
is homogeneous, and returns each member's new target ``{topic id: frozenset(partitions)}``.

``uniform`` — balance first, then stickiness (Kafka's UniformAssignor):
- homogeneous (everyone subscribes to the same topics): every member gets ``total // members``
  partitions, ``total % members`` of them one more; a member keeps as much of its current target
  as its quota allows (members already holding more are the ones that get the extra partition),
  and freed or new partitions fill the members below quota.
- heterogeneous: partitions are placed topic by topic (most partitions per subscriber first) on
  the least loaded subscriber, keeping current owners; then partitions move from the most to the
  least loaded subscriber of each topic until the loads of any topic's subscribers differ by at
  most one (or nothing moves any more).

``range`` — contiguous ranges per topic, members sorted by instance id (static members first) then
member id: co-partitioned when members subscribe to the same topics with equal partition counts
(Kafka's RangeAssignor). Not sticky beyond that order.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_BALANCE_PASSES = 16  # Kafka's bound on the heterogeneous balancing passes


class AssignorError(Exception):
    """The assignment cannot be computed (Kafka's PartitionAssignorException)."""


@dataclass(frozen=True, slots=True)
class MemberSpec:
    topic_ids: frozenset
    instance_id: str | None
    rack_id: str | None
    assignment: dict  # current target: {topic id: frozenset}


def _check_topics(members: dict, partitions: dict) -> None:
    for spec in members.values():
        for topic_id in spec.topic_ids:
            if topic_id not in partitions:
                raise AssignorError(f"Members are subscribed to topic {topic_id} which doesn't "
                                    f"exist in the topic metadata.")


def uniform(members: dict, partitions: dict, homogeneous: bool) -> dict:
    if not members:
        return {}
    _check_topics(members, partitions)
    if homogeneous:
        return _uniform_homogeneous(members, partitions)
    return _uniform_heterogeneous(members, partitions)


def _sticky_start(members: dict, partitions: dict) -> tuple[dict, dict]:
    """Each member's current target limited to what it subscribes to and what exists; a
    partition claimed twice stays with the first member (in member id order)."""
    owner: dict = {}
    kept: dict = {}
    for member_id in sorted(members):
        spec = members[member_id]
        mine = {}
        for topic_id, parts in spec.assignment.items():
            if topic_id not in spec.topic_ids:
                continue
            count = partitions[topic_id]
            valid = sorted(p for p in parts if p < count and (topic_id, p) not in owner)
            for p in valid:
                owner[(topic_id, p)] = member_id
            if valid:
                mine[topic_id] = valid
        kept[member_id] = mine
    return kept, owner


def _uniform_homogeneous(members: dict, partitions: dict) -> dict:
    topics = sorted(next(iter(members.values())).topic_ids, key=lambda t: t.bytes)
    if not topics:
        return {m: {} for m in members}
    kept, owner = _sticky_start(members, partitions)
    total = sum(partitions[t] for t in topics)
    n = len(members)
    quota, extra = divmod(total, n)
    # The members holding the most get the extra partitions: fewer moves.
    by_size = sorted(members, key=lambda m: (-sum(len(p) for p in kept[m].values()), m))
    quotas = {m: quota + (1 if i < extra else 0) for i, m in enumerate(by_size)}
    result = {m: {} for m in members}
    for member_id in sorted(members):
        room = quotas[member_id]
        for topic_id in topics:
            for p in kept[member_id].get(topic_id, ()):
                if room > 0:
                    result[member_id].setdefault(topic_id, set()).add(p)
                    room -= 1
                else:
                    del owner[(topic_id, p)]
        quotas[member_id] = room
    free = [(t, p) for t in topics for p in range(partitions[t]) if (t, p) not in owner]
    it = iter(free)
    for member_id in sorted(members):
        for _ in range(quotas[member_id]):
            tp = next(it, None)
            if tp is None:
                break
            result[member_id].setdefault(tp[0], set()).add(tp[1])
    if next(it, None) is not None:
        raise AssignorError("Partitions were left unassigned")
    return {m: {t: frozenset(p) for t, p in a.items()} for m, a in result.items()}


def _uniform_heterogeneous(members: dict, partitions: dict) -> dict:
    member_ids = sorted(members)
    subscribers: dict = {}
    for member_id in member_ids:
        for topic_id in members[member_id].topic_ids:
            subscribers.setdefault(topic_id, []).append(member_id)
    index = {m: i for i, m in enumerate(member_ids)}
    kept, owner = _sticky_start(members, partitions)
    result = {m: {t: set(p) for t, p in kept[m].items()} for m in member_ids}
    load = {m: sum(len(p) for p in result[m].values()) for m in member_ids}

    def order(topic_id):  # most partitions per subscriber first, then fewer subscribers, then id
        return (-partitions[topic_id] / len(subscribers[topic_id]), len(subscribers[topic_id]),
                topic_id.bytes)

    topics = sorted(subscribers, key=order)
    for topic_id in topics:
        for p in range(partitions[topic_id]):
            if (topic_id, p) in owner:
                continue
            target = min(subscribers[topic_id], key=lambda m: (load[m], index[m]))
            result[target].setdefault(topic_id, set()).add(p)
            owner[(topic_id, p)] = target
            load[target] += 1
    for _ in range(MAX_BALANCE_PASSES):
        moved = False
        for topic_id in topics:
            subs = subscribers[topic_id]
            if len(subs) < 2:
                continue
            while True:
                givers = [m for m in subs if result[m].get(topic_id)]
                if not givers:
                    break
                giver = max(givers, key=lambda m: (load[m], -index[m]))
                taker = min(subs, key=lambda m: (load[m], index[m]))
                if load[giver] - load[taker] <= 1:
                    break
                p = max(result[giver][topic_id])
                result[giver][topic_id].discard(p)
                if not result[giver][topic_id]:
                    del result[giver][topic_id]
                result[taker].setdefault(topic_id, set()).add(p)
                load[giver] -= 1
                load[taker] += 1
                moved = True
        if not moved:
            break
    return {m: {t: frozenset(p) for t, p in a.items() if p} for m, a in result.items()}


def range_(members: dict, partitions: dict, homogeneous: bool) -> dict:
    if not members:
        return {}
    _check_topics(members, partitions)
    ordered = sorted(members, key=lambda m: (members[m].instance_id is None,
                                             members[m].instance_id or "", m))
    subscribers: dict = {}
    for member_id in ordered:
        for topic_id in members[member_id].topic_ids:
            subscribers[topic_id] = subscribers.get(topic_id, 0) + 1
    cursor = {t: [0, *divmod(partitions[t], n)] for t, n in subscribers.items()}
    result = {}
    for member_id in ordered:
        mine = {}
        for topic_id in sorted(members[member_id].topic_ids, key=lambda t: t.bytes):
            state = cursor[topic_id]
            start, quota, extra = state
            if extra > 0:
                quota += 1
                state[2] -= 1
            end = min(start + quota, partitions[topic_id])
            state[0] = end
            if start < end:
                mine[topic_id] = frozenset(range(start, end))
        result[member_id] = mine
    return result


ASSIGNORS = {"uniform": uniform, "range": range_}


def check_assignors(names) -> None:
    unknown = [n for n in names if n not in ASSIGNORS]
    if unknown:
        raise ValueError(f"unknown consumer group assignors {unknown}; kbroker has "
                         f"{sorted(ASSIGNORS)}")


def topic_ids(names, image) -> frozenset:
    """The ids of the named topics that exist in the metadata image."""
    out = set()
    for name in names:
        topic = image.topic(name)
        if topic is not None:
            out.add(topic.topic_id)
    return frozenset(out)

