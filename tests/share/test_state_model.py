"""The share partition state, kept per batch, against a plain per-offset model (Hypothesis).

:class:`~kbroker.share.state.SharePartitionState` keeps runs of offsets (one per fetched batch,
cut when an operation covers part of one) with heaps of lock deadlines and AVAILABLE runs. The
model here keeps a dict of offset -> [state, delivery count, member, lock deadline] and applies
every rule offset by offset, scanning the whole window each time: slow and obviously right.

Random histories over a simulated log (batches of a producer's sizes, holes a compaction left,
control and aborted batches, a log start offset that retention moves) of fetches (either acquire
mode, with a record limit, a batch size and a cap on record locks), acknowledgements of any type
over ranges that cross batch borders (one type or one per offset, batches that touch), releases,
renewals, lock expiry on a fake clock, sessions closing, dead-letter archiving, an
acknowledgement the persister refuses (and its undo), and restarts that load what was persisted
(as the share coordinator keeps it) must give the same observable results on both: acquired
ranges with their delivery counts, errors, the changed offsets and the state batches persisted
for them, the start and end offsets, counts, deadlines, and every in-flight offset's fields.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kbroker.coordinator.share.persister import (ACKNOWLEDGED, ARCHIVED, ARCHIVING, AVAILABLE,
                                                 ReadResult, StateBatch)
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.share.state import (ACCEPT, ACQUIRED, CLIENT_REJECT, DELIVERY_COUNT_EXCEEDED, GAP,
                                 REJECT, RELEASE, RENEW, Acquired, FetchedBatch, Limits,
                                 SharePartitionState)

MEMBERS = ("a", "b", "c")
TERMINAL = (ACKNOWLEDGED, ARCHIVED)
LOCK_MS = 1000


class Model:
    """One share partition's in-flight records, one entry per offset, every rule stated over
    the whole window."""

    def __init__(self, start: int, state_epoch: int = 0):
        self.start = start
        self.end = start
        self.state_epoch = state_epoch
        self.recs: dict[int, list] = {}  # offset -> [state, delivery count, member, deadline]
        self.cause: dict[int, str] = {}

    @classmethod
    def load(cls, read: ReadResult, start: int) -> "Model":
        model = cls(start, read.state_epoch)
        for batch in sorted(read.batches, key=lambda b: b.first_offset):
            for offset in range(model.end, batch.first_offset):
                model.recs[offset] = [AVAILABLE, 0, None, 0]
            for offset in range(batch.first_offset, batch.last_offset + 1):
                model.recs[offset] = [batch.delivery_state, batch.delivery_count, None, 0]
            model.end = batch.last_offset + 1
        model.advance()
        return model

    def offsets(self) -> list[int]:
        return sorted(self.recs)

    def next_fetch(self) -> int:
        return min((o for o, r in self.recs.items() if r[0] == AVAILABLE), default=self.end)

    def count(self, *states) -> int:
        return sum(1 for r in self.recs.values() if r[0] in states)

    def deadline(self) -> int | None:
        return min((r[3] for r in self.recs.values() if r[0] == ACQUIRED), default=None)

    def held_by(self, member) -> list[int]:
        return [o for o in self.offsets() if self.recs[o][0] == ACQUIRED
                and self.recs[o][2] == member]

    def advance(self) -> None:
        while self.start < self.end:
            if self.start not in self.recs:
                self.start = min(self.recs, default=self.end)
                continue
            if self.recs[self.start][0] not in TERMINAL:
                break
            del self.recs[self.start]
            self.start += 1

    def move_start(self, log_start: int) -> bool:
        if log_start <= self.start:
            return False
        for offset in [o for o in self.recs if o < log_start]:
            del self.recs[offset]
            self.cause.pop(offset, None)
        self.start = log_start
        self.end = max(self.end, log_start)
        self.advance()
        return True

    def acquire(self, member, batches, max_records, record_limit, limits, now, batch_size):
        got: list[int] = []
        changed: set[int] = set()
        limit = limits.delivery_count_limit
        throttle_from = max(2, -(-limit // 2))
        cap = None
        room = limits.max_record_locks - len(self.recs)
        taken_new = 0
        cursor = self.next_fetch()
        stop = False
        for batch in batches:
            if len(got) >= max_records or stop:
                break
            if batch.last_offset < self.start:
                continue
            for offset in range(cursor, batch.base_offset):  # gone from the log
                if offset in self.recs and self.recs[offset][0] == AVAILABLE:
                    self.recs[offset][0] = ARCHIVED
                    changed.add(offset)
            cursor = batch.last_offset + 1
            self.end = max(self.end, batch.base_offset)
            before = bool(got)
            first = max(batch.base_offset, self.start)
            known = [o for o in range(first, min(batch.last_offset, self.end - 1) + 1)
                     if o in self.recs]
            new = list(range(max(first, self.end), batch.last_offset + 1))
            if new and taken_new >= room:
                new, stop = [], True
                if not known:
                    break
            for offset in known:
                if record_limit and len(got) >= max_records:
                    break
                rec = self.recs[offset]
                if rec[0] != AVAILABLE:
                    continue
                if not batch.deliverable:
                    rec[0] = ARCHIVED
                    changed.add(offset)
                    continue
                if (rec[1] >= throttle_from and before) or \
                        (limit > 2 and rec[1] == limit - 1 and got):
                    stop = True
                    break
                if rec[1] >= throttle_from and cap is None:
                    size = batch.last_offset - batch.base_offset + 1
                    cap = max(1, size >> (rec[1] - throttle_from + 1))
                rec[:] = [ACQUIRED, rec[1] + 1, member, now + limits.lock_duration_ms]
                got.append(offset)
                if cap is not None and len(got) >= cap:
                    stop = True
                    break
            if stop or not new:
                continue
            taken = new
            if not batch.deliverable:
                for offset in new:
                    self.recs[offset] = [ARCHIVED, 0, None, 0]
                changed.update(new)
            else:
                if record_limit:
                    taken = taken[:max(0, max_records - len(got))]
                if cap is not None:
                    taken = taken[:max(0, cap - len(got))]
                for offset in taken:
                    self.recs[offset] = [ACQUIRED, 1, member, now + limits.lock_duration_ms]
                got.extend(taken)
                if len(taken) < len(new):
                    stop = True
            if taken:
                self.end = taken[-1] + 1
                taken_new += len(taken)
        if changed:
            self.advance()
        cuts = {b.base_offset for b in batches} if batch_size > 0 and not record_limit else set()
        ranges: list[Acquired] = []
        for offset in got:
            count = self.recs[offset][1]
            last = ranges[-1] if ranges else None
            if last and last.last_offset + 1 == offset and last.delivery_count == count \
                    and not (offset in cuts and offset - last.first_offset >= batch_size):
                ranges[-1] = Acquired(last.first_offset, offset, count)
            else:
                ranges.append(Acquired(offset, offset, count))
        return ranges, changed

    def release(self, offset, limits) -> None:
        rec = self.recs[offset]
        rec[2] = None
        if rec[1] < limits.delivery_count_limit:
            rec[0] = AVAILABLE
        elif limits.dead_letter:
            rec[0] = ARCHIVING
            self.cause[offset] = DELIVERY_COUNT_EXCEEDED
        else:
            rec[0] = ARCHIVED

    def acknowledge(self, member, batches, limits, now, before=None) -> set[int]:
        plan = []
        seen: dict[int, int] = {}
        for first, last, types in batches:
            if first >= self.end or last >= self.end:
                raise KafkaError(Errors.INVALID_REQUEST, f"offsets {first}-{last} reach past "
                                 f"the last offset ever delivered ({self.end - 1})")
            for offset in range(max(first, self.start), last + 1):
                if offset not in self.recs:
                    continue
                rec = self.recs[offset]
                ack = types[0] if len(types) == 1 else types[offset - first]
                if rec[0] != ACQUIRED or seen.get(offset, RENEW) != RENEW:
                    raise KafkaError(Errors.INVALID_RECORD_STATE,
                                     f"offset {offset} is not acquired")
                if rec[2] != member:
                    raise KafkaError(Errors.INVALID_RECORD_STATE,
                                     f"offset {offset} is acquired by another member")
                if ack == RENEW and not limits.renew_enabled:
                    raise KafkaError(Errors.INVALID_RECORD_STATE, "the group's "
                                     "share.renew.acknowledge.enable is false")
                seen[offset] = ack
                plan.append((offset, ack))
        changed = set()
        for offset, ack in plan:
            rec = self.recs[offset]
            if before is not None:
                before.setdefault(offset, tuple(rec))
            if ack == RENEW:
                rec[3] = now + limits.lock_duration_ms
                continue
            changed.add(offset)
            if ack == RELEASE:
                self.release(offset, limits)
                continue
            rec[2] = None
            if ack == REJECT and limits.dead_letter:
                rec[0] = ARCHIVING
                self.cause[offset] = CLIENT_REJECT
            else:
                rec[0] = ACKNOWLEDGED if ack == ACCEPT else ARCHIVED
        self.advance()
        return changed

    def release_member(self, member, limits) -> set[int]:
        changed = set(self.held_by(member))
        for offset in changed:
            self.release(offset, limits)
        self.advance()
        return changed

    def expire(self, now, limits) -> set[int]:
        changed = {o for o, r in self.recs.items() if r[0] == ACQUIRED and r[3] <= now}
        for offset in changed:
            self.release(offset, limits)
        self.advance()
        return changed

    def archiving(self, offsets=None):
        wanted = self.offsets() if offsets is None else sorted(set(offsets) & set(self.recs))
        return [(o, self.recs[o][1], self.cause.get(o, "")) for o in wanted
                if self.recs[o][0] == ARCHIVING]

    def finish_archiving(self, offsets) -> set[int]:
        changed = set()
        for offset in offsets:
            self.cause.pop(offset, None)
            if offset in self.recs and self.recs[offset][0] == ARCHIVING:
                self.recs[offset][0] = ARCHIVED
                changed.add(offset)
        if changed:
            self.advance()
        return changed

    def fields(self, offsets):
        return {o: tuple(self.recs[o]) if o in self.recs else None for o in offsets}

    def undo(self, before, changed, after) -> None:
        for offset in changed:
            old = before.get(offset)
            now = tuple(self.recs[offset]) if offset in self.recs else None
            if old is None or now != after[offset]:
                continue
            if offset not in self.recs:
                self.start = min(self.start, offset)
            self.recs[offset] = list(old)
            if old[0] != ARCHIVING:
                self.cause.pop(offset, None)

    def persisted(self, offsets) -> list[StateBatch]:
        """State batches of one (state, count) per offset, joined: as written to the
        persister (an acquired record is written AVAILABLE)."""
        out: list[StateBatch] = []
        for offset in sorted(set(offsets) & set(self.recs)):
            state, count = self.recs[offset][:2]
            state = AVAILABLE if state == ACQUIRED else state
            last = out[-1] if out else None
            if last and last.last_offset + 1 == offset and \
                    (last.delivery_state, last.delivery_count) == (state, count):
                out[-1] = StateBatch(last.first_offset, offset, state, count)
            else:
                out.append(StateBatch(offset, offset, state, count))
        return out


def outcome(call):
    """What an operation returned, or the error it raised (code and message)."""
    try:
        return "ok", call()
    except KafkaError as exc:
        return "error", exc.error, exc.message


ack_types = st.sampled_from([ACCEPT, RELEASE, REJECT, GAP, RENEW])


class SharePartitionMachine(RuleBasedStateMachine):
    @initialize(limit=st.sampled_from([2, 3, 5, 6]), locks=st.sampled_from([6, 20, 200]),
                renew=st.booleans(), dead_letter=st.booleans(), start=st.integers(0, 3))
    def setup(self, limit, locks, renew, dead_letter, start):
        self.limits = Limits(delivery_count_limit=limit, max_record_locks=locks,
                             lock_duration_ms=LOCK_MS, renew_enabled=renew,
                             dead_letter=dead_letter)
        self.real = SharePartitionState(start)
        self.model = Model(start)
        self.log: list[FetchedBatch] = []  # the partition's batches, in offset order
        self.log_start = self.log_end = start
        self.now = 0
        # what the share coordinator keeps: the start offset and offset -> (state, count)
        self.stored_start = start
        self.stored: dict[int, tuple[int, int]] = {}

    # --- the log -------------------------------------------------------------------------------

    @rule(size=st.sampled_from([1, 1, 2, 3, 5, 8]), hole=st.sampled_from([0, 0, 0, 1, 4]),
          deliverable=st.sampled_from([True, True, True, False]))
    def produce(self, size, hole, deliverable):
        base = self.log_end + hole  # a hole: records compaction removed
        self.log.append(FetchedBatch(base, base + size - 1, deliverable))
        self.log_end = base + size

    @rule(by=st.integers(1, 6))
    def retention(self, by):
        self.log_start = min(self.log_end, self.log_start + by)
        self.log = [b for b in self.log if b.last_offset >= self.log_start]

    # --- operations on both ----------------------------------------------------------------------

    def both(self, operation, *args, persist=True):
        real = outcome(lambda: getattr(self.real, operation[0])(*args))
        model = outcome(lambda: getattr(self.model, operation[1])(*args))
        assert real == model, (operation, args)
        if real[0] == "ok" and persist:
            changed = real[1][1] if operation[0] == "acquire" else real[1]
            self.persist(changed)
        return real

    def persist(self, changed) -> None:
        written = self.real.persisted_batches(changed)
        assert written == self.model.persisted(changed)
        self.stored_start = self.real.start_offset
        for batch in written:
            for offset in range(batch.first_offset, batch.last_offset + 1):
                self.stored[offset] = (batch.delivery_state, batch.delivery_count)
        self.stored = {o: v for o, v in self.stored.items() if o >= self.stored_start}

    @rule(member=st.sampled_from(MEMBERS), batches=st.integers(1, 4),
          max_records=st.integers(1, 20), record_limit=st.booleans(),
          batch_size=st.sampled_from([0, 0, 2, 5]))
    def fetch(self, member, batches, max_records, record_limit, batch_size):
        # as SharePartition.read_batches: the log start first, then the log from the next
        # fetch offset (the batch holding it, and those after)
        assert self.real.move_start_to(self.log_start) == self.model.move_start(self.log_start)
        offset = self.real.next_fetch_offset()
        read = [b for b in self.log if b.last_offset >= offset][:batches]
        self.both(("acquire", "acquire"), member, read, max_records, record_limit,
                  self.limits, self.now, batch_size)

    @rule(member=st.sampled_from(MEMBERS), data=st.data())
    def acknowledge(self, member, data):
        self.both(("acknowledge", "acknowledge"), member, self.ack_batches(data), self.limits,
                  self.now)

    def ack_batches(self, data) -> list[tuple[int, int, list[int]]]:
        """Ordered ranges (touching allowed, as the handler's check allows) around the window,
        crossing batch borders, each with one type or one per offset."""
        low = max(0, self.real.start_offset - 2)
        cursor = data.draw(st.integers(low, self.real.end_offset + 1))
        batches = []
        for _ in range(data.draw(st.integers(1, 3))):
            first = cursor + data.draw(st.integers(-1 if batches else 0, 3))
            last = first + data.draw(st.integers(0, 9))
            if data.draw(st.booleans()):
                types = [data.draw(ack_types)]
            else:
                types = data.draw(st.lists(ack_types, min_size=last - first + 1,
                                           max_size=last - first + 1))
            batches.append((first, last, types))
            cursor = last + 1
        return batches

    @rule(member=st.sampled_from(MEMBERS))
    def session_closes(self, member):
        self.both(("release_member", "release_member"), member, self.limits)

    @rule(ms=st.sampled_from([0, 1, 300, 999, 1000, 2500]))
    def time_passes(self, ms):
        self.now += ms
        assert self.real.next_deadline_ms() == self.model.deadline()
        self.both(("expire_locks", "expire"), self.now, self.limits)

    @rule(data=st.data())
    def dead_letters_written(self, data):
        archiving = [entry[0] for entry in self.real.archiving()]
        extra = data.draw(st.lists(st.integers(0, self.real.end_offset + 2), max_size=2))
        offsets = data.draw(st.lists(st.sampled_from(archiving), unique=True)) \
            if archiving else []
        self.both(("finish_archiving", "finish_archiving"), offsets + extra)

    @rule(member=st.sampled_from(MEMBERS), other=st.sampled_from(MEMBERS),
          meanwhile=st.booleans(), data=st.data())
    def persister_refuses(self, member, other, meanwhile, data):
        """As the manager: remember, acknowledge, note what it left; maybe another member
        fetches meanwhile; the write fails, so undo."""
        batches = self.ack_batches(data)
        before_real, before_model = {}, {}
        real = outcome(lambda: self.real.acknowledge(member, batches, self.limits, self.now,
                                                     before_real))
        model = outcome(lambda: self.model.acknowledge(member, batches, self.limits,
                                                       self.now, before_model))
        assert real == model and before_real == before_model
        if real[0] != "ok":
            return
        changed = real[1]
        after = self.real.fields(changed)
        assert after == self.model.fields(changed)
        if meanwhile:
            self.fetch(other, 2, 10, False, 0)
        self.real.undo(before_real, changed, after)
        self.model.undo(before_model, changed, after)

    @rule()
    def restart(self):
        """A new leader loads what the share coordinator kept (acquired records are lost)."""
        batches: list[StateBatch] = []
        for offset in sorted(self.stored):
            state, count = self.stored[offset]
            last = batches[-1] if batches else None
            if last and last.last_offset + 1 == offset \
                    and (last.delivery_state, last.delivery_count) == (state, count):
                batches[-1] = StateBatch(last.first_offset, offset, state, count)
            else:
                batches.append(StateBatch(offset, offset, state, count))
        read = ReadResult(state_epoch=1, start_offset=self.stored_start, batches=batches)
        self.real = SharePartitionState.from_persisted(read, self.stored_start)
        self.model = Model.load(read, self.stored_start)

    # --- what both must agree on after every step ----------------------------------------------

    @invariant()
    def same_state(self):
        real, model = self.real, self.model
        assert (real.start_offset, real.end_offset) == (model.start, model.end)
        assert real.next_fetch_offset() == model.next_fetch()
        assert real.has_available() == (model.next_fetch() < model.end)
        assert real.in_flight_count() == len(model.recs)
        assert real.acquired_count() == model.count(ACQUIRED)
        assert real.unfinished_count() == model.count(AVAILABLE, ACQUIRED, ARCHIVING)
        assert real.delivery_complete_count() == model.count(ACKNOWLEDGED, ARCHIVED)
        assert real.next_deadline_ms() == model.deadline()
        for member in MEMBERS:
            assert real.acquired_by(member) == model.held_by(member)
        records = real.records
        assert list(records) == model.offsets()
        assert {o: (r.state, r.delivery_count, r.member, r.deadline_ms)
                for o, r in records.items()} == {o: tuple(r) for o, r in model.recs.items()}
        assert real.archiving() == model.archiving()
        assert real.archiving_cause == model.cause
        everything = set(range(model.start - 1, model.end + 1))
        assert real.persisted_batches(everything) == model.persisted(everything)
        every_other = set(range(model.start - 1, model.end + 1, 2))  # runs taken in part
        assert real.persisted_batches(every_other) == model.persisted(every_other)
        assert real.fields(every_other) == model.fields(every_other)
        assert real.archiving(every_other) == model.archiving(every_other)


SharePartitionMachine.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
test_state_against_a_per_offset_model = SharePartitionMachine.TestCase
