"""The producer state of a partition against a simple model, over random histories (Hypothesis).

The model keeps every write the partition accepted, per producer, and answers from that history
what the producer may send next (the rules of :mod:`kbroker.log.producer_state`, stated over the
history instead of a five-batch window): retries of one of the last five batches at the current
epoch are duplicates; an older epoch is a zombie; a transactional batch that opens a transaction
needs the guard of the verification in progress; sequences continue without a gap at an epoch,
start at 0 at a new one, and are free only for a producer the partition does not know; a v2
verification wants sequence 0 from a producer with no batch and the lowest waiting sequence
first; markers need a newer epoch (v2) or not an older one (v1), and a coordinator epoch that is
not older. Random sequences of appends, markers, verifications, epoch bumps, expirations and
restarts (snapshot, then replay of the written log, as recovery does) must get exactly the
model's verdicts, and the accepted writes must keep every producer's sequences gapless per epoch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kbroker.log.producer_state import (INT32_MAX, UNVERIFIED, VERIFICATION_OFF,
                                        ProducerStateManager, decode_snapshot, encode_snapshot)
from kbroker.protocol.errors import Errors, KafkaError

EXPIRATION_MS = 1000
PIDS = (7, 8)


class Header:
    """What replay reads of a batch: its header fields."""

    def __init__(self, producer_id, epoch, base_offset, first_seq, last_seq, timestamp,
                 transactional, control=False):
        self.producer_id = producer_id
        self.producer_epoch = epoch
        self.base_offset = base_offset
        self.base_sequence = first_seq
        self.last_sequence = last_seq
        self.last_offset = base_offset + (last_seq - first_seq if not control else 0)
        self.max_timestamp = timestamp
        self.is_transactional = transactional
        self.is_control = control


@dataclass
class Forgotten:
    """An expiry in the written history: the producer starts afresh after it (every replica
    expires it the same way)."""

    producer_id: int


@dataclass
class Written:
    epoch: int
    first_seq: int = -1
    last_seq: int = -1
    transactional: bool = False
    marker: bool = False
    at: int = 0


@dataclass
class ModelProducer:
    history: list[Written] = field(default_factory=list)   # accepted writes, oldest first
    forgotten_before: int = 0   # history[:forgotten_before] expired (or lost in a restart)
    coordinator_epoch: int = -1
    verification: dict | None = None   # {"guard", "lowest", "epoch", "v2", "at"}
    ended_guard: object = None   # the guard of the last verification a write ended

    def known(self) -> list[Written]:
        return self.history[self.forgotten_before:]

    @property
    def epoch(self) -> int | None:
        known = self.known()
        return max(w.epoch for w in known) if known else None

    def batches_at_epoch(self) -> list[Written]:
        epoch, out = self.epoch, []
        for w in self.known():
            if w.epoch != epoch:
                continue
            if w.marker:
                continue
            out.append(w)
        # A marker that moved the producer to this epoch came before its batches, so every
        # batch at the epoch counts.
        return out

    def open_txn(self) -> bool:
        for w in reversed(self.known()):
            if w.marker:
                return False
            if w.transactional:
                return True
        return False

    def last_heard(self) -> int:
        return self.known()[-1].at if self.known() else -1


def expected_append(p: ModelProducer, epoch, first, last, transactional, verification):
    if p.known():
        if epoch == p.epoch and any(b.first_seq == first and b.last_seq == last
                                    for b in p.batches_at_epoch()[-5:]):
            return "duplicate"
        if epoch < p.epoch:
            return Errors.INVALID_PRODUCER_EPOCH
    ongoing = p.open_txn() and epoch == p.epoch
    v = p.verification
    if transactional and not ongoing and verification is not VERIFICATION_OFF and (
            v is None or verification is not v["guard"]):
        return Errors.INVALID_TXN_STATE
    batches = p.batches_at_epoch() if p.known() else []
    if v is not None:
        if v["v2"] and first != 0 and not batches:
            return Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
        if first > v["lowest"]:
            return Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    if p.known():
        if epoch != p.epoch:
            if first != 0:
                return Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
        else:
            last_seq = batches[-1].last_seq if batches else -1
            if not (first == last_seq + 1 or (first == 0 and last_seq == INT32_MAX)):
                return Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
        if not transactional and p.open_txn() and epoch == p.epoch:
            return Errors.INVALID_TXN_STATE
    return "appended"


def expected_marker(p: ModelProducer, epoch, coordinator_epoch, tv):
    if p.known():
        current = p.epoch
        if tv >= 2:
            if epoch < current or (epoch == current and p.open_txn()):
                return Errors.INVALID_PRODUCER_EPOCH
        elif epoch < current:
            return Errors.INVALID_PRODUCER_EPOCH
        if coordinator_epoch < p.coordinator_epoch:
            return Errors.TRANSACTION_COORDINATOR_FENCED
    return "appended"


class ProducerStateMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.state = ProducerStateManager("/nonexistent", "t-0")
        self.model = {pid: ModelProducer() for pid in PIDS}
        self.log: list = []   # every accepted write (a Header), as recovery would read it
        self.offset = 0
        self.now = 0

    # --- the producer's side -----------------------------------------------------------------

    def _epoch(self, p: ModelProducer, which: str) -> int:
        current = p.epoch if p.epoch is not None else 0
        return {"same": current, "bump": current + 1, "older": max(current - 1, 0)}[which]

    def _sequence(self, p: ModelProducer, epoch: int, which: str, anything: int) -> int:
        batches = p.batches_at_epoch() if p.known() and epoch == p.epoch else []
        last = batches[-1] if batches else None
        return {"next": last.last_seq + 1 if last else 0,
                "retry": last.first_seq if last else 0,
                "zero": 0,
                "gap": (last.last_seq + 2) if last else 1,
                "any": anything}[which]

    @rule(pid=st.sampled_from(PIDS), epoch_choice=st.sampled_from(["same", "bump", "older"]),
          seq_choice=st.sampled_from(["next", "next", "retry", "zero", "gap", "any"]),
          anything=st.integers(0, 12), count=st.integers(1, 3), transactional=st.booleans(),
          hand=st.sampled_from(["current", "current", "none", "off", "stale", "ended"]))
    def append(self, pid, epoch_choice, seq_choice, anything, count, transactional, hand):
        p = self.model[pid]
        epoch = self._epoch(p, epoch_choice)
        first = self._sequence(p, epoch, seq_choice, anything)
        if seq_choice == "retry" and p.known():
            batches = p.batches_at_epoch()
            if batches:
                count = batches[-1].last_seq - batches[-1].first_seq + 1
        p = self.model[pid]
        verification = {"current": p.verification["guard"] if p.verification else UNVERIFIED,
                        "none": UNVERIFIED, "off": VERIFICATION_OFF,
                        "stale": object(),
                        # a confirmation that arrives after its verification ended (a marker
                        # meanwhile): the hanging transaction KIP-890 prevents
                        "ended": p.ended_guard or object()}[hand]
        last = first + count - 1
        want = expected_append(p, epoch, first, last, transactional, verification)
        try:
            duplicate = self.state.check(pid, epoch, first, last, self.offset, transactional,
                                         verification)
        except KafkaError as exc:
            assert exc.error == want, (want, exc)
            return
        if duplicate is not None:
            assert want == "duplicate"
            return
        assert want == "appended", want
        self.now += 1
        self.state.update(pid, epoch, last, self.offset, self.offset + count - 1, self.now,
                          transactional)
        self.log.append(Header(pid, epoch, self.offset, first, last, self.now, transactional))
        self.offset += count
        p.history.append(Written(epoch, first, last, transactional, at=self.now))
        if transactional:
            p.verification = None

    @rule(pid=st.sampled_from(PIDS), epoch_choice=st.sampled_from(["same", "bump", "older"]),
          seq_choice=st.sampled_from(["next", "zero", "gap", "any"]), anything=st.integers(0, 12),
          v2=st.booleans())
    def start_verification(self, pid, epoch_choice, seq_choice, anything, v2):
        p = self.model[pid]
        epoch = self._epoch(p, epoch_choice)
        first = self._sequence(p, epoch, seq_choice, anything)
        if p.known() and epoch < p.epoch:
            want = Errors.INVALID_PRODUCER_EPOCH
        elif p.open_txn() and epoch == p.epoch:
            want = None
        else:
            want = "guard"
        try:
            guard = self.state.start_verification(pid, first, epoch, v2, self.now)
        except KafkaError as exc:
            assert exc.error == want
            return
        if want is None:
            assert guard is None
            return
        assert want == "guard" and guard is not None
        v = p.verification
        if v is None:
            p.verification = {"guard": guard, "lowest": first, "epoch": epoch, "v2": v2,
                              "at": self.now}
        else:
            assert guard is v["guard"]
            if epoch == v["epoch"]:
                v["lowest"] = min(v["lowest"], first)
            elif epoch > v["epoch"]:
                v["epoch"], v["lowest"] = epoch, first

    # --- the coordinator's side --------------------------------------------------------------

    @rule(pid=st.sampled_from(PIDS), bump=st.integers(0, 1), commit=st.booleans(),
          coordinator_epoch=st.integers(0, 2), tv=st.sampled_from([0, 2]))
    def marker(self, pid, bump, commit, coordinator_epoch, tv):
        p = self.model[pid]
        epoch = (p.epoch if p.epoch is not None else 0) + bump
        want = expected_marker(p, epoch, coordinator_epoch, tv)
        try:
            self.state.check_marker(pid, epoch, coordinator_epoch, tv)
        except KafkaError as exc:
            assert exc.error == want, (want, exc)
            return
        assert want == "appended", want
        self.now += 1
        header = Header(pid, epoch, self.offset, -1, -1, self.now, True, control=True)
        completed = self.state.replay(header, (not commit, coordinator_epoch))
        assert (completed is not None) == p.open_txn()
        self.log.append(header)
        self.offset += 1
        p.history.append(Written(epoch, marker=True, at=self.now))
        p.coordinator_epoch = coordinator_epoch
        v = p.verification
        if v is not None and not (v["v2"] and v["epoch"] == epoch):
            p.verification, p.ended_guard = None, v["guard"]

    # --- time and restarts -------------------------------------------------------------------

    @rule(ms=st.integers(1, 2 * EXPIRATION_MS))
    def expire(self, ms):
        self.now += ms
        self.state.remove_expired(self.now, EXPIRATION_MS)
        for pid, p in self.model.items():
            if p.known() and not p.open_txn() and self.now - p.last_heard() >= EXPIRATION_MS:
                p.forgotten_before = len(p.history)
                p.coordinator_epoch = -1
                self.log.append(Forgotten(pid))
            if p.verification is not None and self.now - p.verification["at"] >= EXPIRATION_MS:
                p.verification = None

    @rule()
    def restart_from_snapshot_and_log(self):
        """A clean restart: the snapshot is loaded and nothing after it needs replay; the state
        keeps each producer's last batch (so only its retry is a duplicate) and forgets
        verifications."""
        snapshot = encode_snapshot(self.state.producers.values())
        self.state = ProducerStateManager("/nonexistent", "t-0")
        self.state.producers = {e.producer_id: e for e in decode_snapshot(snapshot)}
        self.state._rebuild_ongoing()
        for p in self.model.values():
            p.verification = None
            batches = p.batches_at_epoch() if p.known() else []
            # Only the last batch survives a snapshot: drop older ones from what counts as
            # "the last five" by forgetting them from the model's window.
            if len(batches) > 1:
                keep_from = p.history.index(batches[-1])
                older_batches = [w for w in p.history[p.forgotten_before:keep_from]
                                 if not w.marker and w.epoch == p.epoch]
                for w in older_batches:
                    w.first_seq = w.last_seq = -(10 ** 6)  # no longer a duplicate candidate

    # --- invariants --------------------------------------------------------------------------

    @invariant()
    def sequences_are_gapless_per_epoch(self):
        last: dict = {}
        for h in self.log:
            if isinstance(h, Forgotten):
                last = {k: v for k, v in last.items() if k[0] != h.producer_id}
                continue
            if h.is_control:
                continue
            key = (h.producer_id, h.producer_epoch)
            if key in last:
                prev = last[key]
                assert h.base_sequence == prev + 1 or (h.base_sequence == 0 and prev == INT32_MAX), \
                    f"producer {h.producer_id} epoch {h.producer_epoch}: {prev} then " \
                    f"{h.base_sequence}"
            last[key] = h.last_sequence

    @invariant()
    def replaying_the_log_rebuilds_the_leaders_view(self):
        """A follower (or recovery without snapshot) replays the written batches; it must agree
        with the leader on every producer it has not expired: epoch, last sequence, open
        transaction."""
        follower = ProducerStateManager("/nonexistent", "t-0")
        for h in self.log:
            if isinstance(h, Forgotten):
                follower.producers.pop(h.producer_id, None)
                follower.ongoing_txns.pop(h.producer_id, None)
                continue
            follower.replay(h, (False, 0) if h.is_control else None)
        for pid, entry in self.state.producers.items():
            replayed = follower.producers[pid]
            assert (replayed.producer_epoch, replayed.current_txn_first_offset) == \
                (entry.producer_epoch, entry.current_txn_first_offset)
            if entry.batches:
                assert replayed.last_seq == entry.last_seq


ProducerStateMachine.TestCase.settings = settings(max_examples=300, stateful_step_count=40,
                                                  deadline=None)
TestProducerState = ProducerStateMachine.TestCase
