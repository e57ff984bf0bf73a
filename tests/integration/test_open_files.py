"""Descriptors are bounded by ``log.open.files.max``, not proportional to partitions.

Kafka keeps three descriptors per segment (log, offset index, time index); here segment and index
files are opened on demand through a bounded cache (kbroker/log/file_cache.py). A broker with
5,000 partitions, every one of them written to over a real socket (confluent-kafka) and a sample
read back, holds fewer descriptors than the limit plus its sockets and fixed files, during
service and after a restart (which loads and checks every segment).
"""

from __future__ import annotations

import os

from tests.broker_process import BrokerProcess
from tests.integration.clients import ensure_topic, running_broker

PARTITIONS = 5000
MAX_OPEN_FILES = 64
# Listeners, client connections, the lock file, epoll, logging, the interpreter's own.
OTHER_DESCRIPTORS = 100


def descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def produce_to_every_partition(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for partition in range(PARTITIONS):
        producer.produce(topic, b"value-%d" % partition, partition=partition)
    assert producer.flush(60) == 0


def read_back(bootstrap: str, topic: str, partitions: range) -> dict[int, bytes]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "open-files",
                         "enable.auto.commit": False, "enable.partition.eof": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    got: dict[int, bytes] = {}
    try:
        for _ in range(300):
            for message in consumer.consume(100, 0.2):
                assert message.error() is None, message.error()
                got[message.partition()] = message.value()
            if len(got) == len(partitions):
                break
    finally:
        consumer.close()
    return got


def test_descriptors_stay_bounded_with_5000_partitions(tmp_path):
    overrides = {"log.open.files.max": MAX_OPEN_FILES}
    data = tmp_path / "data"
    # A clean stop closes and checkpoints 5,000 partitions: on a loaded 2-core machine that
    # took longer than the usual 10 s (the restart below allows 60 s too).
    with running_broker(data, overrides, stop_timeout=60) as broker:
        ensure_topic(broker.bootstrap, "many", PARTITIONS)
        produce_to_every_partition(broker.bootstrap, "many")
        sample = range(0, PARTITIONS, 25)
        got = read_back(broker.bootstrap, "many", sample)
        assert got == {p: b"value-%d" % p for p in sample}
        assert descriptors(broker.proc.pid) < MAX_OPEN_FILES + OTHER_DESCRIPTORS
    assert len([d for d in os.listdir(data) if d.startswith("many-")]) == PARTITIONS

    restarted = BrokerProcess(data, overrides).start(timeout=120)
    try:
        assert descriptors(restarted.proc.pid) < MAX_OPEN_FILES + OTHER_DESCRIPTORS
        sample = range(7, PARTITIONS, 499)
        assert read_back(restarted.bootstrap, "many", sample) == {p: b"value-%d" % p
                                                                  for p in sample}
        assert descriptors(restarted.proc.pid) < MAX_OPEN_FILES + OTHER_DESCRIPTORS
    finally:
        assert restarted.stop(timeout=60) == 0
