"""Transactions with real clients over real sockets.

- confluent-kafka (librdkafka): a committed transaction is visible to read_committed, an aborted
  one only to read_uncommitted; the last stable offset holds at an open transaction (raw Fetch and
  ListOffsets with read_committed) and moves when it commits; a second producer with the same
  transactional id fences the first (its commit fails) and its open transaction is aborted;
  send_offsets_to_transaction's offsets are pending (OffsetFetch require_stable answers
  UNSTABLE_OFFSET_COMMIT, plain OffsetFetch does not see them) until the commit; an abandoned
  transaction is aborted by the coordinator after transaction.timeout.ms; a transaction open
  when the broker is killed (-9) is recovered (LSO, .txnindex) and aborted by the next instance.
- kafka-python, aiokafka and Java (kafka-clients, through the compatibility driver)
  transactional producers: commit and abort.

Every read uses a committed "end" record written last, so reads wait for data, not for time.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from kbroker.protocol import messages
from tests.integration.clients import (LATEST, Wire, ensure_topic, partition_dir,
                                       running_broker, wait_until)

LIST_OFFSETS, FETCH, OFFSET_FETCH, FIND_COORDINATOR = 2, 1, 9, 10
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
UNSTABLE_OFFSET_COMMIT = 88
TXN_INDEX_ENTRY = 34


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    overrides = {"num.partitions": 1,
                 "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200}
    with running_broker(tmp_path_factory.mktemp("txn") / "data", overrides) as broker:
        yield broker


def new_topic(bootstrap: str) -> str:
    topic = "txn-" + uuid.uuid4().hex[:8]
    ensure_topic(bootstrap, topic)
    return topic


def producer(bootstrap: str, transactional_id: str, **extra) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                  **extra})
    p.init_transactions(30)
    return p


def commit_end(bootstrap: str, topic: str) -> None:
    """A committed "end" record: readers stop there."""
    p = producer(bootstrap, "end-" + uuid.uuid4().hex[:6])
    p.begin_transaction()
    p.produce(topic, b"end")
    p.commit_transaction(30)


def read_all(bootstrap: str, topic: str, isolation: str, timeout: float = 30) -> list[str]:
    """Values from partition 0 up to and including the first "end"."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader-" + uuid.uuid4().hex,
                         "isolation.level": isolation, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[str] = []
    try:
        def done():
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value().decode())
            return got and got[-1] == "end"
        wait_until(done, timeout, 0, f"'end' in {topic} ({isolation})")
    finally:
        consumer.close()
    return got


def list_latest(bootstrap: str, topic: str, isolation: int) -> int:
    with Wire(bootstrap) as wire:
        cls = messages.request_class(LIST_OFFSETS)
        request = cls(replica_id=-1, isolation_level=isolation, topics=[cls.ListOffsetsTopic(
            name=topic, partitions=[cls.ListOffsetsPartition(
                partition_index=0, timestamp=LATEST, current_leader_epoch=-1)])],
            timeout_ms=10000)
        response = wire.call(LIST_OFFSETS, None, request)
    partition = response.topics[0].partitions[0]
    assert partition.error_code == 0
    return partition.offset


def fetch_committed(bootstrap: str, topic: str):
    with Wire(bootstrap) as wire:
        cls = messages.request_class(FETCH)
        request = cls(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                      isolation_level=READ_COMMITTED, session_id=0, session_epoch=-1,
                      topics=[cls.FetchTopic(topic=topic, partitions=[cls.FetchPartition(
                          partition=0, fetch_offset=0, log_start_offset=-1,
                          partition_max_bytes=1 << 20, current_leader_epoch=-1)])])
        response = wire.call(FETCH, 12, request)
    return response.responses[0].partitions[0]


def offset_fetch(bootstrap: str, group: str, topic: str, require_stable: bool):
    with Wire(bootstrap) as wire:
        coordinator = wire.call(FIND_COORDINATOR, 3, messages.request_class(FIND_COORDINATOR)(
            key=group, key_type=0))
        assert coordinator.error_code == 0
        cls = messages.request_class(OFFSET_FETCH)
        request = cls(group_id=group, require_stable=require_stable, topics=[
            cls.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])])
        response = wire.call(OFFSET_FETCH, 7, request)
    partition = response.topics[0].partitions[0]
    return partition.error_code, partition.committed_offset


# --- confluent-kafka ---------------------------------------------------------------------------

def test_commit_visible_abort_invisible_to_read_committed(shared):
    bootstrap = shared.bootstrap
    topic = new_topic(bootstrap)
    p = producer(bootstrap, "tx-" + uuid.uuid4().hex[:6])
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, f"c{i}".encode())
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(2):
        p.produce(topic, f"a{i}".encode())
    p.flush(30)
    p.abort_transaction(30)
    commit_end(bootstrap, topic)
    assert read_all(bootstrap, topic, "read_committed") == ["c0", "c1", "c2", "end"]
    assert read_all(bootstrap, topic, "read_uncommitted") == ["c0", "c1", "c2", "a0", "a1",
                                                              "end"]
    # The abort is in the aborted-transaction index, in Kafka's 34-byte entry format.
    index = partition_dir(shared, topic, 0) / "00000000000000000000.txnindex"
    assert index.stat().st_size == TXN_INDEX_ENTRY


def test_last_stable_offset_holds_at_open_transaction(shared):
    bootstrap = shared.bootstrap
    topic = new_topic(bootstrap)
    p = producer(bootstrap, "tx-" + uuid.uuid4().hex[:6])
    p.begin_transaction()
    p.produce(topic, b"open")
    p.flush(30)
    first_open = 0
    assert list_latest(bootstrap, topic, READ_COMMITTED) == first_open
    assert list_latest(bootstrap, topic, READ_UNCOMMITTED) == first_open + 1
    data = fetch_committed(bootstrap, topic)
    assert data.last_stable_offset == first_open and data.high_watermark == first_open + 1
    assert not data.records
    p.commit_transaction(30)
    # The COMMIT marker at offset 1: everything below 2 is stable.
    assert list_latest(bootstrap, topic, READ_COMMITTED) == 2
    assert fetch_committed(bootstrap, topic).last_stable_offset == 2


def test_second_instance_fences_the_first(shared):
    bootstrap = shared.bootstrap
    topic = new_topic(bootstrap)
    transactional_id = "tx-" + uuid.uuid4().hex[:6]
    zombie = producer(bootstrap, transactional_id)
    zombie.begin_transaction()
    zombie.produce(topic, b"zombie")
    zombie.flush(30)
    fresh = producer(bootstrap, transactional_id)  # aborts the zombie's open transaction
    with pytest.raises(KafkaException) as failure:
        zombie.commit_transaction(30)
    assert failure.value.args[0].fatal() or "fenced" in str(failure.value).lower()
    fresh.begin_transaction()
    fresh.produce(topic, b"fresh")
    fresh.commit_transaction(30)
    commit_end(bootstrap, topic)
    assert read_all(bootstrap, topic, "read_committed") == ["fresh", "end"]


def test_send_offsets_to_transaction(shared):
    bootstrap = shared.bootstrap
    source, sink = new_topic(bootstrap), new_topic(bootstrap)
    group = "eos-" + uuid.uuid4().hex[:6]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    p = producer(bootstrap, "tx-" + uuid.uuid4().hex[:6])
    p.begin_transaction()
    p.produce(sink, b"out")
    p.send_offsets_to_transaction([TopicPartition(source, 0, 5)],
                                  consumer.consumer_group_metadata(), 30)
    p.flush(30)
    assert offset_fetch(bootstrap, group, source, require_stable=True) == (
        UNSTABLE_OFFSET_COMMIT, -1)
    assert offset_fetch(bootstrap, group, source, require_stable=False) == (0, -1)
    p.commit_transaction(30)
    assert offset_fetch(bootstrap, group, source, require_stable=True) == (0, 5)
    # An aborted transaction's offsets are dropped.
    p.begin_transaction()
    p.send_offsets_to_transaction([TopicPartition(source, 0, 9)],
                                  consumer.consumer_group_metadata(), 30)
    p.abort_transaction(30)
    assert offset_fetch(bootstrap, group, source, require_stable=True) == (0, 5)
    consumer.close()


def test_abandoned_transaction_times_out(shared):
    bootstrap = shared.bootstrap
    topic = new_topic(bootstrap)
    p = producer(bootstrap, "tx-" + uuid.uuid4().hex[:6], **{"transaction.timeout.ms": 1000})
    p.begin_transaction()
    p.produce(topic, b"abandoned")
    p.flush(30)
    # The coordinator aborts it: an ABORT marker at offset 1 makes everything below 2 stable.
    wait_until(lambda: list_latest(bootstrap, topic, READ_COMMITTED) == 2, 30,
               message="the timed-out transaction to be aborted")
    with pytest.raises(KafkaException):
        p.commit_transaction(30)
    commit_end(bootstrap, topic)
    assert read_all(bootstrap, topic, "read_committed") == ["end"]


def test_transaction_open_across_kill_and_restart(broker_factory, tmp_path):
    broker = broker_factory()
    bootstrap = broker.bootstrap
    topic = new_topic(bootstrap)
    transactional_id = "tx-restart"
    p = producer(bootstrap, transactional_id)
    p.begin_transaction()
    p.produce(topic, b"committed")
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce(topic, b"in-flight")
    p.flush(30)
    assert list_latest(bootstrap, topic, READ_COMMITTED) == 2
    broker.kill()
    broker = broker.restart()
    bootstrap = broker.bootstrap
    # Producer state recovered from the log: the open transaction still holds the LSO.
    assert list_latest(bootstrap, topic, READ_COMMITTED) == 2
    # The next instance aborts what the previous one left (coordinator state by replay).
    successor = producer(bootstrap, transactional_id)
    assert list_latest(bootstrap, topic, READ_COMMITTED) == 4
    successor.begin_transaction()
    successor.produce(topic, b"end")
    successor.commit_transaction(30)
    assert read_all(bootstrap, topic, "read_committed") == ["committed", "end"]
    index = partition_dir(broker, topic, 0) / "00000000000000000000.txnindex"
    assert index.stat().st_size == TXN_INDEX_ENTRY


def test_transaction_left_by_a_crash_times_out_after_restart(broker_factory):
    """Nobody comes back for it: the restarted coordinator (state by replay) aborts it when its
    timeout passes, and writes the markers (Apache Kafka 4.3.1 on one node can leave it)."""
    broker = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": 200})
    topic = new_topic(broker.bootstrap)
    p = producer(broker.bootstrap, "tx-" + uuid.uuid4().hex[:6], **{"transaction.timeout.ms": 2000})
    p.begin_transaction()
    p.produce(topic, b"left")
    p.flush(30)
    broker.kill()
    broker = broker.restart()
    # The ABORT marker at offset 1 makes everything below 2 stable.
    wait_until(lambda: list_latest(broker.bootstrap, topic, READ_COMMITTED) == 2, 30,
               message="the transaction left by the crash to be aborted")
    commit_end(broker.bootstrap, topic)
    assert read_all(broker.bootstrap, topic, "read_committed") == ["end"]


# --- kafka-python and aiokafka -----------------------------------------------------------------

def test_kafka_python_transactions(shared):
    from kafka import KafkaProducer

    bootstrap = shared.bootstrap
    topic = new_topic(bootstrap)
    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-" + uuid.uuid4().hex[:6])
    p.init_transactions()
    p.begin_transaction()
    p.send(topic, b"kp-commit")
    p.commit_transaction()
    p.begin_transaction()
    p.send(topic, b"kp-abort")
    p.flush()
    p.abort_transaction()
    p.close()
    commit_end(bootstrap, topic)
    assert read_all(bootstrap, topic, "read_committed") == ["kp-commit", "end"]
    assert read_all(bootstrap, topic, "read_uncommitted") == ["kp-commit", "kp-abort", "end"]


def test_aiokafka_transactions(shared):
    from aiokafka import AIOKafkaProducer

    bootstrap = shared.bootstrap
    topic = new_topic(bootstrap)

    async def run():
        p = AIOKafkaProducer(bootstrap_servers=bootstrap,
                             transactional_id="aio-" + uuid.uuid4().hex[:6])
        await p.start()
        try:
            async with p.transaction():
                await p.send_and_wait(topic, b"aio-commit")
            await p.begin_transaction()
            await p.send_and_wait(topic, b"aio-abort")
            await p.abort_transaction()
        finally:
            await p.stop()

    asyncio.run(run())
    commit_end(bootstrap, topic)
    assert read_all(bootstrap, topic, "read_committed") == ["aio-commit", "end"]
    assert read_all(bootstrap, topic, "read_uncommitted") == ["aio-commit", "aio-abort", "end"]


def test_consume_transform_produce_with_a_group_member(shared):
    """Exactly-once loop: a subscribed consumer (a real group member, so TxnOffsetCommit carries
    its generation and member id), one transaction per batch; the group's committed offsets and
    the read_committed output match the input."""
    bootstrap = shared.bootstrap
    source, sink = new_topic(bootstrap), new_topic(bootstrap)
    group = "eos-" + uuid.uuid4().hex[:6]
    feeder = Producer({"bootstrap.servers": bootstrap})
    for i in range(20):
        feeder.produce(source, f"m{i}".encode())
    feeder.flush(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([source])
    p = producer(bootstrap, "eos-" + uuid.uuid4().hex[:6])
    seen = 0

    def step():
        nonlocal seen
        batch = [m for m in consumer.consume(5, 0.5) if m.error() is None]
        if not batch:
            return seen == 20
        p.begin_transaction()
        for m in batch:
            p.produce(sink, m.value().upper())
        p.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                      consumer.consumer_group_metadata(), 30)
        p.commit_transaction(30)
        seen += len(batch)
        return seen == 20

    wait_until(step, 60, 0, "20 records through the transactional loop")
    committed = consumer.committed([TopicPartition(source, 0)], 30)
    assert committed[0].offset == 20
    consumer.close()
    commit_end(bootstrap, sink)
    assert read_all(bootstrap, sink, "read_committed") == [f"M{i}" for i in range(20)] + ["end"]


# --- Java (kafka-clients through the compatibility driver) --------------------------------------

JAVA_DRIVER = Path(__file__).resolve().parents[2] / "compat_tests" / "java" / "target" / \
    "kbroker-java-driver.jar"


def java_produce(bootstrap: str, topic: str, transactional_id: str, result: str, prefix: str):
    assert JAVA_DRIVER.exists(), "build the Java driver: scripts/install-test-deps.sh"
    out = subprocess.run(["java", "-jar", str(JAVA_DRIVER), "produce", "--bootstrap", bootstrap,
                          "--topic", topic, "--count", "3", "--value-prefix", prefix,
                          "--transactional-id", transactional_id, "--transaction", result],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    events = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert {"event": "transaction", "result": result} in events


def test_java_transactions(shared):
    bootstrap = shared.bootstrap
    topic = new_topic(bootstrap)
    transactional_id = "java-" + uuid.uuid4().hex[:6]
    java_produce(bootstrap, topic, transactional_id, "commit", "jc-")
    java_produce(bootstrap, topic, transactional_id, "abort", "ja-")
    commit_end(bootstrap, topic)
    committed = [f"jc-{i}" for i in range(3)]
    assert read_all(bootstrap, topic, "read_committed") == committed + ["end"]
    assert read_all(bootstrap, topic, "read_uncommitted") == \
        committed + [f"ja-{i}" for i in range(3)] + ["end"]
