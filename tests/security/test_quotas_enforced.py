"""Quotas enforced on real clients: a confluent-kafka producer under a ``producer_byte_rate``
quota and a consumer under a ``consumer_byte_rate`` quota are held near their quota over a few
seconds (generous bounds: under 3x the quota, while the same client without a quota goes over
20x), and learn of it through ``throttle_time_ms`` (librdkafka's throttle callback).

The broker measures rates over ``quota.window.num=3`` windows of 1 s, so the burst a client may
send before its rate shows (bound x 2 s) is small next to the seconds measured."""

from __future__ import annotations

import time

import pytest

from tests.integration.clients import ensure_topic, running_broker
from tests.security.test_quotas_api import alter

QUOTA = 100_000  # bytes per second
VALUE = b"v" * 1000


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with running_broker(tmp_path_factory.mktemp("quota-enforced") / "data",
                        {"quota.window.num": 3}) as process:
        yield process


def produce_rate(bootstrap: str, topic: str, client_id: str, seconds: float):
    """(bytes acknowledged per second over ``seconds`` of producing flat out, throttle times)."""
    from confluent_kafka import Producer

    throttles = []
    delivered = [0]

    def acked(err, msg):
        if err is None:
            delivered[0] += len(msg.value())

    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id,
                         "batch.size": 10_000, "linger.ms": 2, "acks": 1,
                         "queue.buffering.max.kbytes": 2048,
                         "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    producer.list_topics(topic, timeout=10)
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        try:
            producer.produce(topic, VALUE, on_delivery=acked)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    elapsed = time.monotonic() - start
    rate = delivered[0] / elapsed
    producer.purge()
    producer.flush(30)
    return rate, throttles


def test_producer_byte_rate_holds_a_producer_near_its_quota(broker):
    b = broker.bootstrap
    ensure_topic(b, "quota-produce", 1)
    free, _ = produce_rate(b, "quota-produce", "free-producer", 1.5)
    assert free > 20 * QUOTA, f"unquota'd producer reached only {free:.0f} B/s"
    assert alter(b, [({"client-id": "slow-producer"}, {"producer_byte_rate": QUOTA})])[0][1] == 0
    held, throttles = produce_rate(b, "quota-produce", "slow-producer", 5)
    assert held < 3 * QUOTA, f"quota'd producer reached {held:.0f} B/s (quota {QUOTA})"
    assert held > QUOTA / 10, f"quota'd producer starved at {held:.0f} B/s"
    assert throttles and max(throttles) > 0


def consume_rate(bootstrap: str, topic: str, client_id: str, seconds: float):
    from confluent_kafka import Consumer

    throttles = []
    consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": client_id,
                         "group.id": f"g-{client_id}", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False,
                         "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    consumer.subscribe([topic])
    received = 0
    start = None
    deadline = time.monotonic() + 60
    try:
        while start is None or time.monotonic() - start < seconds:
            assert time.monotonic() < deadline, f"{client_id} got no record in 60 s"
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                if start is None:
                    start = time.monotonic()  # from the first record: the group join is slow
                received += len(msg.value())
        return received / (time.monotonic() - start), throttles
    finally:
        consumer.close()


def test_consumer_byte_rate_holds_a_consumer_near_its_quota(broker):
    b = broker.bootstrap
    ensure_topic(b, "quota-fetch", 1)
    from confluent_kafka import Producer

    # Small batches: a throttled fetch returns nothing (as in Kafka), so a consumer whose every
    # batch is more than its quota allows per window would never get one.
    producer = Producer({"bootstrap.servers": b, "linger.ms": 5, "batch.size": 10_000})
    for _ in range(20_000):  # 20 MB
        while True:
            try:
                producer.produce("quota-fetch", VALUE)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0
    free, _ = consume_rate(b, "quota-fetch", "free-consumer", 1.0)
    assert free > 20 * QUOTA, f"unquota'd consumer reached only {free:.0f} B/s"
    assert alter(b, [({"client-id": "slow-consumer"}, {"consumer_byte_rate": QUOTA})])[0][1] == 0
    held, throttles = consume_rate(b, "quota-fetch", "slow-consumer", 5)
    assert held < 3 * QUOTA, f"quota'd consumer reached {held:.0f} B/s (quota {QUOTA})"
    assert throttles and max(throttles) > 0


def test_request_percentage_throttles_every_api(broker):
    """A client over its request_percentage gets throttle_time_ms on any response (here
    Metadata and ApiVersions), at most one quota window (Kafka bounds the request quota's)."""
    from kbroker.protocol import messages
    from tests.integration.clients import FETCH, METADATA, Wire

    b = broker.bootstrap
    assert alter(b, [({"client-id": "busy"}, {"request_percentage": 0.0001})])[0][1] == 0
    metadata = messages.request_class(METADATA)(topics=None)
    with Wire(b, client_id="busy") as wire:
        throttles = [wire.call(METADATA, 12, metadata).throttle_time_ms for _ in range(3)]
        throttles.append(wire.api_versions(3).throttle_time_ms)
    assert max(throttles) > 0 and max(throttles) <= 1000, throttles
    with Wire(b, client_id="idle") as wire:
        assert wire.call(METADATA, 12, metadata).throttle_time_ms == 0
    # Before KIP-219 (Metadata v5) the broker holds the response back instead; it still says
    # how long. A long-poll Fetch v7 (answered later) goes the same way.
    with Wire(b, client_id="busy") as wire:
        assert max(wire.call(METADATA, 5, metadata).throttle_time_ms for _ in range(2)) > 0
    ensure_topic(b, "quota-poll", 1)  # empty: the fetch long-polls, then is answered
    fetch = messages.request_class(FETCH)
    request = fetch(replica_id=-1, max_wait_ms=50, min_bytes=1, max_bytes=1024,
                    isolation_level=0, topics=[fetch.FetchTopic(topic="quota-poll", partitions=[
                        fetch.FetchPartition(partition=0, fetch_offset=0,
                                             partition_max_bytes=1024)])])
    with Wire(b, client_id="busy") as wire:
        assert max(wire.call(FETCH, 7, request).throttle_time_ms for _ in range(2)) > 0


def _connections_served(bootstrap: str, count: int) -> int:
    """Open ``count`` connections at once, then count those that answer ApiVersions."""
    from tests.integration.clients import Wire

    wires = [Wire(bootstrap, timeout=5) for _ in range(count)]
    served = 0
    for wire in wires:
        try:
            wire.api_versions(3)
            served += 1
        except (OSError, AssertionError, EOFError):
            pass
        finally:
            wire.close()
    return served


def test_ip_connection_creation_rate_quota_closes_connections_over_it(broker):
    b = broker.bootstrap
    assert alter(b, [({"ip": "127.0.0.1"}, {"connection_creation_rate": 2})])[0][1] == 0
    try:
        # 2 per second measured over 2 windows: about 4 are accepted at once, the rest closed.
        served = _connections_served(b, 12)
        assert 1 <= served <= 6, served
    finally:
        assert alter(b, [({"ip": "127.0.0.1"}, {"connection_creation_rate": None})])[0][1] == 0
    assert _connections_served(b, 12) == 12
    assert "throttled" in broker.log() and "connection_creation_rate" in broker.log()
