"""What an exactly-once cycle waits for, and that it waits for nothing more (KIP-447 clients such
as franz-go's GroupTransactSession poll, produce, commit offsets in the transaction and end it, so
every step that waits on a timer instead of an event costs a whole cycle):

- a read_committed Fetch parked at the last stable offset (an open transaction holds it) is
  answered as soon as the transaction's commit marker lands, with the committed records, not at
  its max wait;
- a read_committed Fetch parked at the end of a partition is answered as soon as new
  (non-transactional) data arrives;
- EndTxn (commit) is answered once the coordinator has decided, and right after it the group's
  offsets committed in the transaction are stable for OffsetFetch with require_stable.

Fetches here wait up to 30 s; an answer within 10 s is the hang guard (a wake-up that works
answers in milliseconds; the timing itself is measured by tools/bench_txn_cycle.py).
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kbroker.protocol import messages
from tests.integration.clients import Wire, ensure_topic, running_broker, wait_until

FETCH, OFFSET_FETCH, FIND_COORDINATOR = 1, 9, 10
READ_COMMITTED = 1
MAX_WAIT_MS = 30000
HANG_GUARD_S = 10.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with running_broker(tmp_path_factory.mktemp("txn-wakeups") / "data",
                        {"num.partitions": 1}) as broker:
        yield broker


def new_topic(bootstrap: str) -> str:
    topic = "wake-" + uuid.uuid4().hex[:8]
    ensure_topic(bootstrap, topic)
    return topic


class ParkedFetch(threading.Thread):
    """One read_committed Fetch (v12) of partition 0 from ``offset`` with a long max wait, sent
    from a thread; ``answered_after`` is how long the broker took to answer it."""

    def __init__(self, bootstrap: str, topic: str, offset: int):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.offset = bootstrap, topic, offset
        self.partition = None
        self.answered_after: float | None = None
        self.sent = threading.Event()

    def run(self) -> None:
        with Wire(self.bootstrap, timeout=MAX_WAIT_MS / 1000 + 10) as wire:
            cls = messages.request_class(FETCH)
            request = cls(replica_id=-1, max_wait_ms=MAX_WAIT_MS, min_bytes=1,
                          max_bytes=1 << 20, isolation_level=READ_COMMITTED, session_id=0,
                          session_epoch=-1, topics=[cls.FetchTopic(
                              topic=self.topic, partitions=[cls.FetchPartition(
                                  partition=0, fetch_offset=self.offset, log_start_offset=-1,
                                  partition_max_bytes=1 << 20, current_leader_epoch=-1)])])
            started = time.monotonic()
            self.sent.set()
            response = wire.call(FETCH, 12, request)
            self.answered_after = time.monotonic() - started
            self.partition = response.responses[0].partitions[0]

    def still_parked_after(self, seconds: float) -> bool:
        self.sent.wait(10)
        self.join(seconds)
        return self.is_alive()

    def answer(self):
        self.join(MAX_WAIT_MS / 1000 + 10)
        assert not self.is_alive(), "the fetch was never answered"
        return self.partition


def transactional(bootstrap: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "wake-" + uuid.uuid4().hex,
                  "linger.ms": 0})
    p.init_transactions(30)
    return p


def test_read_committed_fetch_at_the_lso_wakes_when_the_commit_marker_lands(broker):
    topic = new_topic(broker.bootstrap)
    p = transactional(broker.bootstrap)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, b"v%d" % i, partition=0)
    p.flush(30)  # the records are in the log; the open transaction holds the LSO at 0
    fetch = ParkedFetch(broker.bootstrap, topic, 0)
    fetch.start()
    assert fetch.still_parked_after(0.5), "nothing is committed yet: the fetch must wait"
    p.commit_transaction(30)
    partition = fetch.answer()
    assert fetch.answered_after < HANG_GUARD_S, (
        f"answered after {fetch.answered_after:.2f} s: the commit marker did not wake it")
    assert partition.error_code == 0
    assert partition.last_stable_offset == 6  # five records and the marker
    assert partition.records, "the committed records come with the answer"


def test_read_committed_fetch_at_the_end_wakes_on_new_data(broker):
    topic = new_topic(broker.bootstrap)
    plain = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    plain.produce(topic, b"first", partition=0)
    plain.flush(30)
    fetch = ParkedFetch(broker.bootstrap, topic, 1)
    fetch.start()
    assert fetch.still_parked_after(0.5), "nothing new yet: the fetch must wait"
    plain.produce(topic, b"second", partition=0)
    plain.flush(30)
    partition = fetch.answer()
    assert fetch.answered_after < HANG_GUARD_S, (
        f"answered after {fetch.answered_after:.2f} s: new data did not wake it")
    assert partition.error_code == 0 and partition.records


def test_offsets_committed_in_a_transaction_are_stable_right_after_end_txn(broker):
    topic = new_topic(broker.bootstrap)
    group = "wake-group-" + uuid.uuid4().hex[:6]
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        p = transactional(broker.bootstrap)
        p.begin_transaction()
        p.produce(topic, b"x", partition=0)
        p.send_offsets_to_transaction([TopicPartition(topic, 0, 1)],
                                      consumer.consumer_group_metadata(), 30)
        assert offset_fetch_stable(broker.bootstrap, group, topic)[0] == 88  # UNSTABLE
        p.commit_transaction(30)
        # The first OffsetFetch after EndTxn: on a single node the markers are written with
        # no wait; a short poll only guards against the loop not having run them yet.
        error, offset = wait_until(
            lambda: (lambda r: r if r[0] == 0 else None)(
                offset_fetch_stable(broker.bootstrap, group, topic)),
            HANG_GUARD_S, 0.01, "the transaction's offsets to become stable")
        assert (error, offset) == (0, 1)
    finally:
        consumer.close()


def offset_fetch_stable(bootstrap: str, group: str, topic: str):
    with Wire(bootstrap) as wire:
        coordinator = wire.call(FIND_COORDINATOR, 3, messages.request_class(FIND_COORDINATOR)(
            key=group, key_type=0))
        assert coordinator.error_code == 0
        cls = messages.request_class(OFFSET_FETCH)
        request = cls(group_id=group, require_stable=True, topics=[
            cls.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])])
        response = wire.call(OFFSET_FETCH, 7, request)
    partition = response.topics[0].partitions[0]
    return partition.error_code, partition.committed_offset
