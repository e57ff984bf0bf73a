"""Share-group dead-letter queues (KIP-1191) across two brokers over a real ZooKeeper: a share
partition's leader writes its DLQ records to the DLQ partition wherever it is led, its own log or
the other broker's (a Produce over the inter-broker listener), and a missing DLQ topic is created
through the controller when ``errors.deadletterqueue.auto.create.topics.enable`` is on. A resumed
write (records loaded in ARCHIVING) reads the other broker's DLQ partition first (ListOffsets and
Fetch) and writes only what is not there yet."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   NewTopic, ResourceType)

from tests.cluster.conftest import start_brokers, stop_brokers, wait_for
from tests.integration.clients import Wire


def dlq_records(bootstrap: str, topic: str) -> list[tuple]:
    """(value, source partition, source offset) of partition 0 of ``topic``, from its leader."""
    for address in bootstrap.split(","):
        with Wire(address) as wire:
            wire.api_versions()
            data, batches = wire.fetch(topic, 0, 0)
        if data.error_code == 0:
            return sorted((r.value, dict(r.headers)["__dlq.errors.partition"],
                           dict(r.headers)["__dlq.errors.offset"])
                          for b in batches for r in b.raw_records())
    return []


def test_dlq_records_reach_a_partition_led_by_the_other_broker(connect_string):
    brokers = start_brokers(connect_string, lambda broker_id: {
        "offsets.topic.num.partitions": 1, "offsets.topic.replication.factor": 1,
        "share.coordinator.state.topic.num.partitions": 1,
        "share.coordinator.state.topic.replication.factor": 1,
        "group.share.heartbeat.interval.ms": 200, "group.share.min.heartbeat.interval.ms": 100,
        "group.share.assignment.interval.ms": 0,
        "errors.deadletterqueue.auto.create.topics.enable": "true"}, ids=(1, 2))
    try:
        bootstrap = ",".join(b._inner.bootstrap_servers for b in brokers.values())
        admin = AdminClient({"bootstrap.servers": bootstrap})
        tag = uuid.uuid4().hex[:6]
        topic, dlq, created = f"src-{tag}", f"dlq.on2-{tag}", f"dlq.auto-{tag}"
        admin.create_topics([
            NewTopic(topic, 2, replica_assignment=[[1], [2]]),
            NewTopic(dlq, 1, replica_assignment=[[2]],
                     config={"errors.deadletterqueue.group.enable": "true"})])[topic].result(30)
        wait_for(lambda: all(b._inner.broker.controller.image.topic(dlq) is not None
                             for b in brokers.values()), "both brokers to know the topics", 60)
        producer = Producer({"bootstrap.servers": bootstrap})
        for p in (0, 1):
            for i in range(2):
                producer.produce(topic, f"p{p}-{i}".encode(), partition=p)
        assert producer.flush(30) == 0
        for group, target in ((f"sg-{tag}", dlq), (f"sg-auto-{tag}", created)):
            resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
                ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in (
                    ("share.auto.offset.reset", "earliest"),
                    ("errors.deadletterqueue.topic.name", target),
                    ("errors.deadletterqueue.copy.record.enable", "true"))])
            admin.incremental_alter_configs([resource])[resource].result(30)
            consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                                      "share.acknowledgement.mode": "explicit"})
            consumer.subscribe([topic])
            seen = 0
            try:
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline and seen < 4:
                    for m in consumer.poll(1.0):
                        if m.error() is None:
                            seen += 1
                            consumer.acknowledge(m, AcknowledgeType.REJECT)
                    consumer.commit_sync(30)
            finally:
                consumer.close()
            assert seen == 4
            expected = [(f"p{p}-{i}".encode(), str(p).encode(), str(i).encode())
                        for p in (0, 1) for i in range(2)]
            wait_for(lambda: dlq_records(bootstrap, target) == expected,
                     f"the 4 rejected records in {target}", 60)
        # partition 0's leader (broker 1) reached broker 2's DLQ partition over the network
        assert brokers[1]._inner.broker.share_partitions.dead_letters.meters[f"sg-{tag}"] \
            .records == 2
        # As after a crash between the DLQ write and the ARCHIVED write: broker 1 resends
        # partition 0's records; those in broker 2's DLQ partition already are left out.
        from kbroker.share.dlq import DeadLetter
        first = brokers[1]._inner.broker
        group = f"sg-{tag}"
        letters = [DeadLetter(0, 1, "Offset rejected by client."),
                   DeadLetter(1, 1, "Offset rejected by client."),
                   DeadLetter(1, 2, "Offset delivery count exceeded the threshold.")]
        written = brokers[1].call(first.share_partitions.dead_letters.write(
            group, first.group_coordinator.share_group_settings(group),
            first.replicas.get(topic, 0), letters, resumed=True), 60)
        assert written == 1  # only (offset 1, delivery 2) was not there
        assert len(dlq_records(bootstrap, dlq)) == 5
        topic_created = brokers[1]._inner.broker.controller.image.topic(created)
        assert dict(topic_created.configs) == {"errors.deadletterqueue.group.enable": "true",
                                               "message.timestamp.type": "CreateTime"}
    finally:
        stop_brokers(brokers)
