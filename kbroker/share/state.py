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

The state is kept per batch, as Kafka's ``InFlightBatch``: an acquisition of a fetched log batch
makes one run of offsets (:mod:`kbroker.share.runs`) with one state, delivery count, member and
lock deadline. An acknowledgement, a release, a renewal, a lock expiry or an archiving that
covers part of a run cuts it into the part it covers and the rest (Kafka builds a per-offset map
for such a batch instead; cutting keeps a partial acknowledgement of 500 records at three runs,
and an offset with a state of its own costs one run). Runs are never merged back. No operation
pays for the whole window: the runs are found by bisect, lock deadlines and AVAILABLE runs sit
in heaps, and counts per state follow every change. The window is bounded by
``group.share.partition.max.record.locks`` (no new offset is acquired while that many are in
flight).

This module does no I/O and keeps no clock: callers pass ``now_ms``. Every mutating method returns
the offsets it changed so :mod:`kbroker.share.partition` can persist them
(:func:`persisted_batches`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from kbroker.coordinator.share.persister import (ACKNOWLEDGED, ARCHIVED, ARCHIVING, AVAILABLE,
                                                 ReadResult, StateBatch)
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.share.runs import ACQUIRED, InFlightRuns, Run, consecutive


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


class SharePartitionState:
    def __init__(self, start_offset: int, state_epoch: int = 0):
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.state_epoch = state_epoch
        self.window = InFlightRuns()
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
                state.window.add(Run(state.end_offset, batch.first_offset - 1, AVAILABLE))
            elif batch.first_offset < state.end_offset:
                # The share coordinator's combiner never stores overlapping ranges; should one
                # come, the later range wins where they overlap.
                state.window.remove_range(batch.first_offset, batch.last_offset)
            state.window.add(Run(batch.first_offset, batch.last_offset, batch.delivery_state,
                                 batch.delivery_count))
            state.end_offset = max(state.end_offset, batch.last_offset + 1)
        state.advance_start()
        return state

    # --- reads ---------------------------------------------------------------------------------

    def next_fetch_offset(self) -> int:
        """The first offset worth reading from the log: the lowest AVAILABLE one, else the end."""
        first = self.window.first_available()
        return self.end_offset if first is None else first

    def has_available(self) -> bool:
        return self.next_fetch_offset() < self.end_offset

    def in_flight_count(self) -> int:
        return sum(self.window.counts)

    def acquired_count(self) -> int:
        return self.window.counts[ACQUIRED]

    def unfinished_count(self) -> int:
        """In-flight records still to be delivered or acknowledged (AVAILABLE or ACQUIRED)."""
        counts = self.window.counts
        return counts[AVAILABLE] + counts[ACQUIRED] + counts[ARCHIVING]

    def delivery_complete_count(self) -> int:
        return self.window.counts[ACKNOWLEDGED] + self.window.counts[ARCHIVED]

    def acquired_by(self, member: str) -> list[int]:
        """The offsets ``member`` holds (a pass over the runs: a session closing, not a fetch)."""
        return [offset for run in self.window.runs if run.state == ACQUIRED and run.member == member
                for offset in range(run.first, run.last + 1)]

    def next_deadline_ms(self) -> int | None:
        return self.window.earliest_deadline()

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
        runs = self.window.runs
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
            i = self.window.index(first)
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
                i = self.window.carve(i, first, known_last)
                run = runs[i]
                if not batch.deliverable:
                    self.window.set(run, ARCHIVED)
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
                    self.window.cut(i, run.first + take)
                self.window.set(run, ACQUIRED, member, deadline)
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
                self.window.add(Run(new.start, new.stop - 1, ARCHIVED))
                changed.update(new)
                taken = new
            else:
                taken = new
                if record_limit_mode:
                    taken = taken[:max(0, max_records - taken_count)]
                if cap is not None:
                    taken = taken[:max(0, cap - taken_count)]
                if taken:
                    self.window.add(Run(taken.start, taken.stop - 1, ACQUIRED, 1, member, deadline))
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
        runs = self.window.runs
        i = self.window.index(first)
        while i < len(runs) and runs[i].first < end:
            if runs[i].state == AVAILABLE:
                i = self.window.carve(i, first, end - 1)
                run = runs[i]
                self.window.set(run, ARCHIVED)
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
        runs = self.window.runs
        for first, last, types in batches:
            if first >= self.end_offset or last >= self.end_offset:
                raise KafkaError(Errors.INVALID_REQUEST, f"offsets {first}-{last} reach past "
                                 f"the last offset ever delivered ({self.end_offset - 1})")
            if last < self.start_offset:
                continue  # all done already (acknowledged, archived or expired): Kafka skips it
            # offsets not in flight are finished (below the start offset, or holes in the log)
            for low, high, ack in _segments(max(first, self.start_offset), last, first, types):
                i = self.window.index(low)
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
            i = self.window.index(low)
            while i < len(runs) and runs[i].first <= high:
                i = self.window.carve(i, low, high)
                run = runs[i]
                if remember_all:
                    before.update(dict.fromkeys(range(run.first, run.last + 1), run.fields()))
                elif before is not None:
                    fields = run.fields()
                    for offset in range(run.first, run.last + 1):
                        before.setdefault(offset, fields)
                if ack == RENEW:
                    self.window.renew(run, now_ms + limits.lock_duration_ms)
                else:
                    if ack == RELEASE:
                        self._release(run, limits)
                    elif ack == REJECT and limits.dead_letter:
                        self.window.set(run, ARCHIVING)
                        cause_of.update(dict.fromkeys(range(run.first, run.last + 1),
                                                      CLIENT_REJECT))
                    else:
                        self.window.set(run, ACK_TO_STATE[ack])
                    changed.update(range(run.first, run.last + 1))
                i += 1
        self.advance_start()
        return changed

    @staticmethod
    def _check_holder(run: Run, offset: int, member: str, ack: int, limits: Limits) -> None:
        if run.member != member:
            raise KafkaError(Errors.INVALID_RECORD_STATE,
                             f"offset {offset} is acquired by another member")
        if ack == RENEW and not limits.renew_enabled:
            raise KafkaError(Errors.INVALID_RECORD_STATE, "the group's "
                             "share.renew.acknowledge.enable is false")

    def _release(self, run: Run, limits: Limits) -> None:
        if run.delivery_count < limits.delivery_count_limit:
            self.window.set(run, AVAILABLE)
        elif limits.dead_letter:
            self.window.set(run, ARCHIVING)
            self.archiving_cause.update(dict.fromkeys(range(run.first, run.last + 1),
                                                      DELIVERY_COUNT_EXCEEDED))
        else:
            self.window.set(run, ARCHIVED)

    def release_member(self, member: str, limits: Limits) -> set[int]:
        """A member's share session closed: its acquired records go back (or are archived)."""
        changed = set()
        for run in self.window.runs:
            if run.state == ACQUIRED and run.member == member:
                self._release(run, limits)
                changed.update(range(run.first, run.last + 1))
        self.advance_start()
        return changed

    def expire_locks(self, now_ms: int, limits: Limits) -> set[int]:
        """Release every record whose acquisition lock has run out (those only: the deadlines
        are a heap)."""
        changed = set()
        for run in self.window.pop_expired(now_ms):
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
                    for run in self.window.runs if run.state == ARCHIVING
                    for offset in range(run.first, run.last + 1)]
        ordered = sorted(offsets)
        return [(offset, run.delivery_count, cause_of.get(offset, ""))
                for i, k, run in self.window.slices(ordered) if run.state == ARCHIVING
                for offset in ordered[i:k]]

    def finish_archiving(self, offsets) -> set[int]:
        """The dead-letter write of ``offsets`` is over (written or given up): those still
        ARCHIVING become ARCHIVED; returns them (to persist)."""
        changed = set()
        offsets = sorted(set(offsets))
        for offset in offsets:
            self.archiving_cause.pop(offset, None)
        runs = self.window.runs
        for low, high in consecutive(offsets):
            i = self.window.index(low)
            while i < len(runs) and runs[i].first <= high:
                if runs[i].state == ARCHIVING:
                    i = self.window.carve(i, low, high)
                    run = runs[i]
                    self.window.set(run, ARCHIVED)
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
        for i, k, run in self.window.slices(ordered):
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
        runs = self.window.runs
        reinserted = []
        for first, last, old, present in spans:
            if present:
                i = self.window.index(first)
                while i < len(runs) and runs[i].first <= last:
                    i = self.window.carve(i, first, last)
                    self._restore(runs[i], old)
                    i += 1
            else:  # below the start offset by now: back in the window
                self.window.add(Run(first, last, *old))
                reinserted.append(first)
            if old[0] != ARCHIVING:
                for offset in range(first, last + 1):
                    self.archiving_cause.pop(offset, None)
        if reinserted:
            self.start_offset = min(self.start_offset, min(reinserted))

    def _restore(self, run: Run, fields: tuple) -> None:
        state, run.delivery_count, member, run.deadline_ms = fields
        self.window.set(run, state, member, run.deadline_ms)

    # --- start offset --------------------------------------------------------------------------

    def advance_start(self) -> bool:
        """Move the start offset past leading finished records; whether it moved."""
        before = self.start_offset
        runs = self.window.runs
        done = 0
        while done < len(runs) and runs[done].state in TERMINAL:
            done += 1
        self.window.drop_leading(done)
        if self.start_offset < self.end_offset:
            self.start_offset = runs[0].first if runs else self.end_offset
        return self.start_offset != before

    def move_start_to(self, log_start_offset: int) -> bool:
        """Retention or DeleteRecords removed records below ``log_start_offset``: they can no
        longer be delivered, whatever their state (Kafka archives them too)."""
        if log_start_offset <= self.start_offset:
            return False
        runs = self.window.runs
        gone = 0
        while gone < len(runs) and runs[gone].last < log_start_offset:
            self._forget_causes(runs[gone], runs[gone].last)
            gone += 1
        self.window.drop_leading(gone)
        if runs and runs[0].first < log_start_offset:
            self._forget_causes(runs[0], log_start_offset - 1)
            self.window.trim_front(log_start_offset)
        self.start_offset = log_start_offset
        self.end_offset = max(self.end_offset, log_start_offset)
        self.advance_start()
        return True

    def _forget_causes(self, run: Run, last: int) -> None:
        if run.state == ARCHIVING:
            for offset in range(run.first, last + 1):
                self.archiving_cause.pop(offset, None)

    # --- persistence ---------------------------------------------------------------------------

    def persisted_batches(self, offsets: set[int]) -> list[StateBatch]:
        """The changed offsets still in flight, as runs of one state and delivery count. An
        ACQUIRED record is written as AVAILABLE: its lock does not survive a restart."""
        batches: list[StateBatch] = []
        first = last = key = None
        for low, high, run in self.window.spans(sorted(offsets)):
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


class _RecordsView(Mapping):
    """:attr:`SharePartitionState.records`: offset -> :class:`InFlight`, a copy per lookup."""

    def __init__(self, state: SharePartitionState):
        self._state = state

    def __getitem__(self, offset: int) -> InFlight:
        run = self._state.window.run_at(offset)
        if run is None:
            raise KeyError(offset)
        return InFlight(*run.fields())

    def __iter__(self) -> Iterator[int]:
        for run in self._state.window.runs:
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
