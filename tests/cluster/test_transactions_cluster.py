"""Transactions across three brokers over a real ZooKeeper: a topic whose partitions are led by
different brokers, so the transaction coordinator writes most markers through WriteTxnMarkers to
other leaders, and those leaders verify the producer's partitions with a coordinator on another
broker (AddPartitionsToTxn v4+). A read_committed consumer sees exactly the committed records and
every partition's last stable offset reaches its high watermark (no hanging transaction)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kbroker.testing import KafkaBroker

from tests.cluster.conftest import SESSION_TIMEOUT_MS

TIMEOUT = 60
TOPIC = "txn-spread"


def _wait_for(condition, what, timeout=TIMEOUT):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.fixture
def brokers(connect_string):
    started = {}
    for broker_id in (1, 2, 3):
        started[broker_id] = KafkaBroker({
            "zookeeper.connect": connect_string, "broker.id": broker_id,
            "zookeeper.session.timeout.ms": 3 * SESSION_TIMEOUT_MS,
            "controlled.shutdown.enable": "false", "auto.leader.rebalance.enable": "false",
            # Three brokers: the internal topics fit (Kafka's defaults would want three too).
            "transaction.state.log.num.partitions": 3, "offsets.topic.num.partitions": 3,
        }).start()
    _wait_for(lambda: all(len(b._inner.broker.metadata.brokers) == 3 for b in started.values()),
              "every broker to see three live brokers")
    yield started
    for broker in started.values():
        broker.stop()


def _bootstrap(brokers):
    return ",".join(b._inner.bootstrap_servers for b in brokers.values())


def _leaders(brokers):
    """{partition: leader id} once every broker's Metadata agrees on a leader for each."""
    admin = AdminClient({"bootstrap.servers": _bootstrap(brokers)})
    md = admin.list_topics(TOPIC, timeout=10)
    parts = md.topics[TOPIC].partitions if TOPIC in md.topics else {}
    leaders = {p: v.leader for p, v in parts.items()}
    return leaders if len(leaders) == 3 and -1 not in leaders.values() else None


def _partition(brokers, leader, index):
    return brokers[leader]._inner.broker.replicas.get(TOPIC, index)


def test_commit_and_abort_across_leaders_on_three_brokers(brokers):
    admin = AdminClient({"bootstrap.servers": _bootstrap(brokers)})
    # One partition per broker: whichever broker coordinates, two leaders are remote.
    admin.create_topics([NewTopic(TOPIC, 3, replica_assignment=[[1], [2], [3]])])[TOPIC].result(30)
    leaders = _wait_for(lambda: _leaders(brokers), "leaders of every partition")
    assert sorted(leaders.values()) == [1, 2, 3]

    producer = Producer({"bootstrap.servers": _bootstrap(brokers), "transactional.id": "spread",
                         "enable.idempotence": True})
    producer.init_transactions(TIMEOUT)
    expected = []
    for round_, commit in enumerate((True, False, True, False, True)):
        producer.begin_transaction()
        for p in range(3):
            value = f"r{round_}-p{p}"
            producer.produce(TOPIC, value=value.encode(), partition=p)
            if commit:
                expected.append(value)
        producer.flush(TIMEOUT)
        if commit:
            producer.commit_transaction(TIMEOUT)
        else:
            producer.abort_transaction(TIMEOUT)

    # Every marker written, on every leader: the LSO reaches the high watermark everywhere.
    def settled():
        parts = [_partition(brokers, leaders[p], p) for p in range(3)]
        return all(x is not None and x.high_watermark > 0
                   and x.last_stable_offset == x.high_watermark for x in parts)
    _wait_for(settled, "the last stable offset to reach the high watermark on every partition")

    consumer = Consumer({"bootstrap.servers": _bootstrap(brokers), "group.id": "spread-reader",
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(3)])
        seen = []
        deadline = time.monotonic() + TIMEOUT
        while len(seen) < len(expected) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.append(message.value().decode())
        # Nothing more arrives: the aborted records stay hidden.
        extra = consumer.poll(2)
        if extra is not None and extra.error() is None:
            seen.append(extra.value().decode())
    finally:
        consumer.close()
    assert sorted(seen) == sorted(expected), seen
