"""Combining state batches: the cases Kafka's PersisterStateBatchCombiner distinguishes, each with
the result its rules give (worked out by hand from those rules)."""

from __future__ import annotations

import pytest

from kbroker.coordinator.share.combiner import combine
from kbroker.coordinator.share.persister import StateBatch as B

AV, ACK, ARC = 0, 2, 4


@pytest.mark.parametrize("so_far,new,start,expected", [
    # nothing, or one batch: as given
    ([], [], -1, []),
    ([B(0, 9, AV, 1)], [], -1, [B(0, 9, AV, 1)]),
    # the start offset drops ranges below it and cuts the one across it
    ([B(0, 9, AV, 1), B(10, 19, ACK, 1)], [], 15, [B(15, 19, ACK, 1)]),
    # same state, overlapping or adjacent: joined
    ([B(0, 9, AV, 1)], [B(5, 14, AV, 1)], -1, [B(0, 14, AV, 1)]),
    ([B(0, 9, AV, 1)], [B(10, 14, AV, 1)], -1, [B(0, 14, AV, 1)]),
    # adjacent with different states: kept apart
    ([B(0, 9, AV, 1)], [B(10, 14, ACK, 1)], -1, [B(0, 9, AV, 1), B(10, 14, ACK, 1)]),
    # identical range, higher state wins
    ([B(0, 9, AV, 1)], [B(0, 9, ACK, 1)], -1, [B(0, 9, ACK, 1)]),
    # a higher delivery count wins over a higher state
    ([B(0, 9, ACK, 1)], [B(0, 9, AV, 2)], -1, [B(0, 9, AV, 2)]),
    # same first offset, the longer one lower: the shorter keeps its range, the rest follows
    ([B(0, 9, AV, 1)], [B(0, 4, ACK, 1)], -1, [B(0, 4, ACK, 1), B(5, 9, AV, 1)]),
    # same first offset, the longer one higher: it covers all
    ([B(0, 9, ACK, 1)], [B(0, 4, AV, 1)], -1, [B(0, 9, ACK, 1)]),
    # a winner inside a range splits it in three
    ([B(0, 9, AV, 1)], [B(3, 5, ACK, 1)], -1,
     [B(0, 2, AV, 1), B(3, 5, ACK, 1), B(6, 9, AV, 1)]),
    # a loser inside a range disappears
    ([B(0, 9, ACK, 1)], [B(3, 5, AV, 1)], -1, [B(0, 9, ACK, 1)]),
    # same last offset
    ([B(0, 9, AV, 1)], [B(5, 9, ARC, 1)], -1, [B(0, 4, AV, 1), B(5, 9, ARC, 1)]),
    ([B(0, 9, ARC, 1)], [B(5, 9, AV, 1)], -1, [B(0, 9, ARC, 1)]),
    # overlapping tails
    ([B(0, 9, AV, 1)], [B(5, 14, ACK, 1)], -1, [B(0, 4, AV, 1), B(5, 14, ACK, 1)]),
    ([B(0, 9, ACK, 1)], [B(5, 14, AV, 1)], -1, [B(0, 9, ACK, 1), B(10, 14, AV, 1)]),
    # several ranges at once, out of order, with a start offset
    ([B(20, 29, AV, 1), B(0, 9, AV, 1)], [B(5, 24, ACK, 2)], 3,
     [B(3, 4, AV, 1), B(5, 24, ACK, 2), B(25, 29, AV, 1)]),
    # duplicates collapse
    ([B(0, 9, AV, 1)], [B(0, 9, AV, 1)], -1, [B(0, 9, AV, 1)]),
])
def test_combine(so_far, new, start, expected):
    assert combine(so_far, new, start) == expected


def test_result_never_overlaps():
    import random
    rng = random.Random(7)
    for _ in range(300):
        batches = []
        for _ in range(rng.randint(0, 8)):
            first = rng.randint(0, 50)
            batches.append(B(first, first + rng.randint(0, 10), rng.choice((AV, ACK, ARC)),
                             rng.randint(1, 3)))
        out = combine(batches[:3], batches[3:], -1)
        out.sort(key=lambda b: b.first_offset)
        for a, b in zip(out, out[1:]):
            assert a.last_offset < b.first_offset
        # every offset keeps the highest (count, state) any input gave it
        for off in {o for b in batches for o in range(b.first_offset, b.last_offset + 1)}:
            best = max((b.delivery_count, b.delivery_state) for b in batches
                       if b.first_offset <= off <= b.last_offset)
            got = [(b.delivery_count, b.delivery_state) for b in out
                   if b.first_offset <= off <= b.last_offset]
            assert got == [best]


def test_archived_after_archiving_wins_and_a_later_delivery_beats_both():
    """KIP-1191: ARCHIVING (3) then ARCHIVED (4) at the same delivery count: the higher state
    wins, as Kafka's PersisterStateBatchCombiner; a higher count wins whatever the state."""
    assert combine([B(0, 9, 0, 1), B(3, 5, 3, 2)], [B(4, 4, 4, 2)], 0) == [
        B(0, 2, 0, 1), B(3, 3, 3, 2), B(4, 4, 4, 2), B(5, 5, 3, 2), B(6, 9, 0, 1)]
    assert combine([B(0, 0, 4, 2)], [B(0, 0, 3, 2)], 0) == [B(0, 0, 4, 2)]
    assert combine([B(0, 0, 4, 2)], [B(0, 0, 3, 3)], 0) == [B(0, 0, 3, 3)]
