"""ShareCoordinator: the shards of ``__share_group_state`` this broker leads, and
:class:`BrokerPersister`, the broker's :class:`~kbroker.coordinator.share.persister.Persister`.

A share partition's state lives in partition ``abs(hash("group:topicId:partition")) % n`` of
``__share_group_state`` (Kafka's ShareCoordinatorService.partitionFor, Java String.hashCode and
Kafka's Uuid text form). The topic is created on first use, as Kafka creates it on the first
FindCoordinator(SHARE): compacted, with the ``share.coordinator.state.topic.*`` settings.
"""

from __future__ import annotations

import logging

from kbroker.coordinator.runtime import CoordinatorRuntime
from kbroker.coordinator.share import operations as ops
from kbroker.coordinator.share.persister import (ReadResult, SharePartitionKey, StateBatch,
                                                 SummaryResult, WriteResult)
from kbroker.coordinator.share.records import partition_for
from kbroker.coordinator.share.shard import ShareShard
from kbroker.protocol.errors import Errors, KafkaError

log = logging.getLogger("kbroker.coordinator.share")

TOPIC = "__share_group_state"


class ShareCoordinator:
    def __init__(self, config, controller, partitions):
        self.config = config
        updates_per_snapshot = config.get("share.coordinator.snapshot.update.records.per.snapshot")
        topic_configs = {
            "cleanup.policy": "compact", "compression.type": "producer",
            "segment.bytes": str(config.get("share.coordinator.state.topic.segment.bytes")),
            "min.insync.replicas": str(config.get("share.coordinator.state.topic.min.isr"))}
        self.runtime = CoordinatorRuntime(
            controller, partitions, TOPIC,
            config.get("share.coordinator.state.topic.num.partitions"), topic_configs,
            lambda runtime, index: ShareShard(runtime, index, updates_per_snapshot),
            config.get("share.coordinator.state.topic.replication.factor"))

    def start(self) -> None:
        self.runtime.start()

    async def stop(self) -> None:
        await self.runtime.stop()

    def partition_for(self, key: SharePartitionKey) -> int:
        return partition_for(key.coordinator_key(), self.runtime.num_partitions)

    async def run(self, key: SharePartitionKey, op, result_cls):
        """Run ``op`` on the shard of ``key`` here; its result, or ``result_cls`` with the error
        (NOT_COORDINATOR when this broker does not lead the key's partition)."""
        try:
            await self.runtime.ensure_topic()
            return await self.runtime.write(self.partition_for(key), op)
        except KafkaError as exc:
            return result_cls(exc.error, exc.message)


class BrokerPersister:
    """The persister share partitions and the group coordinator call: the operation runs on the
    shard of its key, on this broker when it leads that partition of ``__share_group_state``."""

    def __init__(self, coordinator: ShareCoordinator):
        self.coordinator = coordinator

    def _check(self, key: SharePartitionKey):
        if not key.group_id:
            return Errors.INVALID_REQUEST, "Group id must be specified and non-empty"
        return None

    async def _run(self, key: SharePartitionKey, op, result_cls):
        problem = self._check(key)
        if problem is not None:
            return result_cls(*problem)
        return await self.coordinator.run(key, op, result_cls)

    async def initialize(self, key: SharePartitionKey, state_epoch: int,
                         start_offset: int) -> WriteResult:
        return await self._run(key, ops.initialize(key, state_epoch, start_offset), WriteResult)

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> ReadResult:
        return await self._run(key, ops.read(key, leader_epoch), ReadResult)

    async def write(self, key: SharePartitionKey, state_epoch: int, leader_epoch: int,
                    start_offset: int, batches: list[StateBatch],
                    delivery_complete_count: int = -1) -> WriteResult:
        return await self._run(key, ops.write(key, state_epoch, leader_epoch, start_offset,
                                              list(batches), delivery_complete_count),
                               WriteResult)

    async def delete(self, key: SharePartitionKey) -> WriteResult:
        return await self._run(key, ops.delete(key), WriteResult)

    async def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> SummaryResult:
        return await self._run(key, ops.read_summary(key, leader_epoch), SummaryResult)
