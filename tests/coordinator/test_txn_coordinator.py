"""The transaction coordinator's state machine, driven without a broker: each operation's
records are replayed into the shard as the runtime would (replay is the only state change)."""

import itertools

import pytest

from kbroker.coordinator.txn import operations as ops
from kbroker.coordinator.txn import records as rec
from kbroker.coordinator.txn.shard import TxnShard
from kbroker.coordinator.txn.state import (VALID_PREVIOUS, IllegalTransition, TxnMetadata,
                                           TxnState)
from kbroker.protocol.errors import Errors

S = TxnState
MAX_TIMEOUT = 900_000


class Markers:
    def __init__(self):
        self.sent = []

    def send_markers(self, shard, prepared):
        self.sent.append(prepared)


@pytest.fixture
def shard():
    return TxnShard(runtime=None, partition_index=0, coordinator=Markers())


ids = itertools.count(1000)


def run(shard, result):
    """Apply a result as the runtime does: replay its records, then on_committed."""
    for offset, (key, value) in enumerate(result.records):
        shard.replay(offset, key, value)
    if result.on_committed is not None:
        result.on_committed()
    return result.response


def end(shard, result):
    """EndTxn's error (its response is (error, producer id, epoch))."""
    return run(shard, result)[0]


def init(shard, tid="t", timeout=60_000, pid=-1, epoch=-1):
    return run(shard, ops.init_producer_id(shard, tid, timeout, pid, epoch, MAX_TIMEOUT,
                                           lambda: next(ids)))


def test_records_round_trip_in_kafka_format():
    m = TxnMetadata("t", 7, 3, 60_000, S.ONGOING, frozenset({("a", 0), ("a", 2), ("b", 1)}),
                    123, 456)
    assert rec.decode_key(rec.key("t")) == "t"
    assert rec.value(m)[:2] == b"\x00\x01"  # value version 1, as Kafka 4.3 and 4.4 write
    assert rec.decode_value("t", rec.value(m)) == m
    empty = TxnMetadata("t", 7, 4, 60_000, S.EMPTY, txn_last_update_timestamp=9)
    assert rec.decode_value("t", rec.value(empty)).partitions == frozenset()


def test_transition_table_is_kafkas():
    assert VALID_PREVIOUS[S.PREPARE_COMMIT] == {S.ONGOING}
    assert VALID_PREVIOUS[S.COMPLETE_ABORT] == {S.PREPARE_ABORT}
    m = TxnMetadata("t", 1, 0, 1000, S.EMPTY)
    with pytest.raises(IllegalTransition):
        m.transition(S.PREPARE_COMMIT)


def test_init_new_id_then_epoch_bumps(shard):
    error, pid, epoch = init(shard)
    assert (error, epoch) == (Errors.NONE, 0)
    assert init(shard) == (Errors.NONE, pid, 1)
    assert shard.txns["t"].state is S.EMPTY


def test_init_checks_the_timeout(shard):
    assert init(shard, timeout=MAX_TIMEOUT + 1)[0] is Errors.INVALID_TRANSACTION_TIMEOUT
    assert init(shard, timeout=0)[0] is Errors.INVALID_TRANSACTION_TIMEOUT


def test_commit_path(shard):
    _, pid, epoch = init(shard)
    assert run(shard, ops.add_partitions(shard, "t", pid, epoch, [("a", 0)])) is Errors.NONE
    assert shard.txns["t"].state is S.ONGOING
    # Adding a partition already in the transaction writes nothing.
    assert not ops.add_partitions(shard, "t", pid, epoch, [("a", 0)]).records
    assert end(shard, ops.end_txn(shard, "t", pid, epoch, True)) is Errors.NONE
    assert shard.txns["t"].state is S.PREPARE_COMMIT
    assert shard.coordinator.sent[-1].partitions == {("a", 0)}
    # While the markers are in flight.
    assert run(shard, ops.add_partitions(shard, "t", pid, epoch, [("a", 1)])) \
        is Errors.CONCURRENT_TRANSACTIONS
    assert end(shard, ops.end_txn(shard, "t", pid, epoch, True)) is Errors.CONCURRENT_TRANSACTIONS
    assert end(shard, ops.end_txn(shard, "t", pid, epoch, False)) is Errors.INVALID_TXN_STATE
    assert init(shard)[0] is Errors.CONCURRENT_TRANSACTIONS
    run(shard, ops.complete(shard, shard.coordinator.sent[-1]))
    assert shard.txns["t"].state is S.COMPLETE_COMMIT and not shard.txns["t"].partitions
    assert end(shard, ops.end_txn(shard, "t", pid, epoch, True)) is Errors.NONE  # a retry
    assert end(shard, ops.end_txn(shard, "t", pid, epoch, False)) is Errors.INVALID_TXN_STATE


def test_wrong_ids_and_epochs(shard):
    _, pid, epoch = init(shard)
    assert run(shard, ops.add_partitions(shard, "t", pid + 1, epoch, [("a", 0)])) \
        is Errors.INVALID_PRODUCER_ID_MAPPING
    assert run(shard, ops.add_partitions(shard, "nope", pid, epoch, [("a", 0)])) \
        is Errors.INVALID_PRODUCER_ID_MAPPING
    assert run(shard, ops.add_partitions(shard, "t", pid, epoch - 1, [("a", 0)])) \
        is Errors.PRODUCER_FENCED
    assert end(shard, ops.end_txn(shard, "t", pid, epoch, True)) is Errors.INVALID_TXN_STATE
    assert init(shard, pid=pid + 5, epoch=epoch)[0] is Errors.PRODUCER_FENCED


def test_new_instance_fences_an_open_transaction(shard):
    _, pid, epoch = init(shard)
    run(shard, ops.add_partitions(shard, "t", pid, epoch, [("a", 0)]))
    assert init(shard)[0] is Errors.CONCURRENT_TRANSACTIONS
    fenced = shard.txns["t"]
    assert (fenced.state, fenced.producer_epoch) == (S.PREPARE_ABORT, epoch + 1)
    assert end(shard, ops.end_txn(shard, "t", pid, epoch, True)) is Errors.PRODUCER_FENCED
    run(shard, ops.complete(shard, shard.coordinator.sent[-1]))
    assert init(shard) == (Errors.NONE, pid, epoch + 2)


def test_verify_only(shard):
    _, pid, epoch = init(shard)
    run(shard, ops.add_partitions(shard, "t", pid, epoch, [("a", 0)]))
    assert ops.verify_partitions(shard, "t", pid, epoch, [("a", 0), ("a", 1)]) == {
        ("a", 0): Errors.NONE, ("a", 1): Errors.TRANSACTION_ABORTABLE}


def test_timed_out_transactions_are_aborted(shard):
    _, pid, epoch = init(shard, timeout=1000)
    run(shard, ops.add_partitions(shard, "t", pid, epoch, [("a", 0)]))
    start = shard.txns["t"].txn_start_timestamp
    assert run(shard, ops.abort_timed_out(shard, start + 999)) == 0
    assert run(shard, ops.abort_timed_out(shard, start + 1000)) == 1
    assert shard.txns["t"].state is S.PREPARE_ABORT
    assert shard.txns["t"].producer_epoch == epoch + 1


def test_state_is_rebuilt_by_replay(shard):
    _, pid, epoch = init(shard)
    result = ops.add_partitions(shard, "t", pid, epoch, [("a", 0), ("b", 3)])
    run(shard, result)
    fresh = TxnShard(runtime=None, partition_index=0, coordinator=Markers())
    fresh.replay(0, *result.records[0])
    assert fresh.txns["t"].partitions == shard.txns["t"].partitions
    fresh.replay(1, rec.key("t"), None)  # a tombstone
    assert "t" not in fresh.txns


def test_idle_ids_expire(shard):
    _, pid, epoch = init(shard)
    updated = shard.txns["t"].txn_last_update_timestamp
    assert run(shard, ops.expire_ids(shard, updated + 999, 1000)) == 0
    run(shard, ops.add_partitions(shard, "t", pid, epoch, [("a", 0)]))
    assert run(shard, ops.expire_ids(shard, updated + 10**9, 1000)) == 0  # open transaction
    end(shard, ops.end_txn(shard, "t", pid, epoch, False))
    run(shard, ops.complete(shard, shard.coordinator.sent[-1]))
    assert run(shard, ops.expire_ids(shard, updated + 10**9, 1000)) == 1
    assert "t" not in shard.txns


def test_kip_588_recovery_after_a_timeout_but_a_zombie_stays_fenced(shard):
    _, pid, epoch = init(shard, timeout=1000)
    run(shard, ops.add_partitions(shard, "t", pid, epoch, [("a", 0)]))
    run(shard, ops.abort_timed_out(shard, shard.txns["t"].txn_start_timestamp + 1000))
    run(shard, ops.complete(shard, shard.coordinator.sent[-1]))
    # The timed-out producer re-initializes with its old epoch and keeps its id.
    assert init(shard, pid=pid, epoch=epoch) == (Errors.NONE, pid, epoch + 1)
    # A new instance bumps the epoch; the old epoch is fenced from then on.
    assert init(shard) == (Errors.NONE, pid, epoch + 2)
    assert init(shard, pid=pid, epoch=epoch)[0] is Errors.PRODUCER_FENCED
    assert init(shard, pid=pid, epoch=epoch + 1)[0] is Errors.PRODUCER_FENCED


# --- transactions v2 (KIP-890 part 2) ------------------------------------------------------------

def v2_txn(shard, pid, epoch, partitions=(("a", 0),)):
    assert run(shard, ops.add_partitions(shard, "t", pid, epoch, list(partitions), 2)) \
        is Errors.NONE


def test_v2_every_end_txn_bumps_the_epoch_and_markers_carry_it(shard):
    _, pid, epoch = init(shard)
    v2_txn(shard, pid, epoch)
    assert run(shard, ops.end_txn(shard, "t", pid, epoch, True, tv2=True)) == (
        Errors.NONE, pid, epoch + 1)
    prepared = shard.coordinator.sent[-1]
    assert (prepared.state, prepared.producer_epoch) == (S.PREPARE_COMMIT, epoch + 1)
    assert prepared.client_transaction_version == 2
    assert rec.decode_value("t", rec.value(prepared)) == prepared
    # A retry while the markers are written, then after Complete: the epoch tells it apart.
    assert end(shard, ops.end_txn(shard, "t", pid, epoch, True, tv2=True)) \
        is Errors.CONCURRENT_TRANSACTIONS
    run(shard, ops.complete(shard, prepared))
    assert run(shard, ops.end_txn(shard, "t", pid, epoch, True, tv2=True)) == (
        Errors.NONE, pid, epoch + 1)
    assert end(shard, ops.end_txn(shard, "t", pid, epoch, False, tv2=True)) \
        is Errors.INVALID_TXN_STATE
    # The next transaction goes on at the bumped epoch; the old epoch is fenced.
    assert run(shard, ops.add_partitions(shard, "t", pid, epoch, [("a", 0)], 2)) \
        is Errors.PRODUCER_FENCED
    v2_txn(shard, pid, epoch + 1)
    assert end(shard, ops.end_txn(shard, "t", pid, epoch - 1, True, tv2=True)) \
        is Errors.PRODUCER_FENCED


def test_v2_abort_without_a_transaction_bumps_the_epoch(shard):
    _, pid, epoch = init(shard)
    assert end(shard, ops.end_txn(shard, "t", pid, epoch, True, tv2=True)) \
        is Errors.INVALID_TXN_STATE
    assert run(shard, ops.end_txn(shard, "t", pid, epoch, False, tv2=True)) == (
        Errors.NONE, pid, epoch + 1)
    prepared = shard.coordinator.sent[-1]
    assert prepared.partitions == frozenset()
    run(shard, ops.complete(shard, prepared))
    assert shard.txns["t"].state is S.COMPLETE_ABORT


def test_v2_exhausted_epoch_rotates_the_producer_id(shard):
    _, pid, _ = init(shard)
    last = 32766
    shard.txns["t"] = shard.txns["t"].transition(S.EMPTY, producer_epoch=last)
    v2_txn(shard, pid, last)
    error, new_pid, new_epoch = run(shard, ops.end_txn(shard, "t", pid, last, True, tv2=True,
                                                       new_producer_id=lambda: 5555))
    assert (error, new_pid, new_epoch) == (Errors.NONE, 5555, 0)
    prepared = shard.coordinator.sent[-1]
    # The producer goes on with the new id at once: until Complete it is told to retry.
    assert run(shard, ops.add_partitions(shard, "t", 5555, 0, [("a", 0)], 2)) \
        is Errors.CONCURRENT_TRANSACTIONS
    # The markers are written with the old id at the last epoch; Complete moves to the new id.
    assert (prepared.producer_id, prepared.producer_epoch, prepared.next_producer_id) == (
        pid, 32767, 5555)
    run(shard, ops.complete(shard, prepared))
    m = shard.txns["t"]
    assert (m.producer_id, m.producer_epoch, m.prev_producer_id) == (5555, 0, pid)
    # A retry with the old id and epoch is recognised.
    assert run(shard, ops.end_txn(shard, "t", pid, last, True, tv2=True)) == (
        Errors.NONE, 5555, 0)
    v2_txn(shard, 5555, 0)
