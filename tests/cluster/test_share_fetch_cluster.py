"""Share consumption across two brokers over a real ZooKeeper: each broker serves ShareFetch for
the partitions it leads, with share-partition state kept by the share coordinator that may live
on the other broker (the inter-broker persister), so a confluent-kafka ShareConsumer reads every
record once from a topic spread over both; a ShareFetch sent to the broker that does not lead a
partition gets NOT_LEADER_OR_FOLLOWER with the current leader and its endpoint (KIP-951)."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   NewTopic, ResourceType)

from kbroker.protocol import messages
from kbroker.protocol.errors import Errors
from tests.cluster.conftest import start_brokers, stop_brokers, wait_for
from tests.integration.clients import Wire

SHARE_FETCH = 78
DESCRIBE_SHARE_GROUP_OFFSETS = 90


def test_share_consumer_reads_a_topic_led_by_two_brokers(connect_string):
    brokers = start_brokers(connect_string, lambda broker_id: {
        "offsets.topic.num.partitions": 1, "offsets.topic.replication.factor": 1,
        "share.coordinator.state.topic.num.partitions": 1,
        "share.coordinator.state.topic.replication.factor": 1,
        "group.share.heartbeat.interval.ms": 200, "group.share.min.heartbeat.interval.ms": 100,
        "group.share.assignment.interval.ms": 0}, ids=(1, 2))
    try:
        bootstrap = ",".join(b._inner.bootstrap_servers for b in brokers.values())
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topic, group = f"spread-{uuid.uuid4().hex[:6]}", f"sg-{uuid.uuid4().hex[:6]}"
        admin.create_topics([NewTopic(topic, 2, replica_assignment=[[1], [2]])])[topic].result(30)
        wait_for(lambda: all(b._inner.broker.controller.image.topic(topic) is not None
                             for b in brokers.values()), "both brokers to know the topic", 60)
        resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
            "share.auto.offset.reset", "earliest",
            incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([resource])[resource].result(30)
        producer = Producer({"bootstrap.servers": bootstrap})
        values = {f"p{p}-{i}".encode() for p in (0, 1) for i in range(20)}
        for value in sorted(values):
            producer.produce(topic, value, partition=int(value[1:2]))
        assert producer.flush(30) == 0

        consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        consumer.subscribe([topic])
        got = []
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and len(got) < len(values):
                messages_ = list(consumer.poll(1.0))
                assert not [m.error() for m in messages_ if m.error()], messages_
                got += [m.value() for m in messages_]
        finally:
            consumer.close()
        assert sorted(got) == sorted(values)

        # partition 1 lives on broker 2: broker 1 points there
        first = brokers[1]._inner
        topic_id = first.broker.controller.image.topic(topic).topic_id
        Q = messages.request_class(SHARE_FETCH)
        with Wire(first.bootstrap_servers) as wire:
            response = wire.call(SHARE_FETCH, 2, Q(
                group_id=group, member_id="raw-member", share_session_epoch=0, max_wait_ms=0,
                min_bytes=1, max_bytes=1 << 20, max_records=10, batch_size=10,
                topics=[Q.FetchTopic(topic_id=topic_id, partitions=[
                    Q.FetchPartition(partition_index=1)])]))
        partition = response.responses[0].partitions[0]
        assert partition.error_code == Errors.NOT_LEADER_OR_FOLLOWER.code
        assert partition.current_leader.leader_id == 2
        assert [n.node_id for n in response.node_endpoints] == [2]

        # DescribeShareGroupOffsets at the group's coordinator, which leads one of the two
        # partitions: the other's latest offset comes from its leader (ListOffsets), as Kafka's
        # NetworkPartitionMetadataClient does; it once raised NOT_LEADER_OR_FOLLOWER out of the
        # handler and closed the connection, then answered lag -1.
        coordinator = next(b._inner for b in brokers.values()
                           if b._inner.broker.group_coordinator.runtime.shards)
        D = messages.request_class(DESCRIBE_SHARE_GROUP_OFFSETS)

        def describe():
            with Wire(coordinator.bootstrap_servers) as wire:
                g = wire.call(DESCRIBE_SHARE_GROUP_OFFSETS, 1, D(groups=[
                    D.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)])
                ).groups[0]
            assert g.error_code == 0, g
            return {p.partition_index: p for t in g.topics for p in t.partitions}

        parts = describe()
        assert sorted(parts) == [0, 1]
        assert all(p.error_code == 0 and p.start_offset >= 0 for p in parts.values()), parts
        for index, part in parts.items():  # 20 records each, all delivered
            assert 0 <= part.lag <= 20 - part.start_offset, parts
            leader = brokers[index + 1]._inner.broker  # partition i lives on broker i + 1
            end = leader.replicas.get(topic, index).high_watermark
            assert end == 20
    finally:
        stop_brokers(brokers)
