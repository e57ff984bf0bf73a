"""What a producer may send next, on kbroker and on Apache Kafka 4.4.0 side by side (issue 21).

Each scenario drives one producer with raw requests of our generated codecs (the batches a
client would send) on both brokers at once; the traces of error names, epochs and relative
offsets must be equal:
- five idempotent batches in flight on one connection, then retries of batches still in the
  five-batch window (answered with their first offsets, nothing written), a gap and the next;
- a retry after a transport error: the connection closes before the answer, a new one sends the
  same batch again, which is written once;
- transactions v2: each EndTxn bumps the epoch; the next transaction starts at sequence 0 (any
  other sequence is refused), a batch of the old epoch is a zombie; the first batch after an
  abort; a batch that was never added to a transaction of transactions v1;
- an idempotent producer after DeleteRecords moved the log start past all of its batches.
The produces of a new transaction are retried while the broker answers NOT_ENOUGH_REPLICAS (the
previous transaction's markers being written), as every client does.
"""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from kbroker.protocol import messages
from tests.broker_process import BrokerProcess
from tests.integration.clients import Wire, ensure_topic
from tests.recordbatch import build_batch


SETTINGS = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "1",
            "transaction.state.log.num.partitions": "1", "num.partitions": "1"}
PRODUCE, INIT_PRODUCER_ID, END_TXN, DELETE_RECORDS, FIND_COORDINATOR = 0, 22, 26, 21, 10
RETRIABLE = {"NOT_ENOUGH_REPLICAS", "CONCURRENT_TRANSACTIONS"}


@pytest.fixture(scope="module")
def brokers(tmp_path_factory, reference_kafka):
    kafka = reference_kafka.get(SETTINGS)
    assert kafka.version == "4.4.0"
    kbroker = BrokerProcess(tmp_path_factory.mktemp("kbroker") / "data", SETTINGS)
    try:
        kbroker.start()
        yield {"kafka": kafka.bootstrap, "kbroker": kbroker.bootstrap}
    finally:
        kbroker.kill()


def side_by_side(brokers, scenario):
    topic = f"seq-{uuid.uuid4().hex[:8]}"
    with ThreadPoolExecutor(2) as pool:
        futures = {name: pool.submit(scenario, bootstrap, topic)
                   for name, bootstrap in brokers.items()}
        traces = {name: future.result() for name, future in futures.items()}
    assert traces["kbroker"] == traces["kafka"], \
        "\n".join(f"{name:8} {trace}" for name, trace in traces.items())
    return traces["kafka"]


def error_name(code: int) -> str:
    from kbroker.protocol.errors import Errors
    return Errors.for_code(code).name


def produce_request(topic, batch, transactional_id=None):
    cls = messages.request_class(PRODUCE)
    return cls(transactional_id=transactional_id, acks=-1, timeout_ms=10000, topic_data=[
        cls.TopicProduceData(name=topic, partition_data=[
            cls.PartitionProduceData(index=0, records=batch)])])


def batch(pid, epoch, seq, count=3, transactional=False):
    return build_batch([b"v%d" % (seq + i) for i in range(count)], producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq, transactional=transactional)


class Producer:
    """One producer's connection; offsets in traces are relative to its first write."""

    def __init__(self, bootstrap, topic, transactional_id=None):
        self.wire = Wire(bootstrap, timeout=30)
        self.topic, self.transactional_id = topic, transactional_id
        if transactional_id is not None:  # as clients do: the coordinator is created on demand
            find = messages.request_class(FIND_COORDINATOR)
            for _ in range(100):
                found = self.wire.call(FIND_COORDINATOR, 4, find(key_type=1, coordinator_keys=[
                    transactional_id])).coordinators[0]
                if found.error_code == 0:
                    break
                time.sleep(0.1)
        init = messages.request_class(INIT_PRODUCER_ID)
        for _ in range(100):  # the transaction coordinator loads on first use
            got = self.wire.call(INIT_PRODUCER_ID, 5, init(
                transactional_id=transactional_id, transaction_timeout_ms=60000,
                producer_id=-1, producer_epoch=-1))
            if got.error_code == 0:
                break
            time.sleep(0.1)
        assert got.error_code == 0, error_name(got.error_code)
        self.pid, self.epoch = got.producer_id, got.producer_epoch
        self.base = None

    def answer(self, response):
        part = response.responses[0].partition_responses[0]
        if part.error_code:
            return error_name(part.error_code)
        if self.base is None:
            self.base = part.base_offset
        return part.base_offset - self.base

    def produce(self, seq, count=3, epoch=None, version=12, retry=False):
        epoch = self.epoch if epoch is None else epoch
        request = produce_request(self.topic, batch(self.pid, epoch, seq, count,
                                                    self.transactional_id is not None),
                                  self.transactional_id)
        for _ in range(100 if retry else 1):
            got = self.answer(self.wire.call(PRODUCE, version, request))
            if got not in RETRIABLE:
                return got
            time.sleep(0.05)
        return got

    def end(self, commit=True, version=5):
        cls = messages.request_class(END_TXN)
        for _ in range(100):
            got = self.wire.call(END_TXN, version, cls(
                transactional_id=self.transactional_id, producer_id=self.pid,
                producer_epoch=self.epoch, committed=commit))
            if error_name(got.error_code) not in RETRIABLE:
                break
            time.sleep(0.05)
        bump = got.producer_epoch - self.epoch if version >= 5 else 0
        if version >= 5 and got.error_code == 0:
            self.epoch = got.producer_epoch
        return error_name(got.error_code), bump


def pipelined_idempotent(bootstrap, topic):
    ensure_topic(bootstrap, topic)
    p = Producer(bootstrap, topic)
    sent = [p.wire.send(PRODUCE, 11, produce_request(topic, batch(p.pid, 0, seq)))
            for seq in (0, 3, 6, 9, 12)]
    trace = []
    for correlation_id in sent:
        got, response = p.wire.receive(PRODUCE, 11)
        assert got == correlation_id
        trace.append(p.answer(response))
    trace.append(("retry 9", p.produce(9, version=11)))
    trace.append(("retry 0", p.produce(0, version=11)))
    trace.append(("gap 16", p.produce(16, version=11)))
    trace.append(("next 15", p.produce(15, version=11)))
    trace.append(("retry 0, out of the window now", p.produce(0, version=11)))
    return trace


def retry_after_transport_error(bootstrap, topic):
    ensure_topic(bootstrap, topic)
    p = Producer(bootstrap, topic)
    trace = [p.produce(0)]
    p.wire.send(PRODUCE, 12, produce_request(topic, batch(p.pid, 0, 3)))
    p.wire.close()  # gone before the answer: was it written? The client cannot know
    time.sleep(0.5)
    p.wire = Wire(bootstrap, timeout=30)
    trace += [p.produce(3), p.produce(6), p.produce(3)]
    return trace


def transactions_v2_epochs(bootstrap, topic):
    ensure_topic(bootstrap, topic)
    p = Producer(bootstrap, topic, f"tx-{topic}")
    first_epoch = p.epoch
    trace = [p.produce(0, retry=True), p.produce(3), p.end(commit=True)]
    trace.append(("new epoch, sequence 3", p.produce(3, retry=True)))
    trace.append(("new epoch, sequence 0", p.produce(0, retry=True)))
    trace.append(("old epoch", p.produce(3, epoch=first_epoch)))
    trace.append(p.produce(3))
    trace.append(p.end(commit=False))
    trace.append(("first batch after the abort", p.produce(0, retry=True)))
    trace.append(("gap", p.produce(4)))
    trace.append(p.end(commit=True))
    return trace


def transactions_v1_unadded_partition(bootstrap, topic):
    ensure_topic(bootstrap, topic)
    p = Producer(bootstrap, topic, f"tx1-{topic}")
    # Produce v11: the client adds partitions itself; this one never was.
    return [p.produce(0, version=11), p.end(commit=False, version=4)]


def idempotent_after_delete_records(bootstrap, topic):
    ensure_topic(bootstrap, topic)
    p = Producer(bootstrap, topic)
    trace = [p.produce(0), p.produce(3)]
    cls = messages.request_class(DELETE_RECORDS)
    deleted = p.wire.call(DELETE_RECORDS, 2, cls(timeout_ms=10000, topics=[
        cls.DeleteRecordsTopic(name=topic, partitions=[
            cls.DeleteRecordsPartition(partition_index=0, offset=-1)])]))
    trace.append(error_name(deleted.topics[0].partitions[0].error_code))
    trace += [("next", p.produce(6)), ("gap", p.produce(10)), ("new epoch at 5",
                                                               p.produce(5, epoch=1))]
    return trace


@pytest.mark.parametrize("scenario", [
    pipelined_idempotent, retry_after_transport_error, transactions_v2_epochs,
    transactions_v1_unadded_partition, idempotent_after_delete_records,
], ids=lambda f: f.__name__)
def test_same_answers_as_kafka(brokers, scenario):
    side_by_side(brokers, scenario)
