"""Transactions across three brokers over a real ZooKeeper: a topic whose partitions are led by
different brokers, so the transaction coordinator writes most markers through WriteTxnMarkers to
other leaders, and those leaders verify the producer's partitions with a coordinator on another
broker (AddPartitionsToTxn v4+). A read_committed consumer sees exactly the committed records and
every partition's last stable offset reaches its high watermark (no hanging transaction).

Also: a partition leader that moves mid-transaction (controlled shutdown of the broker leading
it, not the coordinator) gets its marker on the new leader; and a coordinator whose markers
wait for a partition whose only replica is gone still stops (the harness fails a stop that
hangs)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.conftest import start_brokers, stop_brokers, wait_for

TIMEOUT = 60
TOPIC = "txn-spread"


def _wait_for(condition, what, timeout=TIMEOUT):
    return wait_for(condition, what, timeout)


def _start_brokers(connect_string, **settings):
    # Three brokers: the internal topics fit (Kafka's defaults would want three too).
    return start_brokers(connect_string, lambda broker_id: {
        "transaction.state.log.num.partitions": 3, "offsets.topic.num.partitions": 3,
        **settings})


@pytest.fixture
def brokers(connect_string):
    started = _start_brokers(connect_string)
    yield started
    stop_brokers(started)


@pytest.fixture
def replicated(connect_string):
    """Three brokers whose stop is a controlled shutdown (leadership moves first) and whose
    internal topics survive one broker's loss."""
    started = _start_brokers(connect_string, **{
        "controlled.shutdown.enable": "true",
        "transaction.state.log.replication.factor": 3, "transaction.state.log.min.isr": 1,
        "offsets.topic.replication.factor": 3})
    yield started
    stop_brokers(started)


def _bootstrap(brokers):
    return ",".join(b._inner.bootstrap_servers for b in brokers.values()
                    if b._inner.broker is not None)


def _leaders(brokers, topic=TOPIC, allow_offline=False):
    """{partition: leader id} once Metadata names a leader for each (or, with
    ``allow_offline``, -1 for a partition whose replicas are all gone)."""
    admin = AdminClient({"bootstrap.servers": _bootstrap(brokers)})
    md = admin.list_topics(topic, timeout=10)
    parts = md.topics[topic].partitions if topic in md.topics else {}
    leaders = {p: v.leader for p, v in parts.items()}
    return leaders if len(leaders) == 3 and (allow_offline or -1 not in leaders.values()) \
        else None


def _partition(brokers, leader, index, topic=TOPIC):
    return brokers[leader]._inner.broker.replicas.get(topic, index)


def _coordinator(brokers, transactional_id):
    """The id of the broker whose transaction coordinator hosts ``transactional_id``."""
    def find():
        for broker_id, b in brokers.items():
            txn = b._inner.broker.txn_coordinator if b._inner.broker is not None else None
            if txn is not None and txn.partition_for(transactional_id) in txn.runtime.shards:
                return broker_id
        return None
    return _wait_for(find, f"the coordinator of {transactional_id!r}")


def _create_topic(brokers, topic, replica_assignment):
    """Create ``topic`` (three partitions) and return its leaders once Metadata names them."""
    admin = AdminClient({"bootstrap.servers": _bootstrap(brokers)})
    admin.create_topics([NewTopic(topic, 3, replica_assignment=replica_assignment)]
                        )[topic].result(30)
    return _wait_for(lambda: _leaders(brokers, topic), "leaders of every partition")


def _transactional_producer(brokers, transactional_id):
    producer = Producer({"bootstrap.servers": _bootstrap(brokers),
                         "transactional.id": transactional_id, "enable.idempotence": True})
    producer.init_transactions(TIMEOUT)
    return producer


def _assert_reads_committed(brokers, leaders, topic, expected, group):
    """Every marker written, on every leader (the LSO reaches the high watermark everywhere),
    then a read_committed consumer sees exactly ``expected``."""
    _wait_for(lambda: _settled(brokers, leaders, topic),
              "the last stable offset to reach the high watermark on every partition")
    seen = _read_committed(brokers, topic, len(expected), group)
    assert sorted(seen) == sorted(expected), seen


def _settled(brokers, leaders, topic):
    """Every partition's last stable offset at its high watermark, on its leader."""
    parts = [_partition(brokers, leaders[p], p, topic) for p in range(3)]
    return all(x is not None and x.high_watermark > 0
               and x.last_stable_offset == x.high_watermark for x in parts)


def _read_committed(brokers, topic, expected_count, group):
    consumer = Consumer({"bootstrap.servers": _bootstrap(brokers), "group.id": group,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    seen = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
        deadline = time.monotonic() + TIMEOUT
        while len(seen) < expected_count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.append(message.value().decode())
        # Nothing more arrives: the aborted records stay hidden.
        extra = consumer.poll(2)
        if extra is not None and extra.error() is None:
            seen.append(extra.value().decode())
    finally:
        consumer.close()
    return seen


def test_commit_and_abort_across_leaders_on_three_brokers(brokers):
    # One partition per broker: whichever broker coordinates, two leaders are remote.
    leaders = _create_topic(brokers, TOPIC, [[1], [2], [3]])
    assert sorted(leaders.values()) == [1, 2, 3]

    producer = _transactional_producer(brokers, "spread")
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

    _assert_reads_committed(brokers, leaders, TOPIC, expected, "spread-reader")


def test_marker_reaches_a_leader_that_moved_mid_transaction(replicated):
    brokers, topic, tid = replicated, "txn-moved", "mover"
    leaders = _create_topic(brokers, topic, [[1, 2], [2, 3], [3, 1]])
    producer = _transactional_producer(brokers, tid)
    coordinator = _coordinator(brokers, tid)
    # A partition led by another broker than the coordinator: its leader leaves mid-transaction.
    moved = next(p for p in range(3) if leaders[p] != coordinator)
    victim = leaders[moved]

    producer.begin_transaction()
    expected = [f"m-p{p}" for p in range(3)]
    for p, value in enumerate(expected):
        producer.produce(topic, value=value.encode(), partition=p)
    producer.flush(TIMEOUT)
    brokers[victim].stop()  # controlled shutdown: the follower takes the partition over
    new_leaders = _wait_for(lambda: (lambda ls: ls if ls and victim not in ls.values() else None)(
        _leaders(brokers, topic)), f"partition {moved} to move off broker {victim}")
    assert new_leaders[moved] != victim and coordinator != victim
    producer.commit_transaction(TIMEOUT)

    _assert_reads_committed(brokers, new_leaders, topic, expected, "mover-reader")


def test_coordinator_stops_while_markers_wait_for_a_dead_broker(brokers):
    topic, tid = "txn-stranded", "stranded"
    leaders = _create_topic(brokers, topic, [[1], [2], [3]])
    producer = _transactional_producer(brokers, tid)
    coordinator = _coordinator(brokers, tid)
    stranded = next(p for p in range(3) if leaders[p] != coordinator)
    victim = leaders[stranded]

    producer.begin_transaction()
    for p in range(3):
        producer.produce(topic, value=f"s-p{p}".encode(), partition=p)
    producer.flush(TIMEOUT)
    brokers[victim].stop()  # the only replica of the partition: no leader to write to
    _wait_for(lambda: (_leaders(brokers, topic, allow_offline=True) or {}).get(stranded) == -1,
              f"partition {stranded} to go offline")
    producer.commit_transaction(TIMEOUT)  # answered once PrepareCommit is written
    txn = brokers[coordinator]._inner.broker.txn_coordinator
    pending = _wait_for(lambda: txn.unmarked.get(tid) == {(topic, stranded)} and txn.unmarked[tid],
                        "the other markers written, the stranded one pending")
    assert pending == {(topic, stranded)}
    # The harness fails a stop that does not finish (30 s) and says what each task was doing.
    brokers[coordinator].stop()
