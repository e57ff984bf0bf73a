"""A share-group DLQ write cut by a crash (KIP-1191), on a broker process with its real share
coordinator: records persisted in ARCHIVING (state 3 in ``__share_group_state``) whose DLQ write
had not happened when the broker was killed (SIGKILL) are written once the restarted broker loads
the share partition, once each, and are never delivered again.

The DLQ write is held back by the DLQ topic itself: ``min.insync.replicas=2`` on a topic with one
replica answers NOT_ENOUGH_REPLICAS, which the writer retries (1 s, 2 s, 4 s... back-off); the
broker is killed during those retries, and the topic fixed before the restart's first fetch.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   ResourceType)

from tests.broker_process import BrokerProcess
from tests.integration.clients import Wire, ensure_topic, wait_until

BROKER = {"group.share.heartbeat.interval.ms": 200,
          "group.share.min.heartbeat.interval.ms": 100,
          "group.share.assignment.interval.ms": 0,
          "offsets.topic.num.partitions": 1,
          "share.coordinator.state.topic.num.partitions": 1}


def alter(bootstrap: str, resource_type, name: str, configs: dict) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the answer
    resource = ConfigResource(resource_type, name, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET if v is not None
                    else AlterConfigOpType.DELETE) for k, v in configs.items()])
    admin.incremental_alter_configs([resource])[resource].result(20)


def dlq_values(bootstrap: str, topic: str) -> list[tuple]:
    with Wire(bootstrap) as wire:
        wire.api_versions()
        data, batches = wire.fetch(topic, 0, 0)
        assert data.error_code == 0
    return [(r.value, dict(r.headers)["__dlq.errors.offset"]) for b in batches
            for r in b.raw_records()]


def test_archiving_records_are_written_after_a_crash(tmp_path):
    broker = BrokerProcess(tmp_path / "data", BROKER).start()
    try:
        tag = uuid.uuid4().hex[:6]
        source, dlq, group = f"src-{tag}", f"dlq.crash-{tag}", f"g-{tag}"
        ensure_topic(broker.bootstrap, source)
        ensure_topic(broker.bootstrap, dlq, 1, {"errors.deadletterqueue.group.enable": "true",
                                                "min.insync.replicas": "2"})
        alter(broker.bootstrap, ResourceType.GROUP, group, {
            "share.auto.offset.reset": "earliest",
            "errors.deadletterqueue.topic.name": dlq,
            "errors.deadletterqueue.copy.record.enable": "true"})
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        for i in range(3):
            producer.produce(source, f"v{i}".encode(), partition=0)
        assert producer.flush(20) == 0

        consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                                  "share.acknowledgement.mode": "explicit"})
        consumer.subscribe([source])
        seen = []
        deadline = time.monotonic() + 30
        while len(seen) < 3 and time.monotonic() < deadline:
            for m in consumer.poll(0.5):
                if m.error() is None:
                    seen.append(m.value())
                    consumer.acknowledge(m, AcknowledgeType.REJECT)
        # answered once ARCHIVING is persisted; the DLQ write is then retrying
        consumer.commit_sync(20)
        assert seen == [b"v0", b"v1", b"v2"]
        broker.kill()  # the consumer's connection is gone with it
        consumer.close()
        assert "DLQ produce to" in broker.log() and "NOT_ENOUGH_REPLICAS" in broker.log()

        broker.start()
        assert dlq_values(broker.bootstrap, dlq) == []
        alter(broker.bootstrap, ResourceType.TOPIC, dlq, {"min.insync.replicas": None})
        # The first fetch loads the share partition: the ARCHIVING records are written.
        consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                                  "share.acknowledgement.mode": "explicit"})
        consumer.subscribe([source])
        try:
            got = []

            def written():
                got.extend(m.value() for m in consumer.poll(0.3) if m.error() is None)
                return dlq_values(broker.bootstrap, dlq) or None
            wait_until(written, 30, 0.1, "the DLQ records after the restart")
            wait_until(lambda: len(dlq_values(broker.bootstrap, dlq)) >= 3, 10, 0.1, "3")
            for _ in range(4):  # a little more: nothing comes back, nothing written twice
                got.extend(m.value() for m in consumer.poll(0.3) if m.error() is None)
        finally:
            consumer.close()
        assert got == []
        assert dlq_values(broker.bootstrap, dlq) == [(b"v0", b"0"), (b"v1", b"1"),
                                                     (b"v2", b"2")]
    finally:
        broker.kill()
