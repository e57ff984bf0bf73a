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
naming them skips them and succeeds, as Kafka's does. The state is kept per offset rather than per batch as
Kafka does: simpler, and bounded by ``group.share.partition.max.record.locks`` (no new offset is
acquired while that many are in flight).

This module does no I/O and keeps no clock: callers pass ``now_ms``. Every mutating method returns
the offsets it changed so :mod:`kbroker.share.partition` can persist them
(:func:`persisted_batches`).
"""

from __future__ import annotations

from dataclasses import dataclass

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
        self.records: dict[int, InFlight] = {}
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
            for offset in range(state.end_offset, batch.first_offset):
                state.records[offset] = InFlight(AVAILABLE)
            for offset in range(batch.first_offset, batch.last_offset + 1):
                state.records[offset] = InFlight(batch.delivery_state, batch.delivery_count)
            state.end_offset = batch.last_offset + 1
        state.advance_start()
        return state

    # --- reads ---------------------------------------------------------------------------------

    def next_fetch_offset(self) -> int:
        """The first offset worth reading from the log: the lowest AVAILABLE one, else the end."""
        for offset, record in self.records.items():  # in offset order (see advance_start)
            if record.state == AVAILABLE:
                return offset
        return self.end_offset

    def has_available(self) -> bool:
        return self.next_fetch_offset() < self.end_offset

    def in_flight_count(self) -> int:
        return len(self.records)

    def acquired_count(self) -> int:
        return sum(1 for r in self.records.values() if r.state == ACQUIRED)

    def unfinished_count(self) -> int:
        """In-flight records still to be delivered or acknowledged (AVAILABLE or ACQUIRED)."""
        return sum(1 for r in self.records.values() if r.state not in TERMINAL)

    def acquired_by(self, member: str) -> list[int]:
        return [o for o, r in self.records.items() if r.state == ACQUIRED and r.member == member]

    def next_deadline_ms(self) -> int | None:
        deadlines = [r.deadline_ms for r in self.records.values() if r.state == ACQUIRED]
        return min(deadlines) if deadlines else None

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
        acquired: list[int] = []
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
        for batch in batches:
            if len(acquired) >= max_records or stop:
                break
            if batch.last_offset < self.start_offset:
                continue
            # Offsets between the batches the log returned no longer exist (compaction,
            # a deleted segment): available ones there are archived, new ones skipped.
            changed |= self._archive_missing(cursor, batch.base_offset)
            cursor = batch.last_offset + 1
            self.end_offset = max(self.end_offset, batch.base_offset)
            taken_before = bool(acquired)  # from earlier batches of this fetch
            first = max(batch.base_offset, self.start_offset)
            known = self._offsets_in(first, min(batch.last_offset, self.end_offset - 1))
            new = range(max(first, self.end_offset), batch.last_offset + 1)
            if new and taken_new >= room:
                # Only the released records this window already holds, and then stop: a later
                # batch would move the end past this batch's offsets never taken, losing them.
                new, stop = range(0), True
                if not known:
                    break
            for offset in known:
                if record_limit_mode and len(acquired) >= max_records:
                    break
                record = self.records[offset]
                if record.state != AVAILABLE:
                    continue
                if not batch.deliverable:
                    record.state = ARCHIVED
                    changed.add(offset)
                    continue
                count = record.delivery_count
                if (count >= throttle_from and taken_before) \
                        or (limit > 2 and count == limit - 1 and acquired):
                    stop = True  # it goes first in a later fetch
                    break
                if count >= throttle_from and cap is None:
                    size = batch.last_offset - batch.base_offset + 1
                    cap = max(1, size >> (count - throttle_from + 1))
                record.state = ACQUIRED
                record.delivery_count += 1
                record.member = member
                record.deadline_ms = deadline
                acquired.append(offset)
                if cap is not None and len(acquired) >= cap:
                    stop = True
                    break
            if stop or not new:
                continue
            # Offsets never delivered: nothing to throttle, one pass (every record goes here).
            records = self.records
            if not batch.deliverable:
                for offset in new:
                    records[offset] = InFlight(ARCHIVED)
                changed.update(new)
                taken = new
            else:
                taken = new
                if record_limit_mode:
                    taken = taken[:max(0, max_records - len(acquired))]
                if cap is not None:
                    taken = taken[:max(0, cap - len(acquired))]
                for offset in taken:
                    records[offset] = InFlight(ACQUIRED, 1, member, deadline)
                acquired.extend(taken)
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
        return self._ranges(acquired, cuts, batch_size), changed

    def _offsets_in(self, first: int, last: int) -> list[int]:
        """The offsets in flight within [first, last], in order; the cost is bounded by what is
        in flight, not by the range (holes in a compacted log can be huge)."""
        if last < first:
            return []
        if last - first < len(self.records):
            return [o for o in range(first, last + 1) if o in self.records]
        return [o for o in self.records if first <= o <= last]

    def _archive_missing(self, first: int, end: int) -> set[int]:
        """AVAILABLE records in [first, end) the log no longer has, archived."""
        changed = set()
        for offset in self._offsets_in(first, end - 1):
            record = self.records[offset]
            if record.state == AVAILABLE:
                record.state = ARCHIVED
                changed.add(offset)
        return changed

    def _ranges(self, offsets: list[int], cuts: set[int] = frozenset(),
                batch_size: int = 0) -> list[Acquired]:
        """Runs of consecutive ``offsets`` with one delivery count, cut at ``cuts`` once a run
        holds ``batch_size`` offsets. One object per run, not per offset: this runs for every
        record delivered."""
        ranges: list[Acquired] = []
        records = self.records
        first = last = count = None
        for offset in offsets:
            record_count = records[offset].delivery_count
            if first is not None and last + 1 == offset and count == record_count \
                    and not (offset in cuts and offset - first >= batch_size):
                last = offset
                continue
            if first is not None:
                ranges.append(Acquired(first, last, count))
            first = last = offset
            count = record_count
        if first is not None:
            ranges.append(Acquired(first, last, count))
        return ranges

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
        plan: list[tuple[int, InFlight, int]] = []
        # Batches may touch (the handler's order check allows it): an offset named twice is no
        # longer acquired the second time unless the first only renewed it. Only then is a
        # record of what each offset got needed.
        planned: dict[int, int] | None = None
        if any(b[0] <= a[1] for a, b in zip(batches, batches[1:])):
            planned = {}
        records = self.records
        for first, last, types in batches:
            if first >= self.end_offset or last >= self.end_offset:
                raise KafkaError(Errors.INVALID_REQUEST, f"offsets {first}-{last} reach past "
                                 f"the last offset ever delivered ({self.end_offset - 1})")
            if last < self.start_offset:
                continue  # all done already (acknowledged, archived or expired): Kafka skips it
            # offsets not in flight are finished (below the start offset, or holes in the log)
            single = types[0] if len(types) == 1 else None
            for offset in self._offsets_in(max(first, self.start_offset), last):
                record = records[offset]
                ack = single if single is not None else types[offset - first]
                if record.state != ACQUIRED or (planned is not None
                                                and planned.get(offset, RENEW) != RENEW):
                    raise KafkaError(Errors.INVALID_RECORD_STATE,
                                     f"offset {offset} is not acquired")
                if record.member != member:
                    raise KafkaError(Errors.INVALID_RECORD_STATE,
                                     f"offset {offset} is acquired by another member")
                if ack == RENEW and not limits.renew_enabled:
                    raise KafkaError(Errors.INVALID_RECORD_STATE, "the group's "
                                     "share.renew.acknowledge.enable is false")
                plan.append((offset, record, ack))
                if planned is not None:
                    planned[offset] = ack
        if before is not None:
            for offset, record, _ in plan:
                if offset not in before:
                    before[offset] = (record.state, record.delivery_count, record.member,
                                      record.deadline_ms)
        changed: set[int] = set()
        for offset, record, ack in plan:
            if ack == RENEW:
                record.deadline_ms = now_ms + limits.lock_duration_ms
                continue
            if ack == RELEASE:
                self._release(record, limits, offset)
            elif ack == REJECT and limits.dead_letter:
                record.state = ARCHIVING
                record.member = None
                self.archiving_cause[offset] = CLIENT_REJECT
            else:
                record.state = ACK_TO_STATE[ack]
                record.member = None
            changed.add(offset)
        self.advance_start()
        return changed

    def _release(self, record: InFlight, limits: Limits, offset: int) -> None:
        record.member = None
        if record.delivery_count < limits.delivery_count_limit:
            record.state = AVAILABLE
        elif limits.dead_letter:
            record.state = ARCHIVING
            self.archiving_cause[offset] = DELIVERY_COUNT_EXCEEDED
        else:
            record.state = ARCHIVED

    def release_member(self, member: str, limits: Limits) -> set[int]:
        """A member's share session closed: its acquired records go back (or are archived)."""
        changed = set()
        for offset in self.acquired_by(member):
            self._release(self.records[offset], limits, offset)
            changed.add(offset)
        self.advance_start()
        return changed

    def expire_locks(self, now_ms: int, limits: Limits) -> set[int]:
        """Release every record whose acquisition lock has run out."""
        changed = set()
        for offset, record in self.records.items():
            if record.state == ACQUIRED and record.deadline_ms <= now_ms:
                self._release(record, limits, offset)
                changed.add(offset)
        self.advance_start()
        return changed

    # --- dead-letter queue (KIP-1191) ------------------------------------------------------------

    def archiving(self, offsets=None) -> list[tuple[int, int, str]]:
        """(offset, delivery count, cause) of the ARCHIVING records among ``offsets`` (all of
        them when None), in offset order. A record loaded in ARCHIVING has no cause remembered:
        as Kafka, the delivery limit when its count reached ``limit``, else a client reject
        (the caller passes the limit through :meth:`cause_of`)."""
        records = self.records
        wanted = records if offsets is None else sorted(o for o in offsets if o in records)
        return [(o, records[o].delivery_count, self.archiving_cause.get(o, ""))
                for o in wanted if records[o].state == ARCHIVING]

    def finish_archiving(self, offsets) -> set[int]:
        """The dead-letter write of ``offsets`` is over (written or given up): those still
        ARCHIVING become ARCHIVED; returns them (to persist)."""
        changed = set()
        for offset in offsets:
            record = self.records.get(offset)
            self.archiving_cause.pop(offset, None)
            if record is not None and record.state == ARCHIVING:
                record.state = ARCHIVED
                changed.add(offset)
        if changed:
            self.advance_start()
        return changed

    # --- undo (a write the persister refused) ----------------------------------------------

    def fields(self, offsets) -> dict[int, tuple | None]:
        """What ``offsets`` hold now (None for those no longer in flight), for :meth:`undo`."""
        return {offset: _fields(self.records.get(offset)) for offset in offsets}

    def undo(self, before: dict[int, tuple], changed: set[int], after: dict[int, tuple | None]
             ) -> None:
        """Put the ``changed`` offsets back as ``before`` had them, except those something else
        changed since (``after`` holds what the undone operation left): a released record that
        another member acquired meanwhile stays with that member."""
        reinserted = []
        for offset in changed:
            old = before.get(offset)
            record = self.records.get(offset)
            if old is None or _fields(record) != after[offset]:
                continue
            if record is None:
                record = self.records[offset] = InFlight(AVAILABLE)
                reinserted.append(offset)
            record.state, record.delivery_count, record.member, record.deadline_ms = old
            if record.state != ARCHIVING:
                self.archiving_cause.pop(offset, None)
        if reinserted:
            self.start_offset = min(self.start_offset, min(reinserted))
            self.records = dict(sorted(self.records.items()))  # keep offset order

    # --- start offset --------------------------------------------------------------------------

    def advance_start(self) -> bool:
        """Move the start offset past leading finished records; whether it moved."""
        before = self.start_offset
        records = self.records
        while self.start_offset < self.end_offset:
            record = records.get(self.start_offset)
            if record is None:  # a hole: jump to the lowest offset still in flight
                self.start_offset = next(iter(records), self.end_offset)
                continue
            if record.state not in TERMINAL:
                break
            del records[self.start_offset]
            self.start_offset += 1
        return self.start_offset != before

    def move_start_to(self, log_start_offset: int) -> bool:
        """Retention or DeleteRecords removed records below ``log_start_offset``: they can no
        longer be delivered, whatever their state (Kafka archives them too)."""
        if log_start_offset <= self.start_offset:
            return False
        for offset in [o for o in self.records if o < log_start_offset]:
            del self.records[offset]
            self.archiving_cause.pop(offset, None)
        self.start_offset = log_start_offset
        self.end_offset = max(self.end_offset, log_start_offset)
        self.advance_start()
        return True

    # --- persistence ---------------------------------------------------------------------------

    def persisted_batches(self, offsets: set[int]) -> list[StateBatch]:
        """The changed offsets still in flight, as runs of one state and delivery count. An
        ACQUIRED record is written as AVAILABLE: its lock does not survive a restart."""
        batches: list[StateBatch] = []
        records = self.records
        first = last = run = None
        for offset in sorted(o for o in offsets if o in records):
            record = records[offset]
            key = (AVAILABLE if record.state == ACQUIRED else record.state, record.delivery_count)
            if first is not None and last + 1 == offset and key == run:
                last = offset
                continue
            if first is not None:
                batches.append(StateBatch(first, last, *run))
            first = last = offset
            run = key
        if first is not None:
            batches.append(StateBatch(first, last, *run))
        return batches

    def delivery_complete_count(self) -> int:
        return sum(1 for r in self.records.values() if r.state in TERMINAL)


def _fields(record: InFlight | None) -> tuple | None:
    if record is None:
        return None
    return record.state, record.delivery_count, record.member, record.deadline_ms
