"""Produce requests of one connection append in the order they arrived (issue 21).

Kafka reads the next request of a connection only after answering the previous one. kbroker
pipelines, so a transactional produce that waits for the transaction coordinator before it
appends (KIP-890: the first batches of a transactions v2 producer while its previous
transaction's markers are being written) must not be overtaken by a later produce of the same
connection that needs no such wait. The race is driven here deterministically through the
dispatcher seam of a real in-process broker: the previous transaction's markers are held back
until the later requests are queued, and the third produce arrives exactly between the first
one's append and the second one's wake-up — the window in which franz-go's and the Java
client's pipelined produces were refused OUT_OF_ORDER_SEQUENCE_NUMBER.
"""

from __future__ import annotations

import asyncio
import struct

import pytest

from kbroker.handlers.session import ClientSession
from kbroker.protocol import messages
from kbroker.protocol.errors import Errors
from kbroker.protocol.messages.headers import ResponseHeader
from kbroker.testing.inprocess import AsyncKafkaBroker
from tests.frames import encode_request
from tests.recordbatch import build_batch

PRODUCE, INIT_PRODUCER_ID, END_TXN, CREATE_TOPICS = 0, 22, 26, 19
TOPIC = "ordered"


class Client:
    """One client connection as the dispatcher sees it: requests in, response futures out."""

    listener_name = "PLAINTEXT"
    principal = "User:ANONYMOUS"
    peer = "127.0.0.1:1"

    def __init__(self, dispatcher):
        self.dispatcher = dispatcher
        self.session = ClientSession()
        self.correlation_id = 0

    def send(self, api_key: int, version: int, body):
        """Handle one request now, as the connection does on reading its frame; returns a
        zero-argument callable that decodes the response (awaiting it when it is pending)."""
        self.correlation_id += 1
        frame = memoryview(encode_request(api_key, version, body, self.correlation_id))
        result = self.dispatcher.handle(frame, self)
        return result

    async def call(self, api_key: int, version: int, body):
        return await self.answer(self.send(api_key, version, body), api_key, version)

    @staticmethod
    async def answer(result, api_key: int, version: int):
        if isinstance(result, asyncio.Future):
            result = await result
        data = b"".join(bytes(p) for p in result)
        (size,) = struct.unpack_from(">i", data)
        assert size == len(data) - 4
        _, pos = ResponseHeader.read(memoryview(data), 4,
                                     messages.response_header_version(api_key, version))
        return messages.response_class(api_key).decode(memoryview(data)[pos:], version)


def produce_request(txn_id: str, pid: int, epoch: int, base_sequence: int, count: int = 5):
    cls = messages.request_class(PRODUCE)
    batch = build_batch([b"v%d" % (base_sequence + i) for i in range(count)], producer_id=pid,
                        producer_epoch=epoch, base_sequence=base_sequence, transactional=True)
    return cls(transactional_id=txn_id, acks=-1, timeout_ms=30000, topic_data=[
        cls.TopicProduceData(name=TOPIC, partition_data=[
            cls.PartitionProduceData(index=0, records=batch)])])


def partition_error(response) -> Errors:
    return Errors.for_code(response.responses[0].partition_responses[0].error_code)


def test_a_produce_waiting_for_the_coordinator_is_not_overtaken(tmp_path):
    asyncio.run(_pipelined_produces_append_in_order(tmp_path))


async def _pipelined_produces_append_in_order(tmp_path):
    async with AsyncKafkaBroker({"num.partitions": 1}, data_dir=tmp_path / "data",
                                dev=False) as kafka:
        broker = kafka.broker
        client = Client(broker.dispatcher)
        create = messages.request_class(CREATE_TOPICS)
        created = await client.call(CREATE_TOPICS, 7, create(timeout_ms=10000, topics=[
            create.CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=1)]))
        assert created.topics[0].error_code == 0

        init = messages.request_class(INIT_PRODUCER_ID)
        got = await client.call(INIT_PRODUCER_ID, 5, init(
            transactional_id="tx", transaction_timeout_ms=60000, producer_id=-1,
            producer_epoch=-1))
        pid, epoch = got.producer_id, got.producer_epoch
        first = await client.call(PRODUCE, 12, produce_request("tx", pid, epoch, 0))
        assert partition_error(first) is Errors.NONE

        # Hold the first transaction's markers back: its successor's first produce must wait.
        coordinator = broker.txn_coordinator
        markers_may_go = asyncio.Event()
        write_marker = coordinator.write_marker

        async def held_marker(*args):
            await markers_may_go.wait()
            return await write_marker(*args)

        coordinator.write_marker = held_marker
        end = messages.request_class(END_TXN)
        ended = await client.call(END_TXN, 5, end(transactional_id="tx", producer_id=pid,
                                                  producer_epoch=epoch, committed=True))
        assert ended.error_code == 0 and ended.producer_epoch == epoch + 1
        epoch = ended.producer_epoch

        # Three pipelined produces of the next transaction, sequences 0, 5 and 10. The first
        # waits for the markers (CONCURRENT_TRANSACTIONS inside the broker) and the second
        # queues behind it; the third arrives the moment the first has appended, as the socket
        # read of a third in-flight request can.
        replicas = broker.replicas
        partition = replicas.get(TOPIC, 0)
        third: list = []

        class ThirdArrivesAfterAppend:
            """The partition as handlers reach it, announcing the third request right after
            the first append (Partition has __slots__: it is wrapped, not patched)."""

            def __getattr__(self, name):
                return getattr(partition, name)

            def append(self, records, *args, **kwargs):
                appended = partition.append(records, *args, **kwargs)
                if not third:
                    third.append(None)
                    asyncio.get_running_loop().call_soon(lambda: third.__setitem__(
                        0, client.send(PRODUCE, 12, produce_request("tx", pid, epoch, 10))))
                return appended

        get = replicas.get
        replicas.get = lambda topic, index: (ThirdArrivesAfterAppend() if (topic, index) == (
            TOPIC, 0) else get(topic, index))
        r1 = client.send(PRODUCE, 12, produce_request("tx", pid, epoch, 0))
        r2 = client.send(PRODUCE, 12, produce_request("tx", pid, epoch, 5))
        assert isinstance(r1, asyncio.Future) and isinstance(r2, asyncio.Future)
        markers_may_go.set()

        answers = [await client.answer(r1, PRODUCE, 12), await client.answer(r2, PRODUCE, 12)]
        assert third and third[0] is not None, "the third produce was never sent"
        answers.append(await client.answer(third[0], PRODUCE, 12))
        assert [partition_error(a) for a in answers] == [Errors.NONE] * 3, \
            [(partition_error(a).name, a.responses[0].partition_responses[0].error_message)
             for a in answers]
        offsets = [a.responses[0].partition_responses[0].base_offset for a in answers]
        assert offsets == sorted(offsets), f"appended out of order: {offsets}"
