"""Kafka's ``simple`` share-group assignor, as its behaviour is specified (balance first, then
stickiness), written for kbroker.

Partitions may go to several members: with more members than partitions each partition goes to
``ceil(members / partitions)`` of them, so every member gets work. Members subscribed to the same
topics share one pool of partitions; otherwise (heterogeneous subscriptions) each topic is
balanced alone among its subscribers and the results are combined. Within a pool the number of
assignments of any two members differs by at most one; a member keeps the partitions it had
while that keeps the balance.
"""

from __future__ import annotations


def assign(subscriptions: dict, partitions_by_topic: dict, previous: dict) -> dict:
    """``subscriptions``: {member id: set of topic ids}; ``partitions_by_topic``: {topic id:
    partition count} of the assignable (initialized) partitions, as {topic id: set};
    ``previous``: {member id: {topic id: set}}. Returns {member id: {topic id: set}}."""
    out: dict = {m: {} for m in subscriptions}
    subs = {m: frozenset(t for t in topics if partitions_by_topic.get(t))
            for m, topics in subscriptions.items()}
    homogeneous = len(set(subs.values())) <= 1
    if homogeneous:
        pools = [(sorted(subs), sorted(next(iter(subs.values()), ()), key=str))]
    else:
        topics = sorted({t for s in subs.values() for t in s}, key=str)
        pools = [(sorted(m for m, s in subs.items() if t in s), [t]) for t in topics]
    for members, topics in pools:
        pool = [(t, p) for t in topics for p in sorted(partitions_by_topic[t])]
        if not members or not pool:
            continue
        for member, tps in _balance(members, pool, previous).items():
            for t, p in tps:
                out[member].setdefault(t, set()).add(p)
    return out


def _balance(members: list, pool: list, previous: dict) -> dict:
    copies = -(-len(members) // len(pool))          # each partition goes to this many members
    slots = len(pool) * copies
    base, extra = divmod(slots, len(members))
    held = {m: [tp for tp in pool if tp[1] in previous.get(m, {}).get(tp[0], ())]
            for m in members}
    # Members that had the most keep the extra slots (stickiness), then the first ids.
    order = sorted(members, key=lambda m: (-len(held[m]), m))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(order)}
    owners: dict = {tp: set() for tp in pool}
    result: dict = {m: [] for m in members}
    for m in order:  # keep what each member had, within its quota and the copies
        for tp in held[m]:
            if len(result[m]) < quota[m] and len(owners[tp]) < copies:
                result[m].append(tp)
                owners[tp].add(m)
    for tp in pool:  # hand out the rest to the least loaded member without it
        while len(owners[tp]) < copies:
            candidates = [m for m in members if m not in owners[tp]]
            if not candidates:
                break
            open_ = [m for m in candidates if len(result[m]) < quota[m]] or candidates
            m = min(open_, key=lambda x: (len(result[x]), x))
            result[m].append(tp)
            owners[tp].add(m)
    return result
