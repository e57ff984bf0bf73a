"""Incremental fetch sessions (KIP-227) between real brokers in one process: a follower's fetches
carry only the partitions whose fetch changed, the leader answers only partitions with news, and
a follower whose session the leader lost (evicted, restarted) starts a new one and keeps
replicating. Consumers are answered without a session, as before; bad session ids and epochs get
Kafka's errors."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import NamedTuple

from kbroker.protocol.errors import Errors
from kbroker.protocol.messages.fetch import FetchRequest as Q
from kbroker.replica.partition import Partition
from tests.replica.cluster_harness import InProcessCluster, batch, produce, until

PARTITIONS = 20


def run(coro):
    asyncio.run(coro)


class Fetch(NamedTuple):
    replica: int
    session: int  # the request's session id and epoch
    epoch: int
    named: int  # partitions the request names
    forgotten: int
    answer_session: int  # the response's session id
    answered: int  # partitions the response holds


def record_fetches(broker) -> list[Fetch]:
    """Every Fetch the broker is sent from now on, answered."""
    seen = []
    handlers = broker.dispatcher.handlers
    handle = handlers[1]

    def answered(request, response):
        if response is not None:
            seen.append(Fetch(request.replica_state.replica_id, request.session_id,
                              request.session_epoch,
                              sum(len(t.partitions) for t in request.topics),
                              sum(len(t.partitions) for t in request.forgotten_topics_data),
                              response.session_id,
                              sum(len(t.partitions) for t in response.responses)))
        return response

    def recording(ctx, request):
        result = handle(ctx, request)
        if asyncio.iscoroutine(result):
            async def later():
                return answered(request, await result)
            return later()
        return answered(request, result)

    recording.eager = getattr(handle, "eager", False)
    handlers[1] = recording
    return seen


@contextlib.asynccontextmanager
async def watched_leader(tmp_path, overrides=None):
    """Broker 0 leading topic t's partitions, followed by 1 and 2 (caught up): (the cluster,
    the fetches broker 0 is sent from then on, a client of broker 0)."""
    async with InProcessCluster(tmp_path, overrides=overrides) as cluster:
        await led_by_0(cluster)
        seen = record_fetches(cluster.brokers[0])
        client = await cluster.client(0)
        try:
            yield cluster, seen, client
        finally:
            client.close()


async def led_by_0(cluster, name="t"):
    await cluster.create_topic(name, [(0, 1, 2)] * PARTITIONS)
    for index in range(PARTITIONS):
        assert await until(lambda i=index: all(
            cluster.partition(n, name, i).log_end_offset == 0 for n in (1, 2)))


def test_a_follower_sends_only_what_changed_and_hears_only_what_is_new(tmp_path):
    async def scenario():
        async with watched_leader(tmp_path) as (cluster, seen, client):
            assert await until(lambda: sum(1 for f in seen if f.replica == 1) >= 3)
            # Settled and idle: follower 1's fetches name no partition and are answered with
            # none, in its session, at growing epochs.
            idle = [f for f in seen if f.replica == 1][-2:]
            assert all(f.session != 0 and f.answer_session == f.session and f.named == 0
                       and f.answered == 0 for f in idle), idle
            assert idle[1].epoch == idle[0].epoch + 1
            seen.clear()
            _, answer = await produce(client, "t", 7, batch(3))
            assert answer.error_code == 0
            # acks=all completed: both followers fetched the records of partition 7, and only
            # it came back (with its records); the fetch after names only partition 7 (its
            # offset moved) and hears about it alone (its high watermark moved).
            first = next(f for f in seen if f.replica == 1 and f.answered)
            assert first.named == 0 and first.answered == 1, seen
            assert await until(lambda: any(f.replica == 1 and f.named == 1 for f in seen))
            moved = next(f for f in seen if f.replica == 1 and f.named == 1)
            assert moved.answered == 1, seen
            assert await until(lambda: all(cluster.partition(n, "t", 7).high_watermark == 3
                                           for n in (1, 2)))
            assert len(cluster.brokers[0].dispatcher.services.fetch_sessions) == 2
    run(scenario())


def count_reads(cluster, node_id: int, monkeypatch) -> list[int]:
    """How many times broker ``node_id`` reads topic t's logs from now on (one counter)."""
    reads = [0]
    leaders = {id(cluster.partition(node_id, "t", i)) for i in range(PARTITIONS)}
    read = Partition.read

    def counted(self, *args, **kwargs):
        if id(self) in leaders:
            reads[0] += 1
        return read(self, *args, **kwargs)

    monkeypatch.setattr(Partition, "read", counted)
    return reads


def test_idle_session_fetches_read_no_log(tmp_path, monkeypatch):
    # The leader's cost of an idle session fetch must not grow with reads of every partition:
    # neither while the logs are empty (the followers name no epoch) nor once records were
    # replicated (they name the latest one).
    async def scenario():
        async with watched_leader(tmp_path) as (cluster, seen, client):
            assert await until(lambda: sum(1 for f in seen if f.replica == 1 and f.epoch) >= 2)
            reads = count_reads(cluster, 0, monkeypatch)
            fetched = len(seen)
            assert await until(lambda: len(seen) >= fetched + 4)
            assert reads[0] == 0
            _, answer = await produce(client, "t", 7, batch(3))
            assert answer.error_code == 0
            assert await until(lambda: all(cluster.partition(n, "t", 7).high_watermark == 3
                                           for n in (1, 2)))
            assert await until(lambda: reads[0] >= 2)  # the records' reads, by each follower
            await asyncio.sleep(0.1)  # the fetches telling the followers the new HW
            settled, fetched = reads[0], len(seen)
            assert await until(lambda: len(seen) >= fetched + 4)
            assert reads[0] == settled
    run(scenario())


def test_a_follower_whose_session_is_lost_starts_a_new_one_and_keeps_up(tmp_path):
    # One slot for two followers: each new session evicts the other's, so both keep hearing
    # FETCH_SESSION_ID_NOT_FOUND, start over with full fetches, and replicate all the same.
    async def scenario():
        overrides = {"max.incremental.fetch.session.cache.slots": "1"}
        async with watched_leader(tmp_path, overrides) as (_, seen, client):
            for round_ in range(5):
                _, answer = await produce(client, "t", round_ % PARTITIONS, batch(2))
                assert answer.error_code == 0  # acks=all: both followers have it
            assert await until(lambda: any(f.epoch > 0 and f.answer_session == 0
                                           and f.answered == 0 for f in seen))
            lost = [f for f in seen if f.epoch > 0 and f.answer_session == 0]
            assert lost and all(f.named == 0 or f.answered == 0 for f in lost)
            assert any(f.epoch == 0 and f.named == PARTITIONS and f.answer_session != 0
                       for f in seen)
    run(scenario())


def test_without_session_slots_followers_fetch_in_full(tmp_path):
    async def scenario():
        overrides = {"max.incremental.fetch.session.cache.slots": "0"}
        async with watched_leader(tmp_path, overrides) as (_, seen, client):
            _, answer = await produce(client, "t", 3, batch(2))
            assert answer.error_code == 0
            assert await until(lambda: len(seen) >= 4)
            assert all(f.answer_session == 0 and f.named == PARTITIONS
                       and f.answered == PARTITIONS for f in seen), seen
    run(scenario())


def test_consumers_get_no_session_and_bad_sessions_get_kafkas_errors(tmp_path):
    async def scenario():
        async with InProcessCluster(tmp_path) as cluster:
            await led_by_0(cluster)
            topic_id = cluster.image.topic("t").topic_id
            client = await cluster.client(0)

            async def fetch(replica_id, session_id, epoch, partitions=(0,)):
                request = Q(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                            session_id=session_id, session_epoch=epoch,
                            topics=[Q.FetchTopic(topic="t", topic_id=topic_id, partitions=[
                                Q.FetchPartition(partition=p, fetch_offset=0,
                                                 partition_max_bytes=1 << 20)
                                for p in partitions])],
                            replica_state=Q.ReplicaState(replica_id=replica_id))
                return await client.request("Fetch", request, 16)

            try:
                # A consumer asking for a session gets none, and its partitions in full.
                answer = await fetch(-1, 0, 0, range(3))
                assert answer.error_code == 0 and answer.session_id == 0
                assert [p.partition_index for p in answer.responses[0].partitions] == [0, 1, 2]
                answer = await fetch(-1, uuid.uuid4().int % 1000 + 1, 1)
                assert answer.error_code == Errors.FETCH_SESSION_ID_NOT_FOUND.code
                assert answer.responses == [] and answer.session_id == 0
                # A replica's session: the next epoch is 1; any other is refused.
                opened = await fetch(1, 0, 0)
                assert opened.error_code == 0 and opened.session_id != 0
                answer = await fetch(1, opened.session_id, 5, ())
                assert answer.error_code == Errors.INVALID_FETCH_SESSION_EPOCH.code
                answer = await fetch(1, opened.session_id, 1, ())
                assert answer.error_code == 0 and answer.session_id == opened.session_id
                # Another replica cannot use it.
                answer = await fetch(2, opened.session_id, 2, ())
                assert answer.error_code == Errors.FETCH_SESSION_ID_NOT_FOUND.code
                # FINAL epoch closes it: its id is unknown from then on.
                answer = await fetch(1, opened.session_id, -1)
                assert answer.error_code == 0 and answer.session_id == 0
                answer = await fetch(1, opened.session_id, 2, ())
                assert answer.error_code == Errors.FETCH_SESSION_ID_NOT_FOUND.code
            finally:
                client.close()
    run(scenario())
