"""Partition: the high watermark, the last stable offset, fetch bounds and both kinds of waiters.

A single node is its own ISR, so most behaviour shows only with a follower in the ISR: the tests
add one (replica 2) whose log end offset they move by hand, as its fetches will in a cluster."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from kbroker.log import LogConfig, PartitionLog
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.protocol.records import RecordBatchBuilder, iter_batches
from kbroker.replica.partition import Partition, wait_for_news

NOW = 1_700_000_000_000
FOLLOWER = 2
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL = -1, -2, -3, -4


def batch(count=3, ts=NOW):
    builder = RecordBatchBuilder()
    for i in range(count):
        builder.append(ts + i, b"k", b"v" * 20)
    return builder.build()


@pytest.fixture
def make_partition(tmp_path):
    logs = []

    def make(leader_epoch=0, with_follower=False):
        log = PartitionLog.open(str(tmp_path / "t-0"), "t", 0, LogConfig(), now_ms=NOW)
        logs.append(log)
        partition = Partition("t", 0, uuid.uuid4(), log, leader_epoch, local_replica_id=1)
        if with_follower:
            partition.update_isr({1, FOLLOWER})
            partition.update_follower_end_offset(FOLLOWER, 0)
        return partition

    yield make
    for log in logs:
        log.close()


def run(coro):
    return asyncio.run(coro)


def offsets(result):
    data = b"".join(region.read() for region in result.regions)
    return [(h.base_offset, h.last_offset) for h in iter_batches(data)]


def test_alone_in_the_isr_an_append_is_committed_at_once(make_partition):
    async def scenario():
        partition = make_partition()
        result, committed = partition.append(batch(3), NOW)
        assert committed.done() and committed.result() is None
        assert (result.first_offset, result.last_offset) == (0, 2)
        assert partition.high_watermark == partition.last_stable_offset == 3
        assert partition.pending_commits == 0
    run(scenario())


def test_commit_waiters_complete_in_offset_order_only_when_the_hw_passes(make_partition):
    async def scenario():
        partition = make_partition(with_follower=True)
        completed = []
        futures = []
        for n in range(3):  # offsets 0-2, 3-5, 6-8
            _, committed = partition.append(batch(3), NOW)
            committed.add_done_callback(lambda _, n=n: completed.append(n))
            futures.append(committed)
        assert partition.log_end_offset == 9 and partition.high_watermark == 0
        assert not any(f.done() for f in futures)

        partition.update_follower_end_offset(FOLLOWER, 5)  # HW 5: passes offset 2, not 5
        assert partition.high_watermark == 5
        assert [f.done() for f in futures] == [True, False, False]
        partition.update_follower_end_offset(FOLLOWER, 6)
        assert [f.done() for f in futures] == [True, True, False]
        partition.update_follower_end_offset(FOLLOWER, 9)
        await asyncio.sleep(0)  # done callbacks run on the loop
        assert completed == [0, 1, 2]
        assert partition.pending_commits == 0
    run(scenario())


def test_a_lagging_replica_leaving_the_isr_commits_and_the_hw_never_moves_back(make_partition):
    async def scenario():
        partition = make_partition(with_follower=True)
        _, committed = partition.append(batch(3), NOW)
        partition.update_follower_end_offset(FOLLOWER, 2)
        assert partition.high_watermark == 2 and not committed.done()
        partition.update_isr({1})
        assert partition.high_watermark == 3 and committed.done()
        partition.update_isr({1, FOLLOWER})
        assert partition.high_watermark == 3
    run(scenario())


def test_fetch_bounds_hw_for_consumers_leo_for_followers_lso_for_read_committed(make_partition):
    async def scenario():
        partition = make_partition(with_follower=True)
        for _ in range(3):
            partition.append(batch(3), NOW)
        partition.update_follower_end_offset(FOLLOWER, 6)
        assert offsets(partition.read(0, 1 << 20)) == [(0, 2), (3, 5)]
        assert offsets(partition.read(0, 1 << 20, replica_id=FOLLOWER)) == [(0, 2), (3, 5),
                                                                            (6, 8)]
        # Transactions will hold the LSO below the HW; read_committed stops there.
        partition.last_stable_offset = 3
        assert offsets(partition.read(0, 1 << 20, read_committed=True)) == [(0, 2)]
        assert offsets(partition.read(0, 1 << 20)) == [(0, 2), (3, 5)]
        assert partition.fetch_bound() == 6
        assert partition.fetch_bound(read_committed=True) == 3
        assert partition.fetch_bound(replica_id=FOLLOWER) == 9
    run(scenario())


def test_parked_consumer_fetch_wakes_on_the_hw_a_follower_fetch_on_new_data(make_partition):
    async def scenario():
        partition = make_partition(with_follower=True)
        consumer = asyncio.ensure_future(wait_for_news([partition], 30))
        follower = asyncio.ensure_future(wait_for_news([partition], 30, replica_id=FOLLOWER))
        await asyncio.sleep(0)
        assert partition.parked_fetches == 2
        partition.append(batch(1), NOW)  # the log end offset moves, the HW does not
        assert await follower is True
        await asyncio.sleep(0)
        assert not consumer.done()
        partition.update_follower_end_offset(FOLLOWER, 1)
        assert await consumer is True
        assert partition.parked_fetches == 0
    run(scenario())


def test_parked_fetch_times_out_and_unparks(make_partition):
    async def scenario():
        partition = make_partition()
        assert await wait_for_news([partition], 0.01) is False
        assert partition.parked_fetches == 0
    run(scenario())


def test_cancelled_parked_fetch_leaves_no_waiter(make_partition, tmp_path):
    async def scenario():
        partition = make_partition()
        other_log = PartitionLog.open(str(tmp_path / "u-0"), "u", 0, LogConfig(), now_ms=NOW)
        other = Partition("u", 0, uuid.uuid4(), other_log)
        try:
            parked = asyncio.ensure_future(wait_for_news([partition, other], 30))
            await asyncio.sleep(0)
            assert partition.parked_fetches == other.parked_fetches == 1
            parked.cancel()  # what a closed connection does to its fetch
            with pytest.raises(asyncio.CancelledError):
                await parked
            assert partition.parked_fetches == other.parked_fetches == 0
        finally:
            other_log.close()
    run(scenario())


def test_list_offsets_answers_through_the_log(make_partition):
    async def scenario():
        partition = make_partition(leader_epoch=5, with_follower=True)
        partition.append(batch(3, ts=NOW), NOW)  # offsets 0-2 at NOW..NOW+2, epoch 5
        partition.leader_epoch = 7
        partition.append(batch(3, ts=NOW + 100), NOW)  # offsets 3-5, epoch 7
        partition.update_follower_end_offset(FOLLOWER, 3)
        # Earliest: the epoch of the leader-epoch cache's first entry (Kafka's UnifiedLog), not
        # the current leader epoch; earliest local is the same without tiered storage.
        assert partition.offset_for_timestamp(EARLIEST) == (0, -1, 5)
        assert partition.offset_for_timestamp(EARLIEST_LOCAL) == (0, -1, 5)
        # Latest: the HW for consumers, the log end offset for a replica; current epoch.
        assert partition.offset_for_timestamp(LATEST) == (3, -1, 7)
        assert partition.offset_for_timestamp(LATEST, replica_id=FOLLOWER) == (6, -1, 7)
        assert partition.offset_for_timestamp(NOW + 1) == (1, NOW + 1, 5)
        # Found, but not yet committed: hidden from consumers.
        assert partition.offset_for_timestamp(NOW + 100) is None
        assert partition.offset_for_timestamp(MAX_TIMESTAMP) is None
        assert partition.offset_for_timestamp(NOW + 100, replica_id=FOLLOWER) == (3, NOW + 100,
                                                                                  7)
        partition.update_follower_end_offset(FOLLOWER, 6)
        assert partition.offset_for_timestamp(MAX_TIMESTAMP) == (5, NOW + 102, 7)
        with pytest.raises(KafkaError) as e:
            partition.offset_for_timestamp(-7)
        assert e.value.error == Errors.INVALID_REQUEST
    run(scenario())


def test_delete_records_stops_at_the_hw(make_partition):
    async def scenario():
        partition = make_partition(with_follower=True)
        partition.append(batch(3), NOW)
        partition.update_follower_end_offset(FOLLOWER, 2)
        with pytest.raises(KafkaError) as e:
            partition.delete_records_before(3)
        assert e.value.error == Errors.OFFSET_OUT_OF_RANGE
        with pytest.raises(KafkaError):
            partition.delete_records_before(-2)
        assert partition.delete_records_before(-1) == 2
        assert partition.log_start_offset == 2
    run(scenario())


def test_removal_fails_commit_waiters_and_wakes_parked_fetches(make_partition):
    async def scenario():
        partition = make_partition(with_follower=True)
        _, committed = partition.append(batch(1), NOW)
        parked = asyncio.ensure_future(wait_for_news([partition], 30))
        await asyncio.sleep(0)
        partition.on_removed()
        assert await parked is True
        assert isinstance(committed.exception(), KafkaError)
        assert committed.exception().error == Errors.NOT_LEADER_OR_FOLLOWER
        with pytest.raises(KafkaError) as e:
            partition.append(batch(1), NOW)
        assert e.value.error == Errors.NOT_LEADER_OR_FOLLOWER
    run(scenario())
