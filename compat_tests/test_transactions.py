"""Transactions: one transactional producer per client aborts a transaction, then commits one;
a read_committed consumer of the same client sees only the committed records, a
read_uncommitted one sees both (in log order). The broker finalizes ``transaction.version`` 2 as
Kafka 4.x does: the Java producer uses transactions v2 (KIP-890 part 2), the others v1.

Kafka Streams (``exactly_once_v2``) is a client-specific row: the Java driver runs the app."""

from __future__ import annotations

import os
import re

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from compat_tests import harness
from compat_tests.drivers.registry import BY_NAME, ROOT
from compat_tests.harness import Spec
from compat_tests.reference import Wire, ensure_topic, wait_until
from kbroker.protocol import messages

DESCRIBE_TRANSACTIONS = 65


@pytest.mark.compat("transactions")
def test_commit_visible_abort_hidden(broker, driver, cell):
    cell.need(driver, "transactions")
    topic = harness.unique("txn", driver.name)
    ensure_topic(broker.bootstrap, topic)
    transactional_id = harness.unique("txn-id", driver.name)
    aborted = Spec(count=3, value_prefix="aborted-", headers=False, null_key_every=0)
    committed = Spec(count=3, value_prefix="committed-", headers=False, null_key_every=0)
    for spec, result in ((aborted, "abort"), (committed, "commit")):
        run = harness.produce(driver, broker.bootstrap, topic, spec,
                              transactional_id=transactional_id, transaction=result).ok()
        assert {"event": "transaction", "result": result} in run.events, run.describe()
    want_committed = [f"committed-{i}" for i in range(3)]
    got = harness.consume(driver, broker.bootstrap, topic, 3, isolation="read_committed").ok()
    assert [r["value"] for r in got.records] == want_committed
    got = harness.consume(driver, broker.bootstrap, topic, 6, isolation="read_uncommitted").ok()
    assert [r["value"] for r in got.records] == [f"aborted-{i}" for i in range(3)] + \
        want_committed
    cell.note(f"abort hidden from read_committed, commit visible; "
              f"{transaction_protocol(broker.bootstrap, transactional_id)}")


def transaction_protocol(bootstrap: str, transactional_id: str) -> str:
    """Which transaction protocol the client spoke, from its producer epoch after two
    one-transaction producer runs: v1 bumps it once per InitProducerId (1), v2 (KIP-890 part 2)
    also once per EndTxn (3)."""
    with Wire(bootstrap) as wire:
        cls = messages.request_class(DESCRIBE_TRANSACTIONS)
        state = wire.call(DESCRIBE_TRANSACTIONS, 0, cls(
            transactional_ids=[transactional_id])).transaction_states[0]
    assert state.error_code == 0, state
    return ("transactions v2 (epoch bumped by each EndTxn)" if state.producer_epoch >= 3
            else "transactions v1")


# --- Kafka Streams ---------------------------------------------------------------------------

STREAMS_VERSION = re.search(r"<kafka\.version>([^<]+)</kafka\.version>",
                            (ROOT / "compat_tests" / "java" / "pom.xml").read_text()).group(1)
_NARROWED = os.environ.get("COMPAT_CLIENTS")


@pytest.mark.skipif(bool(_NARROWED) and "java" not in _NARROWED.split(","),
                    reason="COMPAT_CLIENTS leaves out java, whose driver runs Kafka Streams")
@pytest.mark.compat("kafka streams: exactly_once_v2 count", client="kafka-streams",
                    version=f"{STREAMS_VERSION} (in the Java driver)")
def test_kafka_streams_exactly_once_v2(broker, cell):
    """A Kafka Streams app with processing.guarantee=exactly_once_v2 counts the records of each
    key of a 2-partition input topic (in-memory store, its changelog written in the same
    transactions) and writes every updated count to the output topic. With the record cache off
    each input record yields one output record: read_committed, each key's counts must be exactly
    1..n in order, and nothing else."""
    _streams_count(broker, cell, "streams-app")


@pytest.mark.skipif(bool(_NARROWED) and "java" not in _NARROWED.split(","),
                    reason="COMPAT_CLIENTS leaves out java, whose driver runs Kafka Streams")
@pytest.mark.compat("kafka streams: group.protocol=streams (KIP-1071), exactly_once_v2 count",
                    client="kafka-streams", version=f"{STREAMS_VERSION} (in the Java driver)")
def test_kafka_streams_streams_protocol(broker, cell):
    """The same count with the streams rebalance protocol: the broker assigns the tasks
    (StreamsGroupHeartbeat) and creates the changelog topic the topology declares."""
    _streams_count(broker, cell, "streams-kip1071", "--property", "group.protocol=streams")


def _streams_count(broker, cell, app_prefix: str, *args):
    java = BY_NAME["java"]
    unavailable = java.unavailable()
    assert unavailable is None, unavailable
    source, sink = harness.unique("streams-in"), harness.unique("streams-out")
    ensure_topic(broker.bootstrap, source, partitions=2)
    ensure_topic(broker.bootstrap, sink, partitions=2)
    counts = {"alpha": 7, "beta": 12, "gamma": 3, "delta": 9, "epsilon": 1}
    keys = [k for k, n in counts.items() for _ in range(n)]
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i, key in enumerate(keys):
        producer.produce(source, key=key.encode(), value=f"v{i}".encode())
    assert producer.flush(30) == 0

    run = harness.run(java, "streams-count", broker.bootstrap, *args, timeout=120, input=source,
                      output=sink, application_id=harness.unique(app_prefix),
                      expect=len(keys), timeout_ms=90_000)
    assert run.rc == 0, f"{run.error_text()}\n{run.describe()}"
    startup = run.of("running")[0]["startupMs"]

    out = read_committed_to_end(broker.bootstrap, sink, 2)
    by_key: dict[str, list[str]] = {}
    for key, value in out:
        by_key.setdefault(key, []).append(value)
    assert by_key == {k: [str(i) for i in range(1, n + 1)] for k, n in counts.items()}
    assert len(out) == len(keys)
    cell.note(f"{len(keys)} records counted exactly once; RUNNING {startup} ms after start()")


def read_committed_to_end(bootstrap: str, topic: str, partitions: int) -> list[tuple[str, str]]:
    """(key, value) of every record a read_committed consumer sees, read up to each partition's
    end (every transaction is complete, so the last stable offset is the high watermark)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": harness.unique("reader"),
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    assignment = [TopicPartition(topic, p, 0) for p in range(partitions)]
    consumer.assign(assignment)
    ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)}
    got = []
    try:
        def done():
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append((msg.key().decode(), msg.value().decode()))
            positions = consumer.position(assignment)
            return all(tp.offset >= ends[tp.partition] for tp in positions)
        wait_until(done, 30, 0, f"the end of {topic} (read_committed)")
    finally:
        consumer.close()
    return got
