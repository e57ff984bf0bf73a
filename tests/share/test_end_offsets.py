"""PartitionEndOffsets (DescribeShareGroupOffsets' lag) when the leader cannot answer: each
partition gets Kafka's error, never an exception out of the handler. The answer from a live
leader is covered by tests/cluster/test_share_fetch_cluster.py."""

import asyncio
import socket
import uuid

from kbroker.coordinator.group.share.end_offsets import PartitionEndOffsets
from kbroker.metadata.image import PartitionState, TopicMetadata
from kbroker.protocol.errors import Errors


class NoReplicas:
    def get(self, topic, index):
        return None


class Broker:
    def __init__(self, endpoints):
        self.endpoints = endpoints


class Image:
    def __init__(self, topic, brokers):
        self._topic = topic
        self.brokers = brokers

    def topic(self, name):
        return self._topic if self._topic.name == name else None


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def latest(image, topic="t", index=0):
    end_offsets = PartitionEndOffsets(1, NoReplicas(), lambda: image, "PLAINTEXT", 2.0)
    try:
        return asyncio.run(end_offsets.latest(topic, index))
    finally:
        end_offsets.close()


def test_errors_per_partition_as_kafka():
    topic = TopicMetadata("t", uuid.uuid4(), ((2,),), states=(PartitionState(2, 0, (2,)),))
    unreachable = Image(topic, {2: Broker({"PLAINTEXT": ("127.0.0.1", closed_port())})})
    assert latest(unreachable) == (Errors.NETWORK_EXCEPTION, -1)
    assert latest(Image(topic, {})) == (Errors.LEADER_NOT_AVAILABLE, -1)
    leaderless = TopicMetadata("t", uuid.uuid4(), ((2,),), states=(PartitionState(-1, 0, ()),))
    assert latest(Image(leaderless, {})) == (Errors.LEADER_NOT_AVAILABLE, -1)
    assert latest(unreachable, "other") == (Errors.UNKNOWN_TOPIC_OR_PARTITION, -1)
    assert latest(unreachable, "t", 5) == (Errors.UNKNOWN_TOPIC_OR_PARTITION, -1)
