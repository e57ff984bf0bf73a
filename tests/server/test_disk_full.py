"""Disk full, for real: the broker's log dir on a small tmpfs, a confluent-kafka producer filling
it. Produce answers KAFKA_STORAGE_ERROR (the connection stays open), reads keep being served,
nothing acknowledged is lost, and writes resume once space returns."""

from __future__ import annotations

import os
import subprocess

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

TOPIC = "fills-the-disk"
VALUE = b"x" * 8192


@pytest.fixture
def small_disk(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def _produce(bootstrap, values):
    """Produce ``values`` (no retries, so a broker error is reported as is); returns
    (acknowledged values, error codes seen)."""
    acked, errors = [], []

    def report(err, msg):
        if err is None:
            acked.append(msg.value())
        else:
            errors.append(err.code())

    producer = Producer({"bootstrap.servers": bootstrap, "retries": 0, "linger.ms": 0,
                         "acks": "all", "message.timeout.ms": 10000, "batch.size": 20000})
    for value in values:
        producer.produce(TOPIC, value, callback=report)
        producer.poll(0)
        producer.flush(10)  # one batch at a time, so every failure is a broker answer
    return acked, errors


def _consume_all(bootstrap, expected):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "disk-full-reader",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    got = []
    misses = 0
    while len(got) < expected and misses < 20:
        msg = consumer.poll(1.0)
        if msg is None:
            misses += 1
        elif msg.error() is None:
            got.append(msg.value())
    consumer.close()
    return got


def test_disk_full_answers_storage_error_and_recovers(broker_factory, small_disk):
    broker = broker_factory({"log.dirs": str(small_disk), "num.partitions": 1,
                             "log.segment.bytes": 1 << 20})
    first, errors = _produce(broker.bootstrap, [VALUE + b"%06d" % i for i in range(2000)])
    assert first, "nothing was acknowledged before the disk filled"
    assert errors and set(errors) == {KafkaError.KAFKA_STORAGE_ERROR}, errors
    assert broker.alive()

    # Reads keep being served, and every acknowledged record is there.
    assert _consume_all(broker.bootstrap, len(first)) == first

    # Space returns (the tmpfs grows, as a disk does when an operator frees space): writes resume.
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
    second, errors = _produce(broker.bootstrap, [b"after-%d" % i for i in range(50)])
    assert errors == [] and len(second) == 50
    assert _consume_all(broker.bootstrap, len(first) + 50) == first + second

    log = broker.log_path.read_text(errors="replace")
    assert "Traceback" not in log, log[max(0, log.find("Traceback") - 400):][:4000]
    assert "KAFKA_STORAGE_ERROR" in log or "disk is full" in log
