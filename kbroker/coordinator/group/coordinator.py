"""GroupCoordinator: routes a group to its shard, runs operations there through the runtime, and
runs the periodic offset expiry."""

from __future__ import annotations

import asyncio
import logging

from kbroker.coordinator.group import offsets
from kbroker.coordinator.group.records import partition_for
from kbroker.coordinator.group.shard import GroupShard
from kbroker.coordinator.runtime import CoordinatorRuntime
from kbroker.protocol.errors import KafkaError

log = logging.getLogger("kbroker.coordinator.group")

TOPIC = "__consumer_offsets"


class GroupCoordinator:
    def __init__(self, config, controller, partitions):
        self.config = config
        topic_configs = {"cleanup.policy": "compact", "compression.type": "producer",
                         "segment.bytes": str(config.get("offsets.topic.segment.bytes"))}
        self.runtime = CoordinatorRuntime(
            controller, partitions, TOPIC, config.get("offsets.topic.num.partitions"), topic_configs,
            lambda runtime, index: GroupShard(runtime, index, config),
            config.get("offsets.topic.replication.factor"))
        self._expiry: asyncio.Task | None = None

    def start(self) -> None:
        self.runtime.start()
        self._expiry = asyncio.get_running_loop().create_task(self._expire_periodically(),
                                                              name="offset expiry")

    async def stop(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
            try:
                await self._expiry
            except asyncio.CancelledError:
                pass
        await self.runtime.stop()

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.runtime.num_partitions)

    def shard_for(self, group_id: str) -> GroupShard:
        """The loaded shard of a group, for reads; raises KafkaError NOT_COORDINATOR while
        ``__consumer_offsets`` does not exist (a write or FindCoordinator creates it),
        COORDINATOR_LOAD_IN_PROGRESS while the shard loads."""
        self.runtime.require_topic()
        return self.runtime.shard(self.partition_for(group_id))

    async def write(self, group_id: str, op):
        """Run ``op(shard) -> CoordinatorResult`` on the group's shard; its response once its
        records are committed (and, for a parked JoinGroup/SyncGroup, once that is answered).
        Raises KafkaError (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, a failed write)."""
        await self.runtime.ensure_topic()
        response = await self.runtime.write(self.partition_for(group_id), op)
        if isinstance(response, asyncio.Future):
            response = await response
        return response

    def shards(self):
        return self.runtime.shards.values()

    async def expire_offsets(self, now: int | None = None) -> int:
        retention = self.config.offsets_retention_ms
        total = 0
        for index, shard in list(self.runtime.shards.items()):
            if not shard.loading:
                total += await self.runtime.write(
                    index, lambda s: offsets.expire(s, retention, now))
        return total

    async def _expire_periodically(self) -> None:
        interval = self.config.get("offsets.retention.check.interval.ms") / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.expire_offsets()
            except KafkaError as exc:
                log.warning("offset expiry: %s", exc)
            except Exception:
                log.exception("offset expiry failed")
