"""The cleaner's transaction rules (Kafka's LogCleaner with CleanedTransactionMetadata):
aborted data goes (and never shadows committed data in the offset map), the .txnindex of the
cleaned segment keeps only aborts whose marker stayed, markers with no data left get a delete
horizon and go once a round passes it."""

from __future__ import annotations

from kbroker.log.cleaner import LogCleaner
from kbroker.protocol.records import (CONTROL_ABORT, CONTROL_COMMIT, RecordBatchBuilder,
                                      build_control_batch, iter_batches)
from tests.log.conftest import NOW, append
from tests.log.test_cleaner import (DAY, compact_config, data_dir, manager,  # noqa: F401
                                    read_all_segments, records_of)

COMMITTER, ABORTER = 11, 22


def txn_batch(producer_id, sequence, pairs):
    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=0,
                                 base_sequence=sequence, is_transactional=True)
    for key, value in pairs:
        builder.append(NOW, key, value)
    return builder.build()


def plain(pairs):
    builder = RecordBatchBuilder()
    for key, value in pairs:
        builder.append(NOW, key, value)
    return builder.build()


def marker(log, control_type, producer_id):
    log.append_as_leader(build_control_batch(control_type, producer_id, 0, 0, timestamp_ms=NOW),
                         0, NOW, from_client=False)
    log.high_watermark = log.log_end_offset


def markers(log):
    return [(h.base_offset, h.producer_id, h.record_count, h.delete_horizon_ms)
            for h in iter_batches(read_all_segments(log)) if h.is_control]


def values(log):
    """The data records' latest value per key (records_of checks the batches)."""
    control = {h.base_offset for h in iter_batches(read_all_segments(log)) if h.is_control}
    return {key: value for offset, key, value in records_of(log) if offset not in control}


def test_aborted_data_goes_and_markers_follow_after_the_horizon(manager):
    m = manager()
    log = m.create("t", 0, compact_config(delete_retention_ms=DAY))
    append(log, txn_batch(COMMITTER, 0, [(b"a", b"committed"), (b"b", b"committed")]))  # 0-1
    marker(log, CONTROL_COMMIT, COMMITTER)                                              # 2
    append(log, txn_batch(ABORTER, 0, [(b"a", b"aborted"), (b"c", b"aborted")]))        # 3-4
    marker(log, CONTROL_ABORT, ABORTER)                                                 # 5
    append(log, plain([(b"z", b"filler")]))                                             # 6
    log.roll(NOW)
    assert [(t.producer_id, t.first_offset, t.last_offset)
            for t in log.collect_aborted_txns(0, 100)] == [(ABORTER, 3, 5)]
    cleaner = LogCleaner(m)

    assert cleaner.clean_once(NOW)
    # The aborted value of "a" did not shadow the committed one; "c" (aborted only) is gone.
    assert values(log) == {b"a": b"committed", b"b": b"committed", b"z": b"filler"}
    # Both markers stay this round (their transactions had data) and so does the abort entry.
    assert markers(log) == [(2, COMMITTER, 1, None), (5, ABORTER, 1, None)]
    assert [t.first_offset for t in log.collect_aborted_txns(0, 100)] == [3]

    # A producer's last batch keeps its header (its sequence), and a marker stays while any
    # batch of its transaction does, as in Kafka. Both producers write again and the committed
    # data is overwritten: this round drops the old batches but still saw them, so the
    # markers stay.
    append(log, txn_batch(COMMITTER, 2, [(b"d", b"later")]))
    marker(log, CONTROL_COMMIT, COMMITTER)
    append(log, txn_batch(ABORTER, 2, [(b"e", b"later")]))
    marker(log, CONTROL_COMMIT, ABORTER)
    append(log, plain([(b"a", b"new"), (b"b", b"new")]))
    log.roll(NOW)
    assert cleaner.clean_once(NOW)
    assert values(log) == {b"a": b"new", b"b": b"new", b"d": b"later", b"e": b"later",
                           b"z": b"filler"}
    assert [(o, horizon) for o, _, _, horizon in markers(log)][:2] == [(2, None), (5, None)]

    # Next round nothing of those transactions is left: their markers get a delete horizon
    # and the abort leaves the index.
    append(log, plain([(b"z", b"filler-2")]))
    log.roll(NOW)
    assert cleaner.clean_once(NOW)
    assert [(o, horizon) for o, _, _, horizon in markers(log)][:2] == [
        (2, NOW + DAY), (5, NOW + DAY)]
    assert log.collect_aborted_txns(0, 100) == []

    # Before the horizon they stay; a round at the horizon drops them.
    append(log, plain([(b"z", b"filler-3")]))
    log.roll(NOW)
    assert cleaner.clean_once(NOW + DAY - 1)
    assert [o for o, _, _, _ in markers(log)][:2] == [2, 5]
    append(log, plain([(b"z", b"filler-4")]))
    log.roll(NOW)
    assert cleaner.clean_once(NOW + DAY)
    assert 2 not in [o for o, _, _, _ in markers(log)]
    assert 5 not in [o for o, _, _, _ in markers(log)]
    assert values(log) == {b"a": b"new", b"b": b"new", b"d": b"later", b"e": b"later",
                           b"z": b"filler-4"}


def test_commit_marker_stays_while_its_data_does(manager):
    m = manager()
    log = m.create("t", 0, compact_config(delete_retention_ms=0))
    append(log, txn_batch(COMMITTER, 0, [(b"k", b"v")]))
    marker(log, CONTROL_COMMIT, COMMITTER)
    append(log, plain([(b"z", b"1")]))
    log.roll(NOW)
    cleaner = LogCleaner(m)
    for round_ in range(3):
        append(log, plain([(b"z", b"%d" % (round_ + 2))]))
        log.roll(NOW)
        assert cleaner.clean_once(NOW + round_)
        assert values(log)[b"k"] == b"v"
        assert [(p, n, horizon) for _, p, n, horizon in markers(log)] == [(COMMITTER, 1, None)]


def test_aborted_data_of_a_later_producer_batch_is_not_mistaken(manager):
    """The same producer aborts, then commits: only the first transaction's data goes."""
    m = manager()
    log = m.create("t", 0, compact_config())
    append(log, txn_batch(ABORTER, 0, [(b"x", b"aborted")]))
    marker(log, CONTROL_ABORT, ABORTER)
    append(log, txn_batch(ABORTER, 1, [(b"y", b"committed")]))
    marker(log, CONTROL_COMMIT, ABORTER)
    append(log, plain([(b"z", b"filler")]))
    log.roll(NOW)
    assert LogCleaner(m).clean_once(NOW)
    assert values(log) == {b"y": b"committed", b"z": b"filler"}
