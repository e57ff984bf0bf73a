"""The log's side of transactions: open transactions in the producer state (first unstable
offset), COMMIT/ABORT markers, the aborted-transaction index (``.txnindex``), their recovery after
a clean close and after a crash, marker fencing, and Kafka's DumpLogSegments reading our files."""

import os
import subprocess

import pytest

from kbroker.log import LogConfig
from kbroker.log.txn_index import ENTRY_SIZE, AbortedTxn, decode_entries
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.protocol.records import (CONTROL_ABORT, CONTROL_COMMIT, RecordBatchBuilder,
                                      build_control_batch)

from .conftest import NOW, kafka_java


def txn_batch(producer_id, epoch, base_sequence, count=2):
    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=epoch,
                                 base_sequence=base_sequence, is_transactional=True)
    for i in range(count):
        builder.append(NOW, b"k", b"v%d" % i)
    return builder.build()


def marker(log, producer_id, epoch, commit, coordinator_epoch=0):
    batch = build_control_batch(CONTROL_COMMIT if commit else CONTROL_ABORT, producer_id, epoch,
                                coordinator_epoch, timestamp_ms=NOW)
    result = log.append_as_leader(batch, 0, NOW, from_client=False)
    log.high_watermark = log.log_end_offset
    return result


def append(log, batch):
    result = log.append_as_leader(batch, 0, NOW)
    log.high_watermark = log.log_end_offset
    return result


def test_open_transactions_and_the_aborted_index(open_log, log_dir):
    log = open_log()
    append(log, txn_batch(1, 0, 0))           # offsets 0-1, producer 1
    append(log, txn_batch(2, 0, 0))           # offsets 2-3, producer 2
    assert log.first_unstable_offset == 0
    marker(log, 1, 0, commit=True)            # offset 4
    assert log.first_unstable_offset == 2
    marker(log, 2, 0, commit=False)           # offset 5
    assert log.first_unstable_offset is None
    assert log.collect_aborted_txns(0, 100) == [AbortedTxn(2, 2, 5, 6)]
    assert log.collect_aborted_txns(6, 100) == []      # fetched past the abort
    assert log.collect_aborted_txns(0, 2) == []        # reads stop before it began
    with open(os.path.join(log_dir, "00000000000000000000.txnindex"), "rb") as f:
        assert decode_entries(f.read()) == [AbortedTxn(2, 2, 5, 6)]


def test_aborted_entry_records_the_lso_of_another_open_transaction(open_log):
    log = open_log()
    append(log, txn_batch(1, 0, 0))           # 0-1
    append(log, txn_batch(2, 0, 0))           # 2-3
    marker(log, 2, 0, commit=False)           # 4: producer 1 still holds offset 0
    assert log.collect_aborted_txns(0, 100) == [AbortedTxn(2, 2, 4, 0)]


@pytest.mark.parametrize("clean", [True, False])
def test_transactions_survive_reopening(open_log, log_dir, clean):
    log = open_log()
    append(log, txn_batch(1, 0, 0))
    marker(log, 1, 0, commit=False)           # aborted: 0-1, marker 2
    append(log, txn_batch(3, 0, 0))           # open: 3-4
    if clean:
        log.close()
    else:
        log.flush()  # kill -9: no snapshot, recovery replays the log
    reopened = open_log(clean_shutdown=clean)
    assert reopened.first_unstable_offset == 3
    assert reopened.collect_aborted_txns(0, 100) == [AbortedTxn(1, 0, 2, 3)]
    assert os.path.getsize(os.path.join(log_dir, "00000000000000000000.txnindex")) == ENTRY_SIZE


def test_a_lost_index_entry_is_rebuilt_by_recovery(open_log, log_dir):
    log = open_log()
    append(log, txn_batch(1, 0, 0))
    marker(log, 1, 0, commit=False)
    log.flush()
    os.unlink(os.path.join(log_dir, "00000000000000000000.txnindex"))
    reopened = open_log()
    assert reopened.collect_aborted_txns(0, 100) == [AbortedTxn(1, 0, 2, 3)]


def test_marker_fencing(open_log):
    log = open_log()
    append(log, txn_batch(1, 1, 0))
    with pytest.raises(KafkaError) as old_epoch:
        marker(log, 1, 0, commit=True)
    assert old_epoch.value.error is Errors.INVALID_PRODUCER_EPOCH
    marker(log, 1, 1, commit=True, coordinator_epoch=5)
    with pytest.raises(KafkaError) as old_coordinator:
        marker(log, 1, 1, commit=True, coordinator_epoch=4)
    assert old_coordinator.value.error is Errors.TRANSACTION_COORDINATOR_FENCED


def test_non_transactional_write_inside_an_open_transaction(open_log):
    log = open_log()
    append(log, txn_batch(1, 0, 0))
    builder = RecordBatchBuilder(producer_id=1, producer_epoch=0, base_sequence=2)
    builder.append(NOW, b"k", b"v")
    with pytest.raises(KafkaError) as refused:
        append(log, builder.build())
    assert refused.value.error is Errors.INVALID_TXN_STATE


def test_kafka_dump_log_segments_reads_markers_and_txnindex(open_log, log_dir):
    dump_log_segments = kafka_java("org.apache.kafka.tools.DumpLogSegments")
    log = open_log(LogConfig())
    append(log, txn_batch(7, 0, 0))
    marker(log, 7, 0, commit=False)
    append(log, txn_batch(7, 0, 2))
    marker(log, 7, 0, commit=True)
    log.close()
    files = [os.path.join(log_dir, "00000000000000000000" + suffix)
             for suffix in (".log", ".txnindex")]
    out = subprocess.run([*dump_log_segments,
                          "--deep-iteration", "--files", ",".join(files)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "endTxnMarker: ABORT coordinatorEpoch: 0" in out.stdout, out.stdout
    assert "endTxnMarker: COMMIT coordinatorEpoch: 0" in out.stdout
    assert "isTransactional: true" in out.stdout
    assert "producerId: 7 firstOffset: 0 lastOffset: 2 lastStableOffset: 3" in out.stdout, \
        out.stdout


def test_cleaner_never_passes_an_open_transaction(open_log):
    from kbroker.log.cleaner import cleanable_offsets

    log = open_log(LogConfig(cleanup_policy=["compact"]))
    append(log, make_keyed(0))
    append(log, txn_batch(1, 0, 0))           # open at offset 1
    append(log, make_keyed(1))
    log.roll(NOW)
    assert cleanable_offsets(log, 0, NOW) == (0, 1)


def test_merged_segments_keep_their_aborted_entries(tmp_path):
    from kbroker.log.txn_index import TransactionIndexes

    indexes = TransactionIndexes(str(tmp_path))
    indexes.append(0, AbortedTxn(1, 0, 5, 6))
    indexes.append(10, AbortedTxn(2, 10, 12, 13))
    indexes.merge_into(0, [0, 10])
    assert sorted(os.listdir(tmp_path)) == ["00000000000000000000.txnindex"]
    reloaded = TransactionIndexes(str(tmp_path))
    reloaded.load([0], 100)
    assert reloaded.entries == [AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 10, 12, 13)]


def make_keyed(i):
    builder = RecordBatchBuilder()
    builder.append(NOW, b"key-%d" % i, b"v")
    return builder.build()
