"""One share partition's in-flight records (KIP-932): Kafka's ``SharePartition`` state, pure.

A share group reads a partition from its *start offset*. Every offset from there up to the
*end offset* (the next one never fetched) is in flight, in one of five states:

- AVAILABLE: may be acquired by the next fetch (never delivered, or released);
- ACQUIRED: locked by one member until it acknowledges it or its lock expires;
- ACKNOWLEDGED: accepted, done;
- ARCHIVING (KIP-1191): rejected or out of delivery attempts in a group with a dead-letter
  queue; persisted so, then written to the queue, then ARCHIVED (:mod:`kbroker.share.dlq`);
  neither acquirable nor acknowledgeable, and the start offset waits for it;
- ARCHIVED: rejected, a gap, a control or aborted record, or out of delivery attempts; done.

Transitions (one table, :data:`ACK_TO_STATE`, plus :meth:`_release`):

  AVAILABLE --acquire (delivery count +1)--> ACQUIRED
  ACQUIRED --ACCEPT--> ACKNOWLEDGED;  --REJECT / GAP--> ARCHIVED;  --RENEW--> ACQUIRED (new lock)
  ACQUIRED --RELEASE, lock timeout, session close--> AVAILABLE, or ARCHIVED once the delivery
          count reached ``group.share.delivery.count.limit``
  With a dead-letter queue (``Limits.dead_letter``), REJECT and the delivery limit lead to
  ARCHIVING instead; ARCHIVING --:meth:`finish_archiving`--> ARCHIVED. GAP, ACCEPT, control and
  aborted records, and records below the log start offset never go to the queue (as Kafka).

The start offset moves past every leading ACKNOWLEDGED/ARCHIVED offset (and past the log start
offset when retention deletes records). Offsets below it are finished: an acknowledgement
naming them skips them and succeeds, as Kafka's does.

The state is kept per batch, as Kafka's ``InFlightBatch``: a *run* is a range of consecutive
offsets sharing one state, delivery count, member and lock deadline, and an acquisition of a
fetched log batch makes one run. An acknowledgement, a release, a renewal, a lock expiry or an
archiving that covers part of a run cuts it into the part it covers and the rest (Kafka builds a
per-offset map for such a batch instead; cutting keeps a partial acknowledgement of 500 records
at three runs, and an offset with its own state costs one run). Runs are never merged back. So
that no operation pays for the whole window: the runs are a list ordered by offset (found with
bisect), the lock deadlines and the AVAILABLE runs are two heaps with lazy deletion (an entry is
dropped when found stale: the run changed state, deadline or first offset, or left the window),
and the counts per state are kept as runs change. The window is bounded by
``group.share.partition.max.record.locks`` (no new offset is acquired while that many are in
flight).

This module does no I/O and keeps no clock: callers pass ``now_ms``. Every mutating method returns
the offsets it changed so :mod:`kbroker.share.partition` can persist them
(:func:`persisted_batches`).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from heapq import heapify, heappop, heappush
from operator import attrgetter

from kbroker.coordinator.share.persister import (ACKNOWLEDGED, ARCHIVED, ARCHIVING, AVAILABLE,
                                                 ReadResult, StateBatch)
from kbroker.protocol.errors import Errors, KafkaError

ACQUIRED = 1  # never persisted: a restart makes acquired records available again

# Acknowledge types of ShareFetch/ShareAcknowledge (AcknowledgeType in kafka-clients).
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
ACK_TO_STATE = {ACCEPT: ACKNOWLEDGED, REJECT: ARCHIVED, GAP: ARCHIVED}
TERMINAL = (ACKNOWLEDGED, ARCHIVED)
# Why a record went to ARCHIVING: the __dlq.errors.message header Kafka 4.4 writes.
CLIENT_REJECT = "Offset rejected by client."
DELIVERY_COUNT_EXCEEDED = "Offset delivery count exceeded the threshold."
# The in-flight window is bounded by group.share.partition.max.record.locks (at most 10000), so
# a persisted state spanning far more offsets is damaged: loading it fails rather than filling
# memory offset by offset.
MAX_LOADED_OFFSETS = 1_000_000


class InFlight:
    """One offset's fields, as :attr:`SharePartitionState.records` shows them (a copy)."""
    __slots__ = ("state", "delivery_count", "member", "deadline_ms")

    def __init__(self, state: int, delivery_count: int = 0, member: str | None = None,
                 deadline_ms: int = 0):
        self.state = state
        self.delivery_count = delivery_count
        self.member = member
        self.deadline_ms = deadline_ms

    def __repr__(self) -> str:
        return f"InFlight({self.state}, {self.delivery_count}, {self.member!r})"


@dataclass(frozen=True)
class FetchedBatch:
    """A record batch the log returned: its offsets and whether a consumer may see it (False for
    control batches and, under read_committed, aborted transactional batches)."""
    base_offset: int
    last_offset: int
    deliverable: bool = True


@dataclass(frozen=True)
class Acquired:
    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True)
class Limits:
    delivery_count_limit: int = 5
    max_record_locks: int = 2000
    lock_duration_ms: int = 30000
    renew_enabled: bool = True
    dead_letter: bool = False  # the group has a dead-letter queue (and share.version >= 2)


REMOVED = -1  # the state of a run no longer in the window: its heap entries are stale


class _Run:
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

    def __lt__(self, other: "_Run") -> bool:
        return False  # heap entries with equal keys: any order will do

    def __len__(self) -> int:
        return self.last - self.first + 1

    def fields(self) -> tuple:
        return self.state, self.delivery_count, self.member, self.deadline_ms

    def __repr__(self) -> str:
        return f"_Run({self.first}-{self.last}, {self.state}, {self.delivery_count}, " \
               f"{self.member!r})"


_last_of = attrgetter("last")
_first_of = attrgetter("first")


class SharePartitionState:
    def __init__(self, start_offset: int, state_epoch: int = 0):
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.state_epoch = state_epoch
        self._runs: list[_Run] = []  # ordered by offset, never overlapping; holes allowed
        self._counts = [0] * (ARCHIVED + 1)  # offsets in flight per state
        self._available: list[tuple[int, _Run]] = []  # (first, run) of AVAILABLE runs
        self._deadlines: list[tuple[int, _Run]] = []  # (deadline_ms, run) of ACQUIRED runs
        # offset -> why it is ARCHIVING (CLIENT_REJECT or DELIVERY_COUNT_EXCEEDED), for its
        # dead-letter record; an offset loaded in ARCHIVING gets it from its delivery count.
        self.archiving_cause: dict[int, str] = {}

    # --- loading -------------------------------------------------------------------------------

    @classmethod
    def from_persisted(cls, read: ReadResult, start_offset: int) -> "SharePartitionState":
        """Rebuild from ReadShareGroupState: ``start_offset`` is the persisted one, or where
        ``share.auto.offset.reset`` points when none was persisted. Offsets between persisted
        batches were never delivered: AVAILABLE with no delivery yet (those the log lacks are
        archived by the first fetch that reads past them). Raises ValueError for a state that
        cannot be right: batches below the start offset or inverted, or more offsets in flight
        than :data:`MAX_LOADED_OFFSETS`."""
        state = cls(start_offset, read.state_epoch)
        batches = sorted(read.batches, key=lambda b: b.first_offset)
        if batches and batches[-1].last_offset - start_offset >= MAX_LOADED_OFFSETS:
            raise ValueError(f"persisted state spans offsets {start_offset}-"
                             f"{batches[-1].last_offset}, more than {MAX_LOADED_OFFSETS}")
        for batch in batches:
            if batch.last_offset < batch.first_offset or batch.first_offset < start_offset:
                raise ValueError(f"invalid persisted state batch {batch} (start {start_offset})")
            if batch.first_offset > state.end_offset:
                state._add(_Run(state.end_offset, batch.first_offset - 1, AVAILABLE))
            elif batch.first_offset < state.end_offset:
                # The share coordinator's combiner never stores overlapping ranges; should one
                # come, the later range wins where they overlap.
                state._remove_range(batch.first_offset, batch.last_offset)
            state._add(_Run(batch.first_offset, batch.last_offset, batch.delivery_state,
                            batch.delivery_count))
            state.end_offset = max(state.end_offset, batch.last_offset + 1)
        state.advance_start()
        return state

    # --- reads ---------------------------------------------------------------------------------

    def next_fetch_offset(self) -> int:
        """The first offset worth reading from the log: the lowest AVAILABLE one, else the end."""
        heap = self._available
        while heap:
            first, run = heap[0]
            if run.state == AVAILABLE and run.first == first:
                return first
            heappop(heap)  # stale: acquired, archived or cut at the front since
        return self.end_offset

    def has_available(self) -> bool:
        return self.next_fetch_offset() < self.end_offset

    def in_flight_count(self) -> int:
        return sum(self._counts)

    def acquired_count(self) -> int:
        return self._counts[ACQUIRED]

    def unfinished_count(self) -> int:
        """In-flight records still to be delivered or acknowledged (AVAILABLE or ACQUIRED)."""
        counts = self._counts
        return counts[AVAILABLE] + counts[ACQUIRED] + counts[ARCHIVING]

    def delivery_complete_count(self) -> int:
        return self._counts[ACKNOWLEDGED] + self._counts[ARCHIVED]

    def acquired_by(self, member: str) -> list[int]:
        """The offsets ``member`` holds (a pass over the runs: a session closing, not a fetch)."""
        return [offset for run in self._runs if run.state == ACQUIRED and run.member == member
                for offset in range(run.first, run.last + 1)]

    def next_deadline_ms(self) -> int | None:
        heap = self._deadlines
        while heap:
            deadline, run = heap[0]
            if run.state == ACQUIRED and run.deadline_ms == deadline:
                return deadline
            heappop(heap)  # stale: acknowledged, released or renewed since
        return None

    @property
    def records(self) -> Mapping[int, InFlight]:
        """Every in-flight offset's fields, in offset order: a view for tests and debugging,
        building one object per offset it is asked for."""
        return _RecordsView(self)

    # --- acquisition ---------------------------------------------------------------------------

    def acquire(self, member: str, batches: list[FetchedBatch], max_records: int,
                record_limit_mode: bool, limits: Limits, now_ms: int, batch_size: int = 0
                ) -> tuple[list[Acquired], set[int]]:
        """Lock AVAILABLE and new offsets of ``batches`` (in log order) for ``member``. In the
        default batch-optimized mode whole batches are taken even past ``max_records``; in
        record-limit mode (ShareAcquireMode 1, KIP-1206) exactly up to it. Returns the acquired
        ranges and the changed offsets (records not deliverable are archived at once). With a
        ``batch_size`` (batch-optimized mode), a range is cut at the first log batch that starts
        ``batch_size`` or more offsets after it, as Kafka's ranges are.

        Records redelivered often are isolated, as Kafka does, so that one bad record does not
        take its whole batch to the delivery limit: one at its last attempt goes alone, and from
        half the limit (at least 2) on, a fetch stops before such a record's batch unless nothing
        was taken yet, and then takes only a shrinking part of it (halved at each further
        delivery)."""
        pieces: list[tuple[int, int, int]] = []  # (first, last, delivery count) acquired
        taken_count = 0
        changed: set[int] = set()
        deadline = now_ms + limits.lock_duration_ms
        cursor = self.next_fetch_offset()
        limit = limits.delivery_count_limit
        throttle_from = max(2, -(-limit // 2))
        cap: int | None = None  # records this fetch may still take once throttled
        # group.share.partition.max.record.locks, checked as Kafka does: before a log batch
        # with new offsets, against what was in flight when the fetch began; a batch it lets in
        # is taken whole, so the window may pass the cap by part of one batch. Cutting batches
        # at the cap instead left the window always full, in fragments, and members waited out
        # their fetches' max wait for one another.
        room = limits.max_record_locks - self.in_flight_count()
        taken_new = 0
        stop = False
        runs = self._runs
        for batch in batches:
            if taken_count >= max_records or stop:
                break
            if batch.last_offset < self.start_offset:
                continue
            # Offsets between the batches the log returned no longer exist (compaction,
            # a deleted segment): available ones there are archived, new ones skipped.
            self._archive_missing(cursor, batch.base_offset, changed)
            cursor = batch.last_offset + 1
            self.end_offset = max(self.end_offset, batch.base_offset)
            taken_before = taken_count > 0  # from earlier batches of this fetch
            first = max(batch.base_offset, self.start_offset)
            known_last = min(batch.last_offset, self.end_offset - 1)
            i = self._index(first)
            has_known = known_last >= first and i < len(runs) and runs[i].first <= known_last
            new = range(max(first, self.end_offset), batch.last_offset + 1)
            if new and taken_new >= room:
                # Only the released records this window already holds, and then stop: a later
                # batch would move the end past this batch's offsets never taken, losing them.
                new, stop = range(0), True
                if not has_known:
                    break
            while has_known and i < len(runs) and runs[i].first <= known_last:
                if record_limit_mode and taken_count >= max_records:
                    break
                if runs[i].state != AVAILABLE:
                    i += 1
                    continue
                i = self._carve(i, first, known_last)
                run = runs[i]
                if not batch.deliverable:
                    self._set(run, ARCHIVED)
                    changed.update(range(run.first, run.last + 1))
                    i += 1
                    continue
                count = run.delivery_count
                last_attempt = limit > 2 and count == limit - 1
                if (count >= throttle_from and taken_before) or (last_attempt and taken_count):
                    stop = True  # it goes first in a later fetch
                    break
                if count >= throttle_from and cap is None:
                    size = batch.last_offset - batch.base_offset + 1
                    cap = max(1, size >> (count - throttle_from + 1))
                length = take = len(run)
                if record_limit_mode:
                    take = min(take, max_records - taken_count)
                if last_attempt:
                    take = 1  # alone: the next record of its run would stop the fetch
                if cap is not None:
                    take = min(take, max(1, cap - taken_count))
                if take < length:
                    self._cut(i, run.first + take)
                self._set(run, ACQUIRED, member, deadline)
                run.delivery_count += 1
                pieces.append((run.first, run.last, run.delivery_count))
                taken_count += take
                if cap is not None and taken_count >= cap:
                    stop = True
                    break
                if take < length:
                    if not (record_limit_mode and taken_count >= max_records):
                        stop = True  # a record at its last attempt, taken alone
                    break
                i += 1
            if stop or not new:
                continue
            # Offsets never delivered: nothing to throttle, one run (every record goes here).
            if not batch.deliverable:
                self._add(_Run(new.start, new.stop - 1, ARCHIVED))
                changed.update(new)
                taken = new
            else:
                taken = new
                if record_limit_mode:
                    taken = taken[:max(0, max_records - taken_count)]
                if cap is not None:
                    taken = taken[:max(0, cap - taken_count)]
                if taken:
                    self._add(_Run(taken.start, taken.stop - 1, ACQUIRED, 1, member, deadline))
                    pieces.append((taken.start, taken.stop - 1, 1))
                    taken_count += len(taken)
                if len(taken) < len(new):
                    stop = True  # the record limit or the throttling cap: the rest waits
            if taken:
                self.end_offset = taken[-1] + 1
                taken_new += len(taken)
        if changed:
            self.advance_start()
        cuts = set()
        if batch_size > 0 and not record_limit_mode:
            cuts = {b.base_offset for b in batches}
        return _ranges(pieces, cuts, batch_size), changed

    def _archive_missing(self, first: int, end: int, changed: set[int]) -> None:
        """AVAILABLE records in [first, end) the log no longer has, archived."""
        runs = self._runs
        i = self._index(first)
        while i < len(runs) and runs[i].first < end:
            if runs[i].state == AVAILABLE:
                i = self._carve(i, first, end - 1)
                run = runs[i]
                self._set(run, ARCHIVED)
                changed.update(range(run.first, run.last + 1))
            i += 1

    # --- acknowledgement -----------------------------------------------------------------------

    def acknowledge(self, member: str, batches: list[tuple[int, int, list[int]]], limits: Limits,
                    now_ms: int, before: dict[int, tuple] | None = None) -> set[int]:
        """Apply ``(first_offset, last_offset, acknowledge_types)`` batches (already checked for
        order and shape by the handler) all or nothing: raises KafkaError INVALID_RECORD_STATE for
        an offset not acquired, or acquired by another member, and INVALID_REQUEST for offsets past
        what was ever acquired, as Kafka's SharePartition.acknowledge. Offsets below the start
        offset are finished already and ignored (a batch wholly below it succeeds). ``before``,
        when given, receives the fields every record it changes had before, for :meth:`undo`
        (only those: copying the whole window would cost as much as the window is wide)."""
        plan: list[tuple[int, int, int]] = []  # (first, last, acknowledge type), all checked
        # Batches may touch (the handler's order check allows it): an offset named twice is no
        # longer acquired the second time unless the first only renewed it. Only then is a
        # record of what each offset got needed.
        planned: dict[int, int] | None = None
        if any(b[0] <= a[1] for a, b in zip(batches, batches[1:])):
            planned = {}
        runs = self._runs
        for first, last, types in batches:
            if first >= self.end_offset or last >= self.end_offset:
                raise KafkaError(Errors.INVALID_REQUEST, f"offsets {first}-{last} reach past "
                                 f"the last offset ever delivered ({self.end_offset - 1})")
            if last < self.start_offset:
                continue  # all done already (acknowledged, archived or expired): Kafka skips it
            # offsets not in flight are finished (below the start offset, or holes in the log)
            for low, high, ack in _segments(max(first, self.start_offset), last, first, types):
                i = self._index(low)
                while i < len(runs) and runs[i].first <= high:
                    run = runs[i]
                    lo, hi = max(low, run.first), min(high, run.last)
                    if run.state != ACQUIRED:
                        raise KafkaError(Errors.INVALID_RECORD_STATE,
                                         f"offset {lo} is not acquired")
                    if planned is not None:
                        for offset in range(lo, hi + 1):
                            if planned.get(offset, RENEW) != RENEW:
                                raise KafkaError(Errors.INVALID_RECORD_STATE,
                                                 f"offset {offset} is not acquired")
                            if offset == lo:
                                self._check_holder(run, lo, member, ack, limits)
                    else:
                        self._check_holder(run, lo, member, ack, limits)
                    i += 1
                plan.append((low, high, ack))
                if planned is not None:
                    planned.update(dict.fromkeys(range(low, high + 1), ack))
        changed: set[int] = set()
        cause_of = self.archiving_cause
        # no offset twice in this call and none remembered yet: no check per offset needed
        remember_all = before is not None and not before and planned is None
        for low, high, ack in plan:
            i = self._index(low)
            while i < len(runs) and runs[i].first <= high:
                i = self._carve(i, low, high)
                run = runs[i]
                if remember_all:
                    before.update(dict.fromkeys(range(run.first, run.last + 1), run.fields()))
                elif before is not None:
                    fields = run.fields()
                    for offset in range(run.first, run.last + 1):
                        before.setdefault(offset, fields)
                if ack == RENEW:
                    run.deadline_ms = now_ms + limits.lock_duration_ms
                    self._push_deadline(run)
                else:
                    if ack == RELEASE:
                        self._release(run, limits)
                    elif ack == REJECT and limits.dead_letter:
                        self._set(run, ARCHIVING)
                        cause_of.update(dict.fromkeys(range(run.first, run.last + 1),
                                                      CLIENT_REJECT))
                    else:
                        self._set(run, ACK_TO_STATE[ack])
                    changed.update(range(run.first, run.last + 1))
                i += 1
        self.advance_start()
        return changed

    @staticmethod
    def _check_holder(run: _Run, offset: int, member: str, ack: int, limits: Limits) -> None:
        if run.member != member:
            raise KafkaError(Errors.INVALID_RECORD_STATE,
                             f"offset {offset} is acquired by another member")
        if ack == RENEW and not limits.renew_enabled:
            raise KafkaError(Errors.INVALID_RECORD_STATE, "the group's "
                             "share.renew.acknowledge.enable is false")

    def _release(self, run: _Run, limits: Limits) -> None:
        if run.delivery_count < limits.delivery_count_limit:
            self._set(run, AVAILABLE)
        elif limits.dead_letter:
            self._set(run, ARCHIVING)
            self.archiving_cause.update(dict.fromkeys(range(run.first, run.last + 1),
                                                      DELIVERY_COUNT_EXCEEDED))
        else:
            self._set(run, ARCHIVED)

    def release_member(self, member: str, limits: Limits) -> set[int]:
        """A member's share session closed: its acquired records go back (or are archived)."""
        changed = set()
        for run in self._runs:
            if run.state == ACQUIRED and run.member == member:
                self._release(run, limits)
                changed.update(range(run.first, run.last + 1))
        self.advance_start()
        return changed

    def expire_locks(self, now_ms: int, limits: Limits) -> set[int]:
        """Release every record whose acquisition lock has run out (those only: the deadlines
        are a heap)."""
        changed = set()
        heap = self._deadlines
        while heap and heap[0][0] <= now_ms:
            deadline, run = heappop(heap)
            if run.state == ACQUIRED and run.deadline_ms == deadline:
                self._release(run, limits)
                changed.update(range(run.first, run.last + 1))
        self.advance_start()
        return changed

    # --- dead-letter queue (KIP-1191) ------------------------------------------------------------

    def archiving(self, offsets=None) -> list[tuple[int, int, str]]:
        """(offset, delivery count, cause) of the ARCHIVING records among ``offsets`` (all of
        them when None), in offset order. A record loaded in ARCHIVING has no cause remembered:
        as Kafka, the delivery limit when its count reached ``limit``, else a client reject
        (the caller passes the limit through :meth:`cause_of`)."""
        cause_of = self.archiving_cause
        if offsets is None:
            return [(offset, run.delivery_count, cause_of.get(offset, ""))
                    for run in self._runs if run.state == ARCHIVING
                    for offset in range(run.first, run.last + 1)]
        ordered = sorted(offsets)
        return [(offset, run.delivery_count, cause_of.get(offset, ""))
                for i, k, run in self._slices(ordered) if run.state == ARCHIVING
                for offset in ordered[i:k]]

    def finish_archiving(self, offsets) -> set[int]:
        """The dead-letter write of ``offsets`` is over (written or given up): those still
        ARCHIVING become ARCHIVED; returns them (to persist)."""
        changed = set()
        offsets = sorted(set(offsets))
        for offset in offsets:
            self.archiving_cause.pop(offset, None)
        runs = self._runs
        for low, high in _consecutive(offsets):
            i = self._index(low)
            while i < len(runs) and runs[i].first <= high:
                if runs[i].state == ARCHIVING:
                    i = self._carve(i, low, high)
                    run = runs[i]
                    self._set(run, ARCHIVED)
                    changed.update(range(run.first, run.last + 1))
                i += 1
        if changed:
            self.advance_start()
        return changed

    # --- undo (a write the persister refused) ----------------------------------------------

    def fields(self, offsets) -> dict[int, tuple | None]:
        """What ``offsets`` hold now (None for those no longer in flight), for :meth:`undo`."""
        found = dict.fromkeys(offsets)
        ordered = sorted(found)
        for i, k, run in self._slices(ordered):
            found.update(dict.fromkeys(ordered[i:k], run.fields()))
        return found

    def undo(self, before: dict[int, tuple], changed: set[int], after: dict[int, tuple | None]
             ) -> None:
        """Put the ``changed`` offsets back as ``before`` had them, except those something else
        changed since (``after`` holds what the undone operation left): a released record that
        another member acquired meanwhile stays with that member."""
        now = self.fields(changed)
        # (first, last, fields before, whether in flight now): consecutive offsets to restore
        spans: list[list] = []
        for offset in sorted(changed):
            old = before.get(offset)
            if old is None or now[offset] != after[offset]:
                continue
            present = now[offset] is not None
            span = spans[-1] if spans else None
            if span and span[1] + 1 == offset and span[2] == old and span[3] == present:
                span[1] = offset
            else:
                spans.append([offset, offset, old, present])
        runs = self._runs
        reinserted = []
        for first, last, old, present in spans:
            if present:
                i = self._index(first)
                while i < len(runs) and runs[i].first <= last:
                    i = self._carve(i, first, last)
                    self._restore(runs[i], old)
                    i += 1
            else:  # below the start offset by now: back in the window
                run = _Run(first, last, AVAILABLE)
                self._counts[AVAILABLE] += len(run)
                insort(runs, run, key=_first_of)
                self._restore(run, old)
                reinserted.append(first)
            if old[0] != ARCHIVING:
                for offset in range(first, last + 1):
                    self.archiving_cause.pop(offset, None)
        if reinserted:
            self.start_offset = min(self.start_offset, min(reinserted))

    def _restore(self, run: _Run, fields: tuple) -> None:
        state, run.delivery_count, member, run.deadline_ms = fields
        self._set(run, state, member, run.deadline_ms)

    # --- start offset --------------------------------------------------------------------------

    def advance_start(self) -> bool:
        """Move the start offset past leading finished records; whether it moved."""
        before = self.start_offset
        runs = self._runs
        done = 0
        while done < len(runs) and runs[done].state in TERMINAL:
            self._drop(runs[done])
            done += 1
        if done:
            del runs[:done]
        if self.start_offset < self.end_offset:
            self.start_offset = runs[0].first if runs else self.end_offset
        return self.start_offset != before

    def move_start_to(self, log_start_offset: int) -> bool:
        """Retention or DeleteRecords removed records below ``log_start_offset``: they can no
        longer be delivered, whatever their state (Kafka archives them too)."""
        if log_start_offset <= self.start_offset:
            return False
        runs = self._runs
        gone = 0
        while gone < len(runs) and runs[gone].last < log_start_offset:
            self._forget_causes(runs[gone], runs[gone].last)
            self._drop(runs[gone])
            gone += 1
        del runs[:gone]
        if runs and runs[0].first < log_start_offset:
            run = runs[0]
            self._forget_causes(run, log_start_offset - 1)
            self._counts[run.state] -= log_start_offset - run.first
            run.first = log_start_offset
            if run.state == AVAILABLE:
                self._track(run)  # its entry holds its old first offset
        self.start_offset = log_start_offset
        self.end_offset = max(self.end_offset, log_start_offset)
        self.advance_start()
        return True

    def _forget_causes(self, run: _Run, last: int) -> None:
        if run.state == ARCHIVING:
            for offset in range(run.first, last + 1):
                self.archiving_cause.pop(offset, None)

    # --- persistence ---------------------------------------------------------------------------

    def persisted_batches(self, offsets: set[int]) -> list[StateBatch]:
        """The changed offsets still in flight, as runs of one state and delivery count. An
        ACQUIRED record is written as AVAILABLE: its lock does not survive a restart."""
        batches: list[StateBatch] = []
        first = last = key = None
        for low, high, run in self._spans(sorted(offsets)):
            run_key = (AVAILABLE if run.state == ACQUIRED else run.state, run.delivery_count)
            if first is not None and last + 1 == low and run_key == key:
                last = high
                continue
            if first is not None:
                batches.append(StateBatch(first, last, *key))
            first, last, key = low, high, run_key
        if first is not None:
            batches.append(StateBatch(first, last, *key))
        return batches

    # --- the runs ------------------------------------------------------------------------------

    def _index(self, offset: int) -> int:
        """The index of the first run ending at or after ``offset``."""
        return bisect_left(self._runs, offset, key=_last_of)

    def _run_at(self, offset: int) -> _Run | None:
        runs = self._runs
        i = self._index(offset)
        if i < len(runs) and runs[i].first <= offset:
            return runs[i]
        return None

    def _slices(self, offsets: list[int]) -> Iterator[tuple[int, int, _Run]]:
        """(i, k, run): ``offsets[i:k]`` (sorted) are in ``run``; those not in flight are left
        out. Two bisects per run touched, none per offset."""
        runs = self._runs
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

    def _spans(self, offsets: list[int]) -> Iterator[tuple[int, int, _Run]]:
        """The sorted ``offsets`` in flight as (first, last, run): consecutive offsets of one
        run together."""
        for i, k, run in self._slices(offsets):
            if offsets[k - 1] - offsets[i] == k - 1 - i:  # all of them, the usual case
                yield offsets[i], offsets[k - 1], run
            else:
                for low, high in _consecutive(offsets[i:k]):
                    yield low, high, run

    def _cut(self, i: int, offset: int) -> None:
        """Split ``runs[i]`` before ``offset`` (inside it): the part from ``offset`` on becomes
        a new run after it."""
        run = self._runs[i]
        right = _Run(offset, run.last, run.state, run.delivery_count, run.member,
                     run.deadline_ms)
        run.last = offset - 1
        self._runs.insert(i + 1, right)
        self._track(right)

    def _carve(self, i: int, low: int, high: int) -> int:
        """Cut ``runs[i]``, which overlaps [low, high], so that its part inside is a run of its
        own; that run's index. The part inside gets no heap entry, as every caller gives it a
        state at once, and the old run object stays as a part outside, keeping its entries:
        an acknowledgement going offset by offset through a batch leaves no stale ones."""
        runs = self._runs
        run = runs[i]
        if low <= run.first and run.last <= high:
            return i
        first, last = max(run.first, low), min(run.last, high)
        inside = _Run(first, first if first == last else last, run.state, run.delivery_count,
                      run.member, run.deadline_ms)
        if run.first < low:  # the old run keeps the part before
            if run.last > high:
                self._cut(i, high + 1)
            run.last = low - 1
            runs.insert(i + 1, inside)
            return i + 1
        run.first = high + 1  # the old run keeps the part after
        runs.insert(i, inside)
        if run.state == AVAILABLE:
            self._track(run)  # its entry holds its old first offset
        return i

    def _add(self, run: _Run) -> None:
        """A run past every other, or in a place :meth:`_remove_range` cleared."""
        runs = self._runs
        if runs and runs[-1].first > run.first:
            insort(runs, run, key=_first_of)
        else:
            runs.append(run)
        self._counts[run.state] += len(run)
        self._track(run)

    def _remove_range(self, first: int, last: int) -> None:
        runs = self._runs
        i = self._index(first)
        while i < len(runs) and runs[i].first <= last:
            i = self._carve(i, first, last)
            self._drop(runs.pop(i))

    def _drop(self, run: _Run) -> None:
        self._counts[run.state] -= len(run)
        run.state = REMOVED

    def _set(self, run: _Run, state: int, member: str | None = None, deadline_ms: int = 0
             ) -> None:
        """Move ``run`` to ``state`` (its lock deadline changes only when it is acquired)."""
        size = len(run)
        self._counts[run.state] -= size
        self._counts[state] += size
        run.state = state
        run.member = member
        if state == ACQUIRED:
            run.deadline_ms = deadline_ms
        self._track(run)

    def _track(self, run: _Run) -> None:
        """Give ``run`` the heap entry its state needs."""
        if run.state == AVAILABLE:
            self._push(self._available, (run.first, run), "first")
        elif run.state == ACQUIRED:
            self._push_deadline(run)

    def _push_deadline(self, run: _Run) -> None:
        self._push(self._deadlines, (run.deadline_ms, run), "deadline_ms")

    def _push(self, heap: list, entry: tuple, key: str) -> None:
        heappush(heap, entry)
        if len(heap) > 2 * len(self._runs) + 64:
            # mostly stale entries: rebuild from the runs (amortized over the pushes)
            state = AVAILABLE if heap is self._available else ACQUIRED
            heap[:] = [(getattr(run, key), run) for run in self._runs if run.state == state]
            heapify(heap)


class _RecordsView(Mapping):
    """:attr:`SharePartitionState.records`: offset -> :class:`InFlight`, a copy per lookup."""

    def __init__(self, state: SharePartitionState):
        self._state = state

    def __getitem__(self, offset: int) -> InFlight:
        run = self._state._run_at(offset)
        if run is None:
            raise KeyError(offset)
        return InFlight(*run.fields())

    def __iter__(self) -> Iterator[int]:
        for run in self._state._runs:
            yield from range(run.first, run.last + 1)

    def __len__(self) -> int:
        return self._state.in_flight_count()


def _segments(low: int, last: int, first: int, types: list[int]
              ) -> Iterator[tuple[int, int, int]]:
    """[low, last] of an acknowledgement batch starting at ``first`` as (first, last, type)
    spans of one acknowledge type (``types`` has one per offset, or one for all)."""
    if len(types) == 1:
        yield low, last, types[0]
        return
    start = low
    for offset in range(low + 1, last + 1):
        if types[offset - first] != types[start - first]:
            yield start, offset - 1, types[start - first]
            start = offset
    yield start, last, types[start - first]


def _consecutive(offsets: list[int]) -> Iterator[tuple[int, int]]:
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


def _ranges(pieces: Iterable[tuple[int, int, int]], cuts: set[int] = frozenset(),
            batch_size: int = 0) -> list[Acquired]:
    """Acquired ``pieces`` (in offset order, each inside one log batch) joined into runs of
    consecutive offsets with one delivery count, cut at ``cuts`` once a run holds
    ``batch_size`` offsets."""
    ranges: list[Acquired] = []
    first = last = count = None
    for low, high, piece_count in pieces:
        if first is not None and last + 1 == low and count == piece_count \
                and not (low in cuts and low - first >= batch_size):
            last = high
            continue
        if first is not None:
            ranges.append(Acquired(first, last, count))
        first, last, count = low, high, piece_count
    if first is not None:
        ranges.append(Acquired(first, last, count))
    return ranges
