"""The share partition state machine alone (kbroker/share/state.py): acquisition, the
acknowledgement rules Kafka's SharePartition applies, delivery limits, locks, start offset."""

import pytest

from kbroker.coordinator.share.persister import (ACKNOWLEDGED, ARCHIVED, AVAILABLE, ReadResult,
                                                 StateBatch)
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.share.state import (ACCEPT, ACQUIRED, GAP, REJECT, RELEASE, RENEW, Acquired,
                                 FetchedBatch, Limits, SharePartitionState)

LIMITS = Limits(delivery_count_limit=3, max_record_locks=100, lock_duration_ms=1000)


def acquire(state, member, batches, max_records=500, now=0, record_limit=False, limits=LIMITS):
    return state.acquire(member, batches, max_records, record_limit, limits, now)[0]


def test_acquire_whole_batches_then_nothing_left():
    state = SharePartitionState(0)
    got = acquire(state, "a", [FetchedBatch(0, 4), FetchedBatch(5, 9)], max_records=3)
    # batch-optimized: the first batch whole, past max_records, then stop
    assert got == [Acquired(0, 4, 1)]
    assert state.next_fetch_offset() == 5
    assert acquire(state, "b", [FetchedBatch(5, 9)]) == [Acquired(5, 9, 1)]
    assert acquire(state, "c", [FetchedBatch(0, 4), FetchedBatch(5, 9)]) == []


def test_record_limit_mode_stops_inside_a_batch():
    state = SharePartitionState(0)
    assert acquire(state, "a", [FetchedBatch(0, 9)], max_records=3, record_limit=True) == \
        [Acquired(0, 2, 1)]
    assert acquire(state, "b", [FetchedBatch(0, 9)], max_records=100) == [Acquired(3, 9, 1)]


def test_accept_moves_the_start_offset_and_release_redelivers():
    state = SharePartitionState(0)
    acquire(state, "a", [FetchedBatch(0, 4)])
    changed = state.acknowledge("a", [(0, 1, [ACCEPT]), (2, 2, [RELEASE])], LIMITS, 0)
    assert changed == {0, 1, 2}
    assert state.start_offset == 2
    assert state.records[2].state == AVAILABLE
    got = acquire(state, "b", [FetchedBatch(0, 4)])
    assert got == [Acquired(2, 2, 2)]  # the released one, on its second delivery


def test_per_offset_types_and_gaps():
    state = SharePartitionState(0)
    acquire(state, "a", [FetchedBatch(0, 3)])
    state.acknowledge("a", [(0, 3, [ACCEPT, GAP, REJECT, ACCEPT])], LIMITS, 0)
    assert state.start_offset == 4 and not state.records


def test_not_acquired_and_other_member_are_invalid_record_state_and_change_nothing():
    state = SharePartitionState(0)
    acquire(state, "a", [FetchedBatch(0, 4)])
    with pytest.raises(KafkaError) as err:
        state.acknowledge("b", [(0, 0, [ACCEPT])], LIMITS, 0)
    assert err.value.error == Errors.INVALID_RECORD_STATE
    state.acknowledge("a", [(2, 2, [ACCEPT])], LIMITS, 0)
    with pytest.raises(KafkaError) as err:  # 1 is fine, 2 is done already: all or nothing
        state.acknowledge("a", [(1, 1, [ACCEPT]), (2, 2, [ACCEPT])], LIMITS, 0)
    assert err.value.error == Errors.INVALID_RECORD_STATE
    assert state.records[1].state == ACQUIRED


def test_offsets_below_the_start_offset_are_ignored():
    """As Kafka: offsets below the start offset are skipped, a batch wholly below it succeeds."""
    state = SharePartitionState(0)
    acquire(state, "a", [FetchedBatch(0, 4)])
    state.acknowledge("a", [(0, 1, [ACCEPT])], LIMITS, 0)
    assert state.acknowledge("a", [(0, 0, [REJECT])], LIMITS, 0) == set()
    assert state.acknowledge("a", [(0, 4, [ACCEPT])], LIMITS, 0) == {2, 3, 4}
    assert state.start_offset == 5 and not state.records


def test_an_offset_named_twice_is_not_acquired_the_second_time():
    state = SharePartitionState(0)
    acquire(state, "a", [FetchedBatch(0, 4)])
    with pytest.raises(KafkaError) as err:  # batches may touch; offset 1 is then done already
        state.acknowledge("a", [(0, 1, [ACCEPT]), (1, 2, [ACCEPT])], LIMITS, 0)
    assert err.value.error == Errors.INVALID_RECORD_STATE
    assert state.acknowledge("a", [(0, 1, [RENEW]), (1, 2, [ACCEPT])], LIMITS, 0) == {1, 2}


def test_past_acquired_records_is_invalid_request():
    state = SharePartitionState(0)
    acquire(state, "a", [FetchedBatch(0, 4)])
    with pytest.raises(KafkaError) as err:
        state.acknowledge("a", [(3, 7, [ACCEPT])], LIMITS, 0)
    assert err.value.error == Errors.INVALID_REQUEST


def test_delivery_limit_archives_a_poison_record():
    state = SharePartitionState(0)
    for delivery in range(1, 4):
        assert acquire(state, "a", [FetchedBatch(0, 0)]) == [Acquired(0, 0, delivery)]
        state.acknowledge("a", [(0, 0, [RELEASE])], LIMITS, 0)
    assert state.start_offset == 1  # archived after the third delivery
    assert acquire(state, "a", [FetchedBatch(0, 0)]) == []


def test_lock_expiry_releases_and_renew_extends():
    state = SharePartitionState(0)
    acquire(state, "a", [FetchedBatch(0, 1)], now=0)
    state.acknowledge("a", [(1, 1, [RENEW])], LIMITS, 500)
    assert state.expire_locks(999, LIMITS) == set()
    assert state.expire_locks(1000, LIMITS) == {0}
    assert state.records[0].state == AVAILABLE and state.records[1].state == ACQUIRED
    assert state.next_deadline_ms() == 1500


def test_release_member_on_session_close():
    state = SharePartitionState(0)
    acquire(state, "a", [FetchedBatch(0, 1)])
    acquire(state, "b", [FetchedBatch(2, 3)])
    assert state.release_member("a", LIMITS) == {0, 1}
    assert state.acquired_by("b") == [2, 3]


def test_control_and_aborted_batches_are_archived_not_delivered():
    state = SharePartitionState(0)
    got = acquire(state, "a", [FetchedBatch(0, 1), FetchedBatch(2, 2, deliverable=False),
                               FetchedBatch(3, 3)])
    assert got == [Acquired(0, 1, 1), Acquired(3, 3, 1)]
    assert state.records[2].state == ARCHIVED


def test_max_record_locks_is_checked_before_each_batch_as_kafka_does():
    """Kafka's SharePartition: a fetch may take new records while fewer than
    share.partition.max.record.locks are in flight, in whole log batches (the window may pass
    the cap by part of one batch); at the cap it takes none."""
    state = SharePartitionState(0)
    limits = Limits(delivery_count_limit=3, max_record_locks=3, lock_duration_ms=1000)
    batches = [FetchedBatch(0, 1), FetchedBatch(2, 3), FetchedBatch(4, 5)]
    assert acquire(state, "a", batches, limits=limits) == [Acquired(0, 3, 1)]
    assert acquire(state, "b", batches, limits=limits) == []
    state.acknowledge("a", [(0, 1, [ACCEPT])], limits, 0)
    assert acquire(state, "b", batches, limits=limits) == [Acquired(4, 5, 1)]
    assert state.in_flight_count() == 4  # 2-5: the cap passed by one batch
    assert acquire(state, "c", [FetchedBatch(6, 9)], limits=limits) == []


def test_at_the_cap_released_records_are_still_delivered_and_nothing_after_them_is_skipped():
    """At the cap a fetch takes the released records the window holds but no new offset of
    their batch, and stops there: a later batch must not move the end past the offsets never
    taken (they were lost once: a bench with three share consumers on one partition saw
    records marked done that nobody received)."""
    state = SharePartitionState(0)
    limits = Limits(delivery_count_limit=3, max_record_locks=4, lock_duration_ms=1000)
    assert acquire(state, "a", [FetchedBatch(0, 3)], limits=limits) == [Acquired(0, 3, 1)]
    state.acknowledge("a", [(2, 3, [RELEASE])], limits, 0)
    # the log batch 2-7 holds released 2-3 and new 4-7; the window (0-3) is at the cap
    got = acquire(state, "b", [FetchedBatch(2, 7), FetchedBatch(8, 11)], limits=limits)
    assert got == [Acquired(2, 3, 2)]
    assert state.end_offset == 4 and state.next_fetch_offset() == 4
    state.acknowledge("a", [(0, 1, [ACCEPT])], limits, 0)
    state.acknowledge("b", [(2, 3, [ACCEPT])], limits, 0)
    assert acquire(state, "c", [FetchedBatch(2, 7), FetchedBatch(8, 11)], limits=limits) == \
        [Acquired(4, 7, 1)]


def test_load_from_persisted_state_and_write_back():
    read = ReadResult(state_epoch=2, start_offset=10, batches=[
        StateBatch(10, 11, ACKNOWLEDGED, 1), StateBatch(12, 12, AVAILABLE, 2),
        StateBatch(14, 14, ARCHIVED, 3)])
    state = SharePartitionState.from_persisted(read, 10)
    assert state.start_offset == 12 and state.end_offset == 15
    roomy = Limits(delivery_count_limit=10, max_record_locks=100, lock_duration_ms=1000)
    got = acquire(state, "a", [FetchedBatch(12, 16)], limits=roomy)
    assert got == [Acquired(12, 12, 3), Acquired(13, 13, 1), Acquired(15, 16, 1)]
    changed = state.acknowledge("a", [(12, 13, [REJECT])], LIMITS, 0)
    assert state.start_offset == 15
    assert state.persisted_batches(changed | {15}) == [StateBatch(15, 15, AVAILABLE, 1)]


def test_log_start_offset_moving_past_the_start():
    state = SharePartitionState(0)
    acquire(state, "a", [FetchedBatch(0, 4)])
    assert state.move_start_to(3)
    assert state.start_offset == 3 and sorted(state.records) == [3, 4]


def test_holes_in_the_log_are_skipped_not_filled():
    """Compaction leaves holes between batches: nothing is allocated for them, the start offset
    jumps over them, and available records the log no longer has are archived."""
    state = SharePartitionState(0)
    far = 10**12
    got = acquire(state, "a", [FetchedBatch(0, 1), FetchedBatch(far, far + 1)])
    assert got == [Acquired(0, 1, 1), Acquired(far, far + 1, 1)]
    assert len(state.records) == 4
    state.acknowledge("a", [(0, far + 1, [ACCEPT])], LIMITS, 0)
    assert state.start_offset == far + 2 and not state.records
    # a released record whose offset the log lost meanwhile
    state = SharePartitionState(0)
    acquire(state, "a", [FetchedBatch(0, 2)])
    state.acknowledge("a", [(0, 0, [RELEASE]), (1, 2, [ACCEPT])], LIMITS, 0)
    assert acquire(state, "b", [FetchedBatch(5, 6)]) == [Acquired(5, 6, 1)]
    assert state.start_offset == 5


def test_a_damaged_persisted_state_does_not_load():
    read = ReadResult(start_offset=0, batches=[StateBatch(10**9, 10**9, ACKNOWLEDGED, 1)])
    with pytest.raises(ValueError):
        SharePartitionState.from_persisted(read, 0)


def test_undo_restores_what_nothing_else_changed():
    state = SharePartitionState(0)
    acquire(state, "a", [FetchedBatch(0, 3)])
    before = {}
    changed = state.acknowledge("a", [(0, 1, [ACCEPT]), (2, 3, [RELEASE])], LIMITS, 0, before)
    after = state.fields(changed)
    assert state.start_offset == 2
    # meanwhile b takes the released 2 and 3, and gives 2 back: both changed since
    acquire(state, "b", [FetchedBatch(0, 3)], now=5)
    state.acknowledge("b", [(2, 2, [RELEASE])], LIMITS, 0)
    state.undo(before, changed, after)
    assert state.start_offset == 0 and list(state.records) == [0, 1, 2, 3]
    assert [state.records[o].member for o in range(4)] == ["a", "a", None, "b"]
    assert [state.records[o].state for o in range(4)] == [ACQUIRED, ACQUIRED, AVAILABLE,
                                                          ACQUIRED]


def test_ranges_are_cut_at_batch_size_on_log_batch_boundaries():
    state = SharePartitionState(0)
    batches = [FetchedBatch(0, 2), FetchedBatch(3, 4), FetchedBatch(5, 9)]
    got = state.acquire("a", batches, 500, False, LIMITS, 0, batch_size=4)[0]
    assert got == [Acquired(0, 4, 1), Acquired(5, 9, 1)]


def test_records_redelivered_often_are_isolated():
    """Delivery limit 6 (throttled from 3 deliveries): a batch of 8 failing together is split,
    halved at each further delivery, and a record on its last attempt goes alone."""
    limits = Limits(delivery_count_limit=6, max_record_locks=100, lock_duration_ms=1000)
    state = SharePartitionState(0)
    batch = [FetchedBatch(0, 7)]

    def round_trip():
        got = acquire(state, "a", batch, limits=limits)
        for r in got:
            state.acknowledge("a", [(r.first_offset, r.last_offset, [RELEASE])], limits, 0)
        return got

    assert round_trip() == [Acquired(0, 7, 1)]
    assert round_trip() == [Acquired(0, 7, 2)]
    assert round_trip() == [Acquired(0, 7, 3)]
    assert round_trip() == [Acquired(0, 3, 4)]  # delivered 3 times: throttled, 8 >> 1
    assert round_trip() == [Acquired(0, 1, 5)]  # 8 >> 2
    assert round_trip() == [Acquired(0, 0, 6)]  # its last attempt, alone; archived after
    assert state.start_offset == 1
    assert round_trip() == [Acquired(1, 1, 6)]  # the same for 1
    assert round_trip() == [Acquired(2, 3, 5)]  # 2 and 3 were delivered 4 times: 8 >> 2
    assert state.start_offset == 2


def test_no_isolation_below_half_the_limit():
    state = SharePartitionState(0)
    limits = Limits(delivery_count_limit=10, max_record_locks=100, lock_duration_ms=1000)
    for delivery in range(1, 5):
        got = acquire(state, "a", [FetchedBatch(0, 3)], limits=limits)
        assert got == [Acquired(0, 3, delivery)]
        state.acknowledge("a", [(0, 3, [RELEASE])], limits, 0)


def test_an_acknowledgement_remembers_only_the_records_it_changes():
    state = SharePartitionState(0)
    acquire(state, "a", [FetchedBatch(0, 9)])
    before = {}
    state.acknowledge("a", [(2, 3, [ACCEPT]), (7, 7, [RELEASE])], LIMITS, 0, before)
    assert before == {o: (ACQUIRED, 1, "a", LIMITS.lock_duration_ms) for o in (2, 3, 7)}
    refused = {}
    with pytest.raises(KafkaError):
        state.acknowledge("a", [(0, 0, [ACCEPT]), (2, 2, [ACCEPT])], LIMITS, 0, refused)
    assert refused == {} and state.records[0].state == ACQUIRED  # all or nothing
    state.acknowledge("a", [(0, 1, [ACCEPT])], LIMITS, 0)
    assert state.fields([0, 4]) == {0: None, 4: (ACQUIRED, 1, "a", LIMITS.lock_duration_ms)}


# --- dead-letter queues (KIP-1191): ARCHIVING ------------------------------------------------------

DLQ = Limits(delivery_count_limit=3, max_record_locks=100, lock_duration_ms=1000, dead_letter=True)


def test_reject_goes_to_archiving_then_archived_with_a_dead_letter_queue():
    from kbroker.coordinator.share.persister import ARCHIVING
    from kbroker.share.state import CLIENT_REJECT

    state = SharePartitionState(0)
    acquire(state, "a", [FetchedBatch(0, 2)], limits=DLQ)
    changed = state.acknowledge("a", [(0, 2, [ACCEPT, REJECT, GAP])], DLQ, 0)
    assert changed == {0, 1, 2}
    # GAP is archived at once, REJECT waits in ARCHIVING: the start offset stops there
    assert state.records[1].state == ARCHIVING and state.records[2].state == ARCHIVED
    assert state.start_offset == 1
    assert state.persisted_batches(changed) == [StateBatch(1, 1, ARCHIVING, 1),
                                                StateBatch(2, 2, ARCHIVED, 1)]
    assert state.archiving(changed) == [(1, 1, CLIENT_REJECT)]
    assert state.unfinished_count() == 1 and state.delivery_complete_count() == 1
    # neither acquirable nor acknowledgeable meanwhile
    assert acquire(state, "b", [FetchedBatch(0, 2)], limits=DLQ) == []
    with pytest.raises(KafkaError) as err:
        state.acknowledge("a", [(1, 1, [ACCEPT])], DLQ, 0)
    assert err.value.error == Errors.INVALID_RECORD_STATE
    assert state.finish_archiving([1]) == {1}
    assert state.records == {} and state.start_offset == 3
    assert state.finish_archiving([1]) == set()  # twice is nothing


def test_without_a_dead_letter_queue_reject_archives_as_before():
    state = SharePartitionState(0)
    acquire(state, "a", [FetchedBatch(0, 0)])
    state.acknowledge("a", [(0, 0, [REJECT])], LIMITS, 0)
    assert state.start_offset == 1 and state.archiving() == []


@pytest.mark.parametrize("how", ["release", "expiry", "member leaves"])
def test_delivery_limit_goes_to_archiving_with_its_cause(how):
    from kbroker.coordinator.share.persister import ARCHIVING
    from kbroker.share.state import DELIVERY_COUNT_EXCEEDED

    state = SharePartitionState(0)
    for delivery in range(1, 4):
        assert acquire(state, "a", [FetchedBatch(0, 0)], now=0, limits=DLQ) == \
            [Acquired(0, 0, delivery)]
        if how == "release":
            state.acknowledge("a", [(0, 0, [RELEASE])], DLQ, 0)
        elif how == "expiry":
            state.expire_locks(10_000, DLQ)
        else:
            state.release_member("a", DLQ)
    assert state.records[0].state == ARCHIVING
    assert state.archiving() == [(0, 3, DELIVERY_COUNT_EXCEEDED)]


def test_loaded_archiving_records_wait_for_their_dead_letter_write():
    from kbroker.coordinator.share.persister import ARCHIVING

    read = ReadResult(start_offset=5, batches=[StateBatch(5, 6, ARCHIVING, 2),
                                               StateBatch(7, 7, ACKNOWLEDGED, 1)])
    state = SharePartitionState.from_persisted(read, 5)
    assert state.start_offset == 5 and state.end_offset == 8
    # no cause remembered: the manager derives it from the delivery count, as Kafka
    assert state.archiving() == [(5, 2, ""), (6, 2, "")]
    assert acquire(state, "a", [FetchedBatch(5, 9)]) == [Acquired(8, 9, 1)]
    state.finish_archiving([5, 6])
    assert state.start_offset == 8
