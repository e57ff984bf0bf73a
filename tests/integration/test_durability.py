"""Nothing acknowledged is ever lost: across a clean restart (SIGTERM, then start on the same data
dir) every acknowledged record and every offset is still there; across ``kill -9`` in the middle of
a steady produce, every record whose acknowledgement the client received is there after restart,
at the offset it was acknowledged with.
"""

from __future__ import annotations

import threading
import time

import pytest

from tests.integration.clients import (
    CONSUMERS, EARLIEST, LATEST, PRODUCERS, Rec, Wire, confluent_producer, ensure_topic, now_ms,
    segment_files,
)

PARTITIONS = 3


def _offsets(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    with Wire(bootstrap) as wire:
        return {p: (wire.list_offset(topic, p, EARLIEST).offset,
                    wire.list_offset(topic, p, LATEST).offset) for p in range(PARTITIONS)}


def _consume_all(bootstrap: str, topic: str, ends: dict[int, tuple[int, int]]):
    total = sum(end - start for start, end in ends.values())
    got = CONSUMERS["confluent"](bootstrap, topic, total, timeout=30)
    assert len(got) == total, f"read {len(got)} records, the log holds {total}"
    return got


def test_clean_restart_keeps_every_record_and_offset(broker_factory):
    broker = broker_factory({"num.partitions": PARTITIONS, "log.segment.bytes": 4096})
    topic = "durable"
    ensure_topic(broker.bootstrap, topic, PARTITIONS)
    t0 = now_ms() - 100_000
    acked = {}
    for round_, codec in enumerate(("none", "lz4", "zstd", "gzip")):
        sent = [Rec(value=f"{codec}-{i:04d}-".encode() + b"d" * 100, key=f"k{i}".encode(),
                    headers=(("round", str(round_).encode()),), timestamp=t0 + 1000 * round_ + i)
                for i in range(90)]
        for rec, ack in zip(sent, PRODUCERS["confluent"](broker.bootstrap, topic, sent,
                                                         codec=codec)):
            acked[(ack.partition, ack.offset)] = rec
    before = _offsets(broker.bootstrap, topic)
    assert sum(end for _, end in before.values()) == len(acked)
    segments = {p: [f.name for f in segment_files(broker, topic, p)] for p in range(PARTITIONS)}
    assert any(len(names) > 1 for names in segments.values()), "expected several segments"

    assert broker.stop() == 0, "SIGTERM should shut the broker down cleanly"
    for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                 "replication-offset-checkpoint", "meta.properties"):
        assert (broker.data_dir / name).exists(), f"{name} missing after a clean shutdown"
    broker.start()

    assert _offsets(broker.bootstrap, topic) == before
    got = _consume_all(broker.bootstrap, topic, before)
    assert {(g.partition, g.offset) for g in got} == set(acked)
    for g in got:
        rec = acked[(g.partition, g.offset)]
        assert (g.key, g.value, g.headers, g.timestamp) == \
               (rec.key, rec.value, rec.headers, rec.timestamp)
    # The time index still answers, and new records go after the old ones.
    with Wire(broker.bootstrap) as wire:
        for p in range(PARTITIONS):
            found = wire.list_offset(topic, p, t0 + 3000)
            first_late = min((o for (q, o), r in acked.items()
                              if q == p and r.timestamp >= t0 + 3000), default=-1)
            assert found.offset == first_late
    more = PRODUCERS["kafka-python"](broker.bootstrap, topic,
                                     [Rec(value=b"after", partition=p) for p in range(PARTITIONS)])
    assert [(a.partition, a.offset) for a in more] == \
           [(p, before[p][1]) for p in range(PARTITIONS)]


class SteadyProducer(threading.Thread):
    """A confluent producer writing numbered records as fast as it can; ``acked`` collects
    (partition, offset, value) from delivery reports."""

    def __init__(self, bootstrap: str, topic: str, acks, idempotent: bool):
        super().__init__(daemon=True)
        extra = {"enable.idempotence": True} if idempotent else {}
        self.producer = confluent_producer(bootstrap, "lz4", acks, **{
            "linger.ms": 2, "message.timeout.ms": 30000, "retry.backoff.ms": 50,
            "reconnect.backoff.max.ms": 200, **extra})
        self.topic = topic
        self.acked: list[tuple[int, int, bytes]] = []
        self.failed = 0
        self.sent = 0
        self.stopping = threading.Event()
        self.lock = threading.Lock()

    def _report(self, err, msg):
        with self.lock:
            if err is None:
                self.acked.append((msg.partition(), msg.offset(), msg.value()))
            else:
                self.failed += 1

    def run(self):
        from confluent_kafka import KafkaException

        while not self.stopping.is_set():
            value = f"seq-{self.sent:07d}".encode()
            try:
                self.producer.produce(self.topic, value=value, key=value[-2:],
                                      on_delivery=self._report)
                self.sent += 1
            except (BufferError, KafkaException):
                self.producer.poll(0.05)
            self.producer.poll(0)
            if self.sent % 200 == 0:
                time.sleep(0.001)

    def finish(self, timeout: float = 30.0):
        self.stopping.set()
        self.join(10)
        self.producer.flush(timeout)

    def count(self) -> int:
        with self.lock:
            return len(self.acked)


@pytest.mark.parametrize("acks,idempotent", [(1, False), ("all", False), ("all", True)],
                         ids=["acks=1", "acks=all", "idempotent"])
def test_kill_9_during_steady_produce_loses_no_acknowledged_record(broker_factory, acks,
                                                                   idempotent):
    broker = broker_factory({"num.partitions": PARTITIONS, "log.segment.bytes": 200_000})
    topic = "steady"
    ensure_topic(broker.bootstrap, topic, PARTITIONS)
    producer = SteadyProducer(broker.bootstrap, topic, acks, idempotent)
    producer.start()
    try:
        deadline = time.monotonic() + 10
        while producer.count() == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert producer.count() > 0, "nothing acknowledged before the crash"
        time.sleep(1.0)
        broker.kill()  # SIGKILL while records are in flight
        acked_before_crash = producer.count()
        time.sleep(0.3)
        broker.start()  # same data dir, same port: the producer reconnects and goes on
        deadline = time.monotonic() + 15
        while producer.count() < acked_before_crash + 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert producer.count() > acked_before_crash, "the producer made no progress after restart"
    finally:
        producer.finish()
    acked = producer.acked
    assert len(acked) > 500

    ends = _offsets(broker.bootstrap, topic)
    got = _consume_all(broker.bootstrap, topic, ends)
    stored = {(g.partition, g.offset): g.value for g in got}
    lost = [(p, o, v) for p, o, v in acked if stored.get((p, o)) != v]
    assert not lost, f"{len(lost)} acknowledged records lost or changed, e.g. {lost[:5]}"
    for p, (start, end) in ends.items():
        offsets = sorted(o for q, o in stored if q == p)
        assert offsets == list(range(start, end)), f"partition {p} has holes"
    if idempotent:
        values = [g.value for g in got]
        assert len(values) == len(set(values)), "the idempotent producer's records were duplicated"
        for p in range(PARTITIONS):
            seqs = [g.value for g in got if g.partition == p]
            assert seqs == sorted(seqs), f"partition {p} is out of order"


def test_repeated_kills_keep_offsets_monotonic(broker_factory):
    """Three crashes in a row between small produces: offsets continue where they stopped."""
    broker = broker_factory({"num.partitions": 1})
    topic = "crashy"
    ensure_topic(broker.bootstrap, topic, 1)
    expected = []
    for round_ in range(3):
        sent = [Rec(value=f"r{round_}-{i}".encode()) for i in range(50)]
        acks = PRODUCERS["confluent"](broker.bootstrap, topic, sent, acks=1)
        assert [a.offset for a in acks] == list(range(len(expected), len(expected) + 50))
        expected += [r.value for r in sent]
        broker.kill()
        broker.start()
    got = CONSUMERS["aiokafka"](broker.bootstrap, topic, len(expected), partitions=[0])
    assert [g.value for g in got] == expected
