"""A group shard for consumer-group unit tests: the real CoordinatorRuntime over in-memory
partitions (tests/coordinator/fakes.py) and a real metadata image whose topics a test sets."""

from __future__ import annotations

import uuid

from kbroker.config import BrokerConfig
from kbroker.coordinator.group.shard import GroupShard, TopicChanges
from kbroker.coordinator.runtime import CoordinatorRuntime
from kbroker.metadata.image import MetadataImage, TopicMetadata
from tests.coordinator.fakes import FakePartition

OFFSETS = "__consumer_offsets"


class FakeController:
    def __init__(self):
        self.image = MetadataImage.build("test-cluster", [TopicMetadata(OFFSETS, uuid.uuid4(),
                                                                        [[1]])])
        self.partitions = {(OFFSETS, 0): FakePartition()}

    def add_topic(self, name: str, partitions: int) -> uuid.UUID:
        topic = TopicMetadata(name, uuid.uuid4(), [[1]] * partitions)
        self.image = self.image.with_topic(topic)
        return topic.topic_id

    def get(self, topic, index):
        return self.partitions.get((topic, index))

    def live_brokers(self) -> dict:
        return {1: None}  # a single node without broker.rack, as the real controller says


def make_consumer_shard(**overrides) -> GroupShard:
    config = BrokerConfig({"group.consumer.assignment.interval.ms": 0, **overrides})
    controller = FakeController()
    changes = TopicChanges()
    configs: dict = {}
    runtime = CoordinatorRuntime(controller, controller, OFFSETS, 1, {},
                                 lambda rt, index: GroupShard(rt, index, config, changes,
                                                              lambda g: configs.get(g, {})))
    runtime.load(0)
    shard = runtime.shards[0]
    shard.controller = controller
    shard.partition = controller.get(OFFSETS, 0)
    shard.test_group_configs = configs
    return shard


def reload_consumer_shard(shard) -> GroupShard:
    fresh = GroupShard(shard.runtime, 0, shard.config, shard.topic_changes)
    for offset, key, value in shard.partition.records():
        fresh.replay(offset, key, value)
    fresh.loading = False
    return fresh
