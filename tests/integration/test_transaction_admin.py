"""The transaction admin APIs over real sockets: Kafka 4.4.0's own ``kafka-transactions.sh``
(``org.apache.kafka.tools.TransactionsCommand``, from tools/kafka_ref) against kbroker for list
(with its state, duration and transactional-id pattern filters), describe, describe-producers,
find-hanging and abort; confluent-kafka (librdkafka) producers make the transactions. Kafka's
errors for bad input are checked with raw requests.

A *hanging* transaction (data in a partition that its coordinator knows nothing about) is made
the way it happens in the field: a producer writes a transactional batch without
AddPartitionsToTxn on a broker with ``transaction.partition.verification.enable=false`` (the
KIP-890 part 1 check would refuse it).
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kbroker.protocol import messages
from tests.integration.clients import (Wire, build_batch, ensure_topic, running_broker,
                                       wait_until)

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "kafka_ref"))
import run_kafka  # noqa: E402  (stdlib-only launcher of the reference Kafka)

PRODUCE, INIT_PRODUCER_ID = 0, 22
DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 61, 65, 66
NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST = 0, 3, 42
TRANSACTIONAL_ID_NOT_FOUND, INVALID_REGULAR_EXPRESSION = 105, 128


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    overrides = {"num.partitions": 1, "transaction.state.log.num.partitions": 3,
                 "transaction.partition.verification.enable": False}
    with running_broker(tmp_path_factory.mktemp("txnadmin") / "data", overrides) as process:
        yield process


def transactions_tool(bootstrap: str, *args: str) -> list[list[str]]:
    """Run kafka-transactions.sh; its table as rows of whitespace-separated cells."""
    cmd = run_kafka.java_cmd("org.apache.kafka.tools.TransactionsCommand",
                             ["--bootstrap-server", bootstrap, *args], run_kafka.DEFAULT_VERSION,
                             None, heap="256M")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{args}: {done.stdout}{done.stderr}"
    return [line.split() for line in done.stdout.splitlines() if line.strip()]


def new_topic(bootstrap: str) -> str:
    topic = "txnadmin-" + uuid.uuid4().hex[:8]
    ensure_topic(bootstrap, topic)
    return topic


def open_transaction(bootstrap: str, topic: str, transactional_id: str) -> Producer:
    """A producer with an open transaction holding one record in ``topic``-0."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"open", partition=0)
    assert producer.flush(30) == 0
    return producer


def listed(rows: list[list[str]]) -> dict[str, list[str]]:
    """``list`` output: transactional id -> [coordinator, producer id, state]."""
    assert rows[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    return {row[0]: row[1:] for row in rows[1:]}


def producers_of(bootstrap: str, topic: str) -> dict[str, dict[str, str]]:
    rows = transactions_tool(bootstrap, "describe-producers", "--topic", topic, "--partition", "0")
    header = rows[0]
    return {row[0]: dict(zip(header, row)) for row in rows[1:]}


def test_list_filters_and_describe(broker):
    bootstrap = broker.bootstrap
    topic = new_topic(bootstrap)
    prefix = "admin-" + uuid.uuid4().hex[:6]
    open_id, done_id = prefix + "-open", prefix + "-done"
    opened = open_transaction(bootstrap, topic, open_id)
    finished = open_transaction(bootstrap, topic, done_id)
    finished.commit_transaction(30)

    everything = listed(transactions_tool(bootstrap, "list"))
    assert everything[open_id][2] == "Ongoing"
    wait_until(lambda: listed(transactions_tool(bootstrap, "list"))[done_id][2]
               == "CompleteCommit", timeout=30, message="commit completes")
    mine = listed(transactions_tool(bootstrap, "list", "--transactional-id-pattern",
                                    prefix + "-.*"))
    assert set(mine) == {open_id, done_id}
    assert set(listed(transactions_tool(bootstrap, "list", "--transactional-id-pattern",
                                        prefix + "-op.*"))) == {open_id}
    # The pattern must match the whole id, as Java's Matcher.matches().
    assert listed(transactions_tool(bootstrap, "list", "--transactional-id-pattern",
                                    prefix)) == {}
    # Only transactions running longer than an hour: none of ours.
    assert listed(transactions_tool(bootstrap, "list", "--duration-filter", "3600000")) == {}
    running = listed(transactions_tool(bootstrap, "list", "--duration-filter", "0"))
    assert open_id in running

    rows = transactions_tool(bootstrap, "describe", "--transactional-id", open_id)
    described = dict(zip(rows[0], rows[1]))
    assert described["TransactionalId"] == open_id
    assert described["TransactionState"] == "Ongoing"
    assert described["ProducerId"] == everything[open_id][1]
    assert described["TopicPartitions"] == f"{topic}-0"
    assert int(described["TransactionTimeoutMs"]) == 60000
    opened.abort_transaction(30)


def test_describe_producers_and_abort(broker):
    bootstrap = broker.bootstrap
    topic = new_topic(bootstrap)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    producer.produce(topic, value=b"first", partition=0)
    assert producer.flush(30) == 0
    opened = open_transaction(bootstrap, topic, "abortable-" + uuid.uuid4().hex[:6])

    states = producers_of(bootstrap, topic)
    assert len(states) == 2
    open_txns = [s for s in states.values() if s["CurrentTransactionStartOffset"] != "None"]
    assert len(open_txns) == 1
    started = open_txns[0]
    assert started["CurrentTransactionStartOffset"] == "1"  # after the idempotent record
    assert started["LastSequence"] == "0"

    transactions_tool(bootstrap, "abort", "--topic", topic, "--partition", "0",
                      "--start-offset", "1")
    wait_until(lambda: all(s["CurrentTransactionStartOffset"] == "None"
                           for s in producers_of(bootstrap, topic).values()),
               timeout=30, message="the ABORT marker closes the transaction")
    # The producer's own transaction is fenced at its partition now; its abort still completes.
    opened.abort_transaction(30)


def test_find_hanging_and_abort_it(broker):
    bootstrap = broker.bootstrap
    topic = new_topic(bootstrap)
    with Wire(bootstrap) as wire:
        init = wire.call(INIT_PRODUCER_ID, 4, messages.request_class(INIT_PRODUCER_ID)(
            transactional_id=None, transaction_timeout_ms=60000))
        assert init.error_code == NONE
        batch = build_batch([b"hanging"], producer_id=init.producer_id,
                            producer_epoch=init.producer_epoch, base_sequence=0,
                            transactional=True)
        answer = wire.produce(topic, 0, batch, transactional_id="ghost-" + uuid.uuid4().hex[:6])
        assert answer.error_code == NONE

    def hanging():
        rows = transactions_tool(bootstrap, "find-hanging", "--topic", topic,
                                 "--max-transaction-timeout", "0")
        return [dict(zip(rows[0], row)) for row in rows[1:]]

    found = wait_until(hanging, timeout=30, message="the hanging transaction is found")
    assert len(found) == 1
    assert found[0]["ProducerId"] == str(init.producer_id)
    assert found[0]["StartOffset"] == "0"
    transactions_tool(bootstrap, "abort", "--topic", topic, "--partition", "0",
                      "--start-offset", "0")
    assert hanging() == []


def test_bad_input_gets_kafkas_errors(broker):
    with Wire(broker.bootstrap) as wire:
        describe = messages.request_class(DESCRIBE_TRANSACTIONS)
        response = wire.call(DESCRIBE_TRANSACTIONS, 0, describe(
            transactional_ids=["never-seen-" + uuid.uuid4().hex[:6], ""]))
        assert [s.error_code for s in response.transaction_states] == [
            TRANSACTIONAL_ID_NOT_FOUND, INVALID_REQUEST]

        listing = messages.request_class(LIST_TRANSACTIONS)
        response = wire.call(LIST_TRANSACTIONS, 2, listing(
            state_filters=["Ongoing", "Sleeping"], producer_id_filters=[],
            transactional_id_pattern="(unclosed"))
        assert response.error_code == INVALID_REGULAR_EXPRESSION
        assert response.unknown_state_filters == ["Sleeping"]
        response = wire.call(LIST_TRANSACTIONS, 0, listing(
            state_filters=["Sleeping"], producer_id_filters=[-5]))
        assert response.error_code == NONE
        assert response.unknown_state_filters == ["Sleeping"]
        assert response.transaction_states == []

        producers = messages.request_class(DESCRIBE_PRODUCERS)
        response = wire.call(DESCRIBE_PRODUCERS, 0, producers(topics=[
            producers.TopicRequest(name="no-such-topic", partition_indexes=[0])]))
        assert response.topics[0].partitions[0].error_code == UNKNOWN_TOPIC_OR_PARTITION
