"""The in-flight offsets of one share partition, kept as runs (:mod:`kbroker.share.state`
applies the rules to them).

A :class:`Run` is a range of consecutive offsets sharing one state, delivery count, member and
lock deadline: one per fetched log batch when acquired, as Kafka's ``InFlightBatch``, cut when
an operation covers part of it (:meth:`InFlightRuns.carve`) and never merged back. What makes
an operation cost what it touches rather than the window:

- the runs are a list ordered by offset, never overlapping (holes a compaction left are
  allowed), found with bisect (:meth:`InFlightRuns.index`, :meth:`InFlightRuns.slices`);
- the ACQUIRED runs' lock deadlines and the AVAILABLE runs' first offsets are two heaps with
  lazy deletion: an entry is stale once its run changed state, deadline or first offset, or
  left the window (state REMOVED), and is dropped when it reaches the top, or all at once when
  stale entries outnumber the runs;
- the count of offsets per state follows every change (:meth:`InFlightRuns.set`).

Every change of a run's state goes through :meth:`InFlightRuns.set`, which keeps the counts and
the heaps right; a run's fields may be read anywhere.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterator
from heapq import heapify, heappop, heappush
from operator import attrgetter

from kbroker.coordinator.share.persister import ARCHIVED, AVAILABLE

ACQUIRED = 1  # never persisted: a restart makes acquired records available again

REMOVED = -1  # the state of a run no longer in the window: its heap entries are stale


class Run:
    """Offsets [first, last], consecutive, all in one state with one delivery count, member
    and lock deadline (Kafka's InFlightBatch, or one entry of its per-offset map)."""
    __slots__ = ("first", "last", "state", "delivery_count", "member", "deadline_ms")

    def __init__(self, first: int, last: int, state: int, delivery_count: int = 0,
                 member: str | None = None, deadline_ms: int = 0):
        self.first = first
        self.last = last
        self.state = state
        self.delivery_count = delivery_count
        self.member = member
        self.deadline_ms = deadline_ms

    def __lt__(self, other: "Run") -> bool:
        return False  # heap entries with equal keys: any order will do

    def __len__(self) -> int:
        return self.last - self.first + 1

    def fields(self) -> tuple:
        return self.state, self.delivery_count, self.member, self.deadline_ms

    def __repr__(self) -> str:
        return f"Run({self.first}-{self.last}, {self.state}, {self.delivery_count}, " \
               f"{self.member!r})"


_last_of = attrgetter("last")
_first_of = attrgetter("first")


class InFlightRuns:
    """The runs of one share partition, with their heaps and counts."""

    def __init__(self):
        self.runs: list[Run] = []  # ordered by offset, never overlapping; holes allowed
        self.counts = [0] * (ARCHIVED + 1)  # offsets in flight per state
        self._available: list[tuple[int, Run]] = []  # (first, run) of AVAILABLE runs
        self._deadlines: list[tuple[int, Run]] = []  # (deadline_ms, run) of ACQUIRED runs

    def first_available(self) -> int | None:
        """The lowest AVAILABLE offset."""
        heap = self._available
        while heap:
            first, run = heap[0]
            if run.state == AVAILABLE and run.first == first:
                return first
            heappop(heap)  # stale: acquired, archived or cut at the front since
        return None

    def earliest_deadline(self) -> int | None:
        heap = self._deadlines
        while heap:
            deadline, run = heap[0]
            if run.state == ACQUIRED and run.deadline_ms == deadline:
                return deadline
            heappop(heap)  # stale: acknowledged, released or renewed since
        return None

    def pop_expired(self, now_ms: int) -> Iterator[Run]:
        """The ACQUIRED runs whose lock deadline is ``now_ms`` or earlier, each once (the
        caller moves each out of ACQUIRED before taking the next)."""
        heap = self._deadlines
        while heap and heap[0][0] <= now_ms:
            deadline, run = heappop(heap)
            if run.state == ACQUIRED and run.deadline_ms == deadline:
                yield run

    def index(self, offset: int) -> int:
        """The index of the first run ending at or after ``offset``."""
        return bisect_left(self.runs, offset, key=_last_of)

    def run_at(self, offset: int) -> Run | None:
        runs = self.runs
        i = self.index(offset)
        if i < len(runs) and runs[i].first <= offset:
            return runs[i]
        return None

    def slices(self, offsets: list[int]) -> Iterator[tuple[int, int, Run]]:
        """(i, k, run): ``offsets[i:k]`` (sorted) are in ``run``; those not in flight are left
        out. Two bisects per run touched, none per offset."""
        runs = self.runs
        i = r = 0
        while i < len(offsets):
            r = bisect_left(runs, offsets[i], lo=r, key=_last_of)
            if r == len(runs):
                return
            run = runs[r]
            if run.first > offsets[i]:  # below the window or in a hole
                i = bisect_left(offsets, run.first, lo=i)
                continue
            k = bisect_right(offsets, run.last, lo=i)
            yield i, k, run
            i = k
            r += 1

    def spans(self, offsets: list[int]) -> Iterator[tuple[int, int, Run]]:
        """The sorted ``offsets`` in flight as (first, last, run): consecutive offsets of one
        run together."""
        for i, k, run in self.slices(offsets):
            if offsets[k - 1] - offsets[i] == k - 1 - i:  # all of them, the usual case
                yield offsets[i], offsets[k - 1], run
            else:
                for low, high in consecutive(offsets[i:k]):
                    yield low, high, run

    def cut(self, i: int, offset: int) -> None:
        """Split ``runs[i]`` before ``offset`` (inside it): the part from ``offset`` on becomes
        a new run after it."""
        run = self.runs[i]
        right = Run(offset, run.last, run.state, run.delivery_count, run.member,
                    run.deadline_ms)
        run.last = offset - 1
        self.runs.insert(i + 1, right)
        self.track(right)

    def carve(self, i: int, low: int, high: int) -> int:
        """Cut ``runs[i]``, which overlaps [low, high], so that its part inside is a run of its
        own; that run's index. The part inside gets no heap entry, as every caller gives it a
        state at once, and the old run object stays as a part outside, keeping its entries:
        an acknowledgement going offset by offset through a batch leaves no stale ones."""
        runs = self.runs
        run = runs[i]
        if low <= run.first and run.last <= high:
            return i
        first, last = max(run.first, low), min(run.last, high)
        inside = Run(first, first if first == last else last, run.state, run.delivery_count,
                     run.member, run.deadline_ms)
        if run.first < low:  # the old run keeps the part before
            if run.last > high:
                self.cut(i, high + 1)
            run.last = low - 1
            runs.insert(i + 1, inside)
            return i + 1
        run.first = high + 1  # the old run keeps the part after
        runs.insert(i, inside)
        if run.state == AVAILABLE:
            self.track(run)  # its entry holds its old first offset
        return i

    def add(self, run: Run) -> None:
        """A run past every other, or in a place :meth:`remove_range` cleared."""
        runs = self.runs
        if runs and runs[-1].first > run.first:
            insort(runs, run, key=_first_of)
        else:
            runs.append(run)
        self.counts[run.state] += len(run)
        self.track(run)

    def drop_leading(self, count: int) -> None:
        """The first ``count`` runs leave the window."""
        for run in self.runs[:count]:
            self.drop(run)
        del self.runs[:count]

    def trim_front(self, first: int) -> None:
        """The first run starts at ``first`` now: the offsets before it left the window."""
        run = self.runs[0]
        self.counts[run.state] -= first - run.first
        run.first = first
        if run.state == AVAILABLE:
            self.track(run)  # its entry holds its old first offset

    def remove_range(self, first: int, last: int) -> None:
        runs = self.runs
        i = self.index(first)
        while i < len(runs) and runs[i].first <= last:
            i = self.carve(i, first, last)
            self.drop(runs.pop(i))

    def drop(self, run: Run) -> None:
        self.counts[run.state] -= len(run)
        run.state = REMOVED

    def set(self, run: Run, state: int, member: str | None = None, deadline_ms: int = 0
            ) -> None:
        """Move ``run`` to ``state`` (its lock deadline changes only when it is acquired)."""
        size = len(run)
        self.counts[run.state] -= size
        self.counts[state] += size
        run.state = state
        run.member = member
        if state == ACQUIRED:
            run.deadline_ms = deadline_ms
        self.track(run)

    def track(self, run: Run) -> None:
        """Give ``run`` the heap entry its state needs."""
        if run.state == AVAILABLE:
            self._push(self._available, (run.first, run), "first")
        elif run.state == ACQUIRED:
            self._push(self._deadlines, (run.deadline_ms, run), "deadline_ms")

    def renew(self, run: Run, deadline_ms: int) -> None:
        """A new lock deadline for the ACQUIRED ``run``."""
        run.deadline_ms = deadline_ms
        self._push(self._deadlines, (deadline_ms, run), "deadline_ms")

    def _push(self, heap: list, entry: tuple, key: str) -> None:
        heappush(heap, entry)
        if len(heap) > 2 * len(self.runs) + 64:
            # mostly stale entries: rebuild from the runs (amortized over the pushes)
            state = AVAILABLE if heap is self._available else ACQUIRED
            heap[:] = [(getattr(run, key), run) for run in self.runs if run.state == state]
            heapify(heap)


def consecutive(offsets: list[int]) -> Iterator[tuple[int, int]]:
    """Sorted distinct ``offsets`` as (first, last) ranges of consecutive ones."""
    low = high = None
    for offset in offsets:
        if high is not None and high + 1 == offset:
            high = offset
            continue
        if low is not None:
            yield low, high
        low = high = offset
    if low is not None:
        yield low, high


