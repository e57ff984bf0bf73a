"""Merging state batches (the semantics of Kafka's ``PersisterStateBatchCombiner``).

A share partition's state is a list of offset ranges, each with a delivery state and count.
A write brings new ranges that may overlap the stored ones; combining them yields ranges that do
not overlap, where for every offset the range with the higher (delivery count, delivery state)
wins, and neighbouring ranges with the same count and state are joined. Ranges wholly below the
start offset are dropped and a range across it is cut at it.

The work set is ordered like Kafka's TreeSet of batches (first offset, last offset, count, state),
so equal ranges collapse and the order in which pairs are resolved, hence the result, is the
same as Kafka's.
"""

from __future__ import annotations

from kbroker.coordinator.share.persister import NO_OFFSET, StateBatch


def _order(b: StateBatch) -> tuple:
    return (b.first_offset, b.last_offset, b.delivery_count, b.delivery_state)


def _rank(b: StateBatch) -> tuple:
    """Which of two overlapping ranges wins: the higher delivery count, then state."""
    return (b.delivery_count, b.delivery_state)


def combine(so_far: list[StateBatch] | tuple, new: list[StateBatch] | tuple,
            start_offset: int) -> list[StateBatch]:
    batches = _prune([*so_far, *new], start_offset)
    if len(batches) < 2:
        return batches
    work = set(batches)
    final: list[StateBatch] = []
    while True:
        pair = _next_pair(work, final)
        if pair is None:
            break
        prev, cand = pair
        work.discard(prev)
        work.discard(cand)
        if _rank(cand) == _rank(prev):
            # Overlapping or adjacent with the same delivery info: one range covers both.
            work.add(StateBatch(prev.first_offset, max(prev.last_offset, cand.last_offset),
                                prev.delivery_state, prev.delivery_count))
        else:
            work.update(_split(prev, cand))
    final.extend(sorted(work, key=_order))
    return final


def _prune(batches: list[StateBatch], start_offset: int) -> list[StateBatch]:
    if start_offset == NO_OFFSET:
        return batches
    kept = []
    for b in batches:
        if b.last_offset < start_offset:
            continue
        if b.first_offset >= start_offset:
            kept.append(b)
        else:
            kept.append(StateBatch(start_offset, b.last_offset, b.delivery_state,
                                   b.delivery_count))
    return kept


def _next_pair(work: set, final: list) -> tuple[StateBatch, StateBatch] | None:
    """The first (in order) pair that overlaps, or touches with the same delivery info. The
    ranges before it overlap nothing any more: they move to ``final``."""
    ordered = sorted(work, key=_order)
    if not ordered:
        return None
    settled = []
    prev = ordered[0]
    for cand in ordered[1:]:
        if cand.first_offset <= prev.last_offset or (
                prev.last_offset + 1 == cand.first_offset and _rank(prev) == _rank(cand)):
            _settle(work, final, settled)
            return prev, cand
        settled.append(prev)
        prev = cand
    _settle(work, final, settled)
    return None


def _settle(work: set, final: list, settled: list) -> None:
    for b in settled:
        work.discard(b)
    final.extend(settled)


def _split(prev: StateBatch, cand: StateBatch) -> list[StateBatch]:
    """Two overlapping ranges with different delivery info (``prev`` sorts first): the parts
    each keeps, the winner keeping the overlap."""
    cand_wins = _rank(cand) >= _rank(prev)
    if cand.first_offset == prev.first_offset:
        if cand.last_offset == prev.last_offset:
            return [cand]  # the order puts the higher rank second
        # cand is longer (the order puts the shorter first)
        if not cand_wins:
            return [prev, StateBatch(prev.last_offset + 1, cand.last_offset,
                                     cand.delivery_state, cand.delivery_count)]
        return [cand]
    head = StateBatch(prev.first_offset, cand.first_offset - 1, prev.delivery_state,
                      prev.delivery_count)
    if cand.last_offset < prev.last_offset:  # prev encloses cand
        if not cand_wins:
            return [prev]
        return [head, cand, StateBatch(cand.last_offset + 1, prev.last_offset,
                                       prev.delivery_state, prev.delivery_count)]
    if cand.last_offset == prev.last_offset:
        return [prev] if not cand_wins else [head, cand]
    # cand runs past prev
    if not cand_wins:
        return [prev, StateBatch(prev.last_offset + 1, cand.last_offset, cand.delivery_state,
                                 cand.delivery_count)]
    return [head, cand]
