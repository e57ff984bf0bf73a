"""Replication between real brokers in one process: followers fetch over sockets, the leader's
high watermark follows them, the ISR grows and shrinks through the ISR writer, and a replica that
comes back after two leader changes truncates to exactly the leader's history (KIP-279)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from kbroker.protocol.errors import Errors
from kbroker.replica.fetcher import FetcherSettings
from tests.replica.cluster_harness import (FAST_FETCH, InProcessCluster, batch, log_bytes,
                                           produce, until)


def run(coro):
    asyncio.run(coro)


def test_acks_all_completes_only_after_the_followers_fetched(tmp_path):
    async def scenario():
        async with InProcessCluster(tmp_path) as cluster:
            await cluster.create_topic("t", [(0, 1, 2)])
            client = await cluster.client(0)
            try:
                _, answer = await produce(client, "t", 0, batch(3))
                assert answer.error_code == 0 and answer.base_offset == 0
                for node in (1, 2):  # an acknowledged write is on every ISR member
                    assert cluster.partition(node, "t").log_end_offset == 3
                assert cluster.partition(0, "t").high_watermark == 3

                # Broker 2 stops fetching but stays in the ISR (lag time 30 s): acks=all waits.
                await cluster.brokers[2].replicas.stop_replication()
                _, answer = await produce(client, "t", 0, batch(2), timeout_ms=300)
                assert answer.error_code == Errors.REQUEST_TIMED_OUT
                leader = cluster.partition(0, "t")
                assert leader.log_end_offset == 5 and leader.high_watermark == 3
                # acks=1 answers at once, whatever the followers do.
                _, answer = await produce(client, "t", 0, batch(1), acks=1)
                assert answer.error_code == 0 and answer.base_offset == 5

                # Broker 2 fetches again: the HW passes everything, the next acks=all is quick.
                cluster.brokers[2].replicas.start_replication(
                    cluster.write_isr, settings=FAST_FETCH, inter_broker_listener="PLAINTEXT")
                _, answer = await produce(client, "t", 0, batch(1))
                assert answer.error_code == 0 and answer.base_offset == 6
                assert leader.high_watermark == 7
            finally:
                client.close()
    run(scenario())


def test_replica_logs_are_byte_identical_up_to_the_high_watermark(tmp_path):
    async def scenario():
        async with InProcessCluster(tmp_path) as cluster:
            await cluster.create_topic("t", [(0, 1, 2), (1, 2, 0)])
            clients = {0: await cluster.client(0), 1: await cluster.client(1)}
            try:
                for round_ in range(20):
                    for index, leader in ((0, 0), (1, 1)):
                        _, answer = await produce(clients[leader], "t", index,
                                                  batch(1 + round_ % 4, b"x" * (10 + round_)))
                        assert answer.error_code == 0
                for index, leader in ((0, 0), (1, 1)):
                    hw = cluster.partition(leader, "t", index).high_watermark
                    assert hw == sum(1 + r % 4 for r in range(20))
                    expected = log_bytes(cluster.brokers[leader], "t", index, hw)
                    for node in (0, 1, 2):
                        assert log_bytes(cluster.brokers[node], "t", index, hw) == expected
                        # Followers learn the HW from their next fetch.
                        assert await until(lambda n=node, i=index: cluster.partition(
                            n, "t", i).high_watermark == hw)
                    # The followers' leader-epoch checkpoints match the leader's.
                    epochs = cluster.partition(leader, "t", index)._log.leader_epoch_cache
                    for node in (0, 1, 2):
                        cache = cluster.partition(node, "t", index)._log.leader_epoch_cache
                        assert cache.entries() == epochs.entries() == [(0, 0)]
            finally:
                for client in clients.values():
                    client.close()
    run(scenario())


def test_a_follower_that_catches_up_joins_the_isr(tmp_path):
    async def scenario():
        async with InProcessCluster(tmp_path) as cluster:
            # Broker 2 is assigned but out of the ISR (it was down, say).
            from kbroker.metadata.image import PartitionState
            await cluster.create_topic("t", [(0, 1, 2)], [PartitionState(0, 4, (0, 1), 7)])
            client = await cluster.client(0)
            try:
                _, answer = await produce(client, "t", 0, batch(5))
                assert answer.error_code == 0
                assert await until(lambda: cluster.state("t", 0).isr == (0, 1, 2)), \
                    cluster.state("t", 0)
                state = cluster.state("t", 0)
                assert (state.leader, state.leader_epoch, state.version) == (0, 4, 8)
                leader = cluster.partition(0, "t")
                assert leader.isr == {0, 1, 2} and leader.state_version == 8
            finally:
                client.close()
    run(scenario())


def test_an_isr_write_that_fails_is_proposed_again(tmp_path):
    """A failed or timed-out ISR write (ZooKeeper cut off, say) must not leave the change pending
    for ever: the next fetch of the caught-up follower proposes it again."""
    async def scenario():
        async with InProcessCluster(tmp_path) as cluster:
            from kbroker.metadata.image import PartitionState
            await cluster.create_topic("t", [(0, 1, 2)], [PartitionState(0, 4, (0, 1), 7)])
            cluster.refuse_isr_writes = True
            client = await cluster.client(0)
            try:
                _, answer = await produce(client, "t", 0, batch(5))
                assert answer.error_code == 0
                leader = cluster.partition(0, "t")
                assert await until(lambda: leader.follower_end_offset(2) == 5)
                await asyncio.sleep(0.3)  # proposals meanwhile fail
                assert cluster.state("t", 0).isr == (0, 1) and leader.pending_isr is None
                cluster.refuse_isr_writes = False
                assert await until(lambda: cluster.state("t", 0).isr == (0, 1, 2)), \
                    cluster.state("t", 0)
            finally:
                client.close()
    run(scenario())


def test_a_stuck_follower_leaves_the_isr_after_the_lag_time(tmp_path):
    async def scenario():
        async with InProcessCluster(tmp_path, lag_time_max_ms=400) as cluster:
            await cluster.create_topic("t", [(0, 1, 2)])
            client = await cluster.client(0)
            try:
                _, answer = await produce(client, "t", 0, batch(2))
                assert answer.error_code == 0
                await cluster.brokers[2].replicas.stop_replication()
                # The write waits for broker 2 until the leader drops it from the ISR.
                _, answer = await produce(client, "t", 0, batch(2), timeout_ms=15000)
                assert answer.error_code == 0
                assert cluster.state("t", 0).isr == (0, 1)
                assert cluster.partition(0, "t").high_watermark == 4
                # Broker 1 keeps fetching, so it stays.
                await asyncio.sleep(0.6)
                assert cluster.state("t", 0).isr == (0, 1)
            finally:
                client.close()
    run(scenario())


def test_not_enough_replicas_before_and_after_the_append(tmp_path):
    async def scenario():
        async with InProcessCluster(tmp_path, lag_time_max_ms=400) as cluster:
            from kbroker.metadata.image import PartitionState, TopicMetadata
            import uuid
            topic = TopicMetadata("t", uuid.uuid4(), [(0, 1, 2)], {"min.insync.replicas": "2"},
                                  [PartitionState(0, 0, (0, 1, 2), 0)])
            cluster.image = cluster.image.with_topic(topic)
            await cluster._publish_all()
            client = await cluster.client(0)
            try:
                _, answer = await produce(client, "t", 0, batch(1))
                assert answer.error_code == 0
                # Both followers stop: the ISR shrinks to the leader alone while the write
                # waits, so it is on the log but not as safe as asked.
                await cluster.brokers[1].replicas.stop_replication()
                await cluster.brokers[2].replicas.stop_replication()
                _, answer = await produce(client, "t", 0, batch(1), timeout_ms=15000)
                assert answer.error_code == Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, answer
                assert cluster.state("t", 0).isr == (0,)
                # Now the ISR is too small before anything is appended.
                end = cluster.partition(0, "t").log_end_offset
                _, answer = await produce(client, "t", 0, batch(1))
                assert answer.error_code == Errors.NOT_ENOUGH_REPLICAS
                assert cluster.partition(0, "t").log_end_offset == end
                # acks=1 does not care about min.insync.replicas.
                _, answer = await produce(client, "t", 0, batch(1), acks=1)
                assert answer.error_code == 0
            finally:
                client.close()
    run(scenario())


A, B = 0, 1
BOTH_TRUNCATION_PATHS = pytest.mark.parametrize(
    "truncate_on_fetch", [True, False], ids=["diverging_epoch", "offset_for_leader_epoch"])


@contextlib.asynccontextmanager
async def a_leads_epoch_1(tmp_path, truncate_on_fetch: bool):
    """Brokers A and B, topic t with one partition on both, A leading epoch 1; yields the
    cluster and its fetcher settings."""
    from kbroker.metadata.image import PartitionState

    settings = FetcherSettings(wait_max_ms=100, backoff_ms=50, socket_timeout_ms=5000,
                               truncate_on_fetch=truncate_on_fetch)
    async with InProcessCluster(tmp_path, size=2, settings=settings) as cluster:
        await cluster.create_topic("t", [(A, B)], [PartitionState(A, 1, (A, B), 0)])
        yield cluster, settings


@BOTH_TRUNCATION_PATHS
def test_no_divergence_after_two_leader_changes_in_a_row(tmp_path, truncate_on_fetch):
    """KIP-279's case. A leads epoch 1 and has m1, m2; B has only m1. B leads epoch 2 and writes
    m3 where A has m2. A leads again at epoch 3 (B gone) and writes m4. When B returns, asking
    about its epoch 2 gets "epoch 1 ends at m4's offset" (A never saw epoch 2); B must cut back
    to where ITS epoch 1 ended (before m3), not to the offset A names, or it would keep m3."""
    async def scenario():
        async with a_leads_epoch_1(tmp_path, truncate_on_fetch) as (cluster, settings):
            a, b = await cluster.client(A), await cluster.client(B)
            try:
                _, answer = await produce(a, "t", 0, batch(3, b"m1"))  # offsets 0-2, both
                assert answer.error_code == 0
                await cluster.brokers[B].replicas.stop_replication()
                _, answer = await produce(a, "t", 0, batch(3, b"m2"), acks=1)  # 3-5, A only
                assert answer.error_code == 0

                # A "fails": only B hears that it leads epoch 2.
                await cluster.set_state("t", 0, B, 2, (B,), to={B})
                _, answer = await produce(b, "t", 0, batch(3, b"m3"), acks=1)  # 3-5 on B
                assert answer.error_code == 0 and answer.base_offset == 3
                # B "fails": only A hears that it leads epoch 3.
                await cluster.set_state("t", 0, A, 3, (A,), to={A})
                _, answer = await produce(a, "t", 0, batch(3, b"m4"), acks=1)  # 6-8 on A
                assert answer.error_code == 0 and answer.base_offset == 6

                # B comes back as A's follower.
                await cluster._publish_all()
                cluster.brokers[B].replicas.start_replication(
                    cluster.write_isr, settings=settings, inter_broker_listener="PLAINTEXT")
                follower = cluster.partition(B, "t")
                assert await until(lambda: follower.log_end_offset == 9), follower
                expected = log_bytes(cluster.brokers[A], "t", 0, 9)
                assert log_bytes(cluster.brokers[B], "t", 0, 9) == expected
                assert b"m3" not in expected and b"m2" in expected
                assert follower._log.leader_epoch_cache.entries() == [(1, 0), (3, 6)]
                # Caught up and inside epoch 3: back in the ISR.
                assert await until(lambda: cluster.state("t", 0).isr == (A, B))
            finally:
                a.close()
                b.close()
    run(scenario())


@BOTH_TRUNCATION_PATHS
def test_a_leader_that_appended_nothing_rejoins_the_isr_as_a_follower(tmp_path,
                                                                      truncate_on_fetch):
    """B leads epoch 2 and loses it before appending anything (its epoch cache has epoch 2
    starting at its log end, with no data). A leads epoch 3 and writes. Back as A's follower, B
    names epoch 2 as its last fetched epoch; A answers "epoch 1 ends at your log end". B's
    truncation to its own log end must still drop the empty epoch 2, as Kafka's truncateTo
    does, or every fetch gets the same answer and B never rejoins the ISR (a random fault
    schedule left a replica out of the ISR for good this way)."""
    async def scenario():
        async with a_leads_epoch_1(tmp_path, truncate_on_fetch) as (cluster, settings):
            a = await cluster.client(A)
            try:
                _, answer = await produce(a, "t", 0, batch(3, b"m1"))  # 0-2, both
                assert answer.error_code == 0
                # Only B hears that it leads epoch 2; it appends nothing.
                await cluster.set_state("t", 0, B, 2, (B,), to={B})
                follower = cluster.partition(B, "t")
                assert follower._log.leader_epoch_cache.entries() == [(1, 0), (2, 3)]
                # Only A hears that it leads epoch 3, and writes.
                await cluster.set_state("t", 0, A, 3, (A,), to={A})
                _, answer = await produce(a, "t", 0, batch(3, b"m2"), acks=1)  # 3-5 on A
                assert answer.error_code == 0 and answer.base_offset == 3
                # B learns it follows A at epoch 3.
                await cluster._publish_all()
                assert await until(lambda: follower.log_end_offset == 6), follower
                assert follower._log.leader_epoch_cache.entries() == [(1, 0), (3, 3)]
                assert await until(lambda: cluster.state("t", 0).isr == (A, B))
            finally:
                a.close()
    run(scenario())


def test_num_replica_fetchers_spreads_partitions_over_fetchers_per_leader(tmp_path):
    settings = FetcherSettings(num_fetchers=2, wait_max_ms=100, backoff_ms=50,
                               socket_timeout_ms=5000)

    async def scenario():
        async with InProcessCluster(tmp_path, size=2, settings=settings) as cluster:
            await cluster.create_topic("t", [(0, 1)] * 8)
            fetchers = cluster.brokers[1].replicas.fetchers
            # One leader, two fetchers: partitions hash over both (Kafka's fetcher id).
            assert fetchers.fetcher_count() == 2
            client = await cluster.client(0)
            try:
                for index in range(8):
                    _, answer = await produce(client, "t", index, batch(2))
                    assert answer.error_code == 0
                assert all(cluster.partition(1, "t", i).log_end_offset == 2 for i in range(8))
            finally:
                client.close()
    run(scenario())


def test_a_follower_behind_the_leaders_log_start_starts_over_there(tmp_path):
    """OFFSET_OUT_OF_RANGE below the leader's log start offset (DeleteRecords or retention went
    past what the follower has): the follower asks ListOffsets, drops its log and starts at the
    leader's log start offset (Kafka's fetchOffsetAndTruncate)."""
    async def scenario():
        async with InProcessCluster(tmp_path, size=2) as cluster:
            from kbroker.metadata.image import PartitionState
            await cluster.brokers[1].replicas.stop_replication()
            await cluster.create_topic("t", [(0, 1)], [PartitionState(0, 0, (0,), 0)])
            client = await cluster.client(0)
            try:
                for _ in range(3):
                    _, answer = await produce(client, "t", 0, batch(2))
                    assert answer.error_code == 0
                leader = cluster.partition(0, "t")
                assert leader.high_watermark == 6
                assert leader.delete_records_before(4) == 4
                follower = cluster.partition(1, "t")
                assert follower.log_end_offset == 0
                cluster.brokers[1].replicas.start_replication(
                    cluster.write_isr, settings=FAST_FETCH, inter_broker_listener="PLAINTEXT")
                assert await until(lambda: follower.log_end_offset == 6), follower
                assert follower.log_start_offset == 4
                assert log_bytes(cluster.brokers[1], "t", 0, 6) == \
                    log_bytes(cluster.brokers[0], "t", 0, 6)
                assert await until(lambda: cluster.state("t", 0).isr == (0, 1))
            finally:
                client.close()
    run(scenario())
