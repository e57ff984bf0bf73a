"""Partition waiters seen from real clients over real sockets, with the broker in this process so
the test can look at its partitions: a closed connection takes its parked fetch with it, and an
acks=all produce answers only once the high watermark passes its records."""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from kbroker.config import BrokerConfig
from kbroker.protocol.errors import Errors
from kbroker.server.broker import Broker
from tests.integration.clients import Wire, build_batch
from tests.replica.cluster_harness import until

PHANTOM_FOLLOWER = 99  # an ISR member that never fetches: holds the high watermark back


def run_with_broker(tmp_path, scenario):
    async def main():
        config = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0",
                               "log.dirs": str(tmp_path / "data")})
        async with Broker(config) as broker:
            await scenario(broker, f"127.0.0.1:{broker.port()}")
    asyncio.run(main())


async def create_topic(bootstrap: str, topic: str):
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"first")
    finally:
        await producer.stop()


def test_closed_connection_leaves_no_parked_fetch(tmp_path):
    async def scenario(broker, bootstrap):
        await create_topic(bootstrap, "parked")
        partition = broker.replicas.get("parked", 0)
        # max wait far beyond the test's patience: only the closed connection can unpark it.
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, fetch_max_wait_ms=60_000,
                                    request_timeout_ms=90_000, enable_auto_commit=False)
        consumer.assign([TopicPartition("parked", 0)])
        await consumer.start()
        waiting = None
        try:
            consumer.seek(TopicPartition("parked", 0), 0)
            assert (await consumer.getone()).value == b"first"
            # aiokafka fetches again only while someone waits for records.
            waiting = asyncio.ensure_future(consumer.getone())
            assert await until(lambda: partition.parked_fetches == 1), "the fetch never parked"
        finally:
            await consumer.stop()
            if waiting is not None:
                waiting.cancel()
                await asyncio.gather(waiting, return_exceptions=True)
        assert await until(lambda: partition.parked_fetches == 0), \
            "the closed connection's fetch is still parked on the partition"
    run_with_broker(tmp_path, scenario)


def test_acks_all_waits_for_the_high_watermark(tmp_path):
    async def scenario(broker, bootstrap):
        await create_topic(bootstrap, "acks")
        partition = broker.replicas.get("acks", 0)
        partition.update_isr({broker.node_id, PHANTOM_FOLLOWER})
        partition.update_follower_end_offset(PHANTOM_FOLLOWER, partition.log_end_offset)
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all",
                                    request_timeout_ms=60_000)
        await producer.start()
        try:
            sent = asyncio.ensure_future(producer.send_and_wait("acks", b"second"))
            assert await until(lambda: partition.pending_commits == 1), "no commit waiter"
            assert partition.log_end_offset == 2 and partition.high_watermark == 1
            assert not sent.done()
            partition.update_follower_end_offset(PHANTOM_FOLLOWER, 2)
            metadata = await asyncio.wait_for(sent, 30)
            assert metadata.offset == 1
            # acks=1 answers once appended, whatever the high watermark.
            await producer.stop()
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1)
            await producer.start()
            metadata = await asyncio.wait_for(producer.send_and_wait("acks", b"third"), 30)
            assert metadata.offset == 2 and partition.high_watermark == 2
        finally:
            await producer.stop()

        # A produce not committed within its timeout_ms answers REQUEST_TIMED_OUT.
        def produce_with_short_timeout():
            with Wire(bootstrap) as wire:
                wire.api_versions()
                return wire.produce("acks", 0, build_batch([(None, b"fourth")]), acks=-1,
                                    timeout_ms=50)
        answer = await asyncio.to_thread(produce_with_short_timeout)
        assert answer.error_code == Errors.REQUEST_TIMED_OUT.code
        assert answer.base_offset == 3  # on the log, not committed
    run_with_broker(tmp_path, scenario)
