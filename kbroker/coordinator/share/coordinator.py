"""ShareCoordinator: the shards of ``__share_group_state`` this broker leads, and
:class:`BrokerPersister`, the broker's :class:`~kbroker.coordinator.share.persister.Persister`.

A share partition's state lives in partition ``abs(hash("group:topicId:partition")) % n`` of
``__share_group_state`` (Kafka's ShareCoordinatorService.partitionFor, Java String.hashCode and
Kafka's Uuid text form). The topic is created on first use, as Kafka creates it on the first
FindCoordinator(SHARE), with Kafka's configs: ``cleanup.policy=delete``, ``retention.ms=-1``
(never compacted: updates are deltas), and the ``share.coordinator.state.topic.*`` settings.
Records below every share partition's latest snapshot are pruned every
``share.coordinator.state.topic.prune.interval.ms``, and share partitions idle for
``share.coordinator.cold.partition.snapshot.interval.ms`` get a fresh snapshot so that they do
not hold pruning back, as Kafka does.

Routing (Kafka's DefaultStatePersister): the persister finds the key's coordinator, the leader
of its partition, in the metadata image - the answer FindCoordinator(SHARE) gives, without the
round trip, and always as fresh as this broker's image. It runs the operation on the local shard
when that leader is this broker, else sends the matching API (83-87) to the leader over an
inter-broker connection. NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS and
COORDINATOR_NOT_AVAILABLE (also an unreachable leader) are retried with a growing back-off, up to
``request.timeout.ms``, looking the leader up again each time: a coordinator that moved or is
loading is found once the image says so.
"""

from __future__ import annotations

import asyncio
import logging
import time

from kbroker.coordinator.runtime import CoordinatorRuntime, respond
from kbroker.coordinator.share import operations as ops
from kbroker.coordinator.share import wire
from kbroker.coordinator.share.persister import (ReadResult, SharePartitionKey, StateBatch,
                                                 SummaryResult, WriteResult)
from kbroker.coordinator.share.records import partition_for
from kbroker.coordinator.share.shard import ShareShard
from kbroker.coordinator.interbroker import InterBrokerChannel
from kbroker.metadata.delta import deleted_topic_ids
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.replica.broker_client import BrokerClientError

log = logging.getLogger("kbroker.coordinator.share")

TOPIC = "__share_group_state"
RETRIABLE = frozenset({Errors.NOT_COORDINATOR, Errors.COORDINATOR_LOAD_IN_PROGRESS,
                       Errors.COORDINATOR_NOT_AVAILABLE})
_RETRY_FIRST_S = 0.05
_RETRY_MAX_S = 1.0


class ShareCoordinator:
    def __init__(self, config, controller, partitions):
        self.config = config
        self.partitions = partitions
        updates_per_snapshot = config.get("share.coordinator.snapshot.update.records.per.snapshot")
        # As Kafka (KIP-932): not compacted - a ShareUpdate is a delta on the last snapshot, so
        # compaction (one record per key) would drop state; kept forever instead.
        topic_configs = {
            "cleanup.policy": "delete", "retention.ms": "-1", "compression.type": "producer",
            "segment.bytes": str(config.get("share.coordinator.state.topic.segment.bytes")),
            "min.insync.replicas": str(config.get("share.coordinator.state.topic.min.isr"))}
        self.runtime = CoordinatorRuntime(
            controller, partitions, TOPIC,
            config.get("share.coordinator.state.topic.num.partitions"), topic_configs,
            lambda runtime, index: ShareShard(runtime, index, updates_per_snapshot),
            config.get("share.coordinator.state.topic.replication.factor"))
        self._tasks: list[asyncio.Task] = []  # pruning and cold snapshots
        self._pruned: dict[int, int] = {}  # partition -> the offset it was last pruned to

    def start(self) -> None:
        self.runtime.start()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._prune_periodically(), name="share state pruning"),
                       loop.create_task(self._snapshot_cold_periodically(),
                                        name="share state cold snapshots")]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
        await self.runtime.stop()

    async def _snapshot_cold_periodically(self) -> None:
        """Every ``share.coordinator.cold.partition.snapshot.interval.ms``: each loaded shard
        snapshots its share partitions idle that long (``operations.snapshot_cold``)."""
        interval_ms = self.config.get("share.coordinator.cold.partition.snapshot.interval.ms")
        while True:
            await asyncio.sleep(interval_ms / 1000)
            for index in list(self.runtime.shards):
                try:
                    count = await self.runtime.write(index, ops.snapshot_cold(interval_ms))
                except KafkaError as exc:  # not loaded (yet), no longer hosted, write failed
                    log.debug("no cold snapshots in %s-%d: %s", TOPIC, index, exc)
                    continue
                except Exception:  # the next round tries again
                    log.exception("cold snapshots of %s-%d failed", TOPIC, index)
                    continue
                if count:
                    log.debug("%d cold snapshot(s) in %s-%d", count, TOPIC, index)

    async def _prune_periodically(self) -> None:
        """Every ``share.coordinator.state.topic.prune.interval.ms``: each loaded shard's
        partition loses the records below its oldest latest snapshot (Kafka deletes them the
        same way, with DeleteRecords on the leader); the topic stays bounded though it is never
        compacted."""
        interval_s = self.config.get("share.coordinator.state.topic.prune.interval.ms") / 1000
        while True:
            await asyncio.sleep(interval_s)
            for index in list(self.runtime.shards):
                try:
                    await self.prune(index)
                except Exception:  # the next round tries again; this one must not end the loop
                    log.exception("pruning %s-%d failed", TOPIC, index)

    async def prune(self, index: int) -> int | None:
        """Prune partition ``index`` up to its last redundant offset; the new log start offset,
        or None when there was nothing to do."""
        try:
            # An operation without records answers after the writes before it are committed:
            # the offset it reads is one the log keeps.
            offset = await self.runtime.write(
                index, lambda shard: respond(shard.last_redundant_offset()))
        except KafkaError as exc:  # not loaded (yet), or no longer hosted here
            log.debug("not pruning %s-%d: %s", TOPIC, index, exc)
            return None
        if offset is None or self._pruned.get(index) == offset:
            return None
        partition = self.partitions.get(TOPIC, index)
        if partition is None or offset <= partition.log_start_offset:
            return None
        try:
            start = partition.delete_records_before(offset)
        except KafkaError as exc:
            log.info("cannot prune %s-%d up to %d: %s", TOPIC, index, offset, exc)
            return None
        self._pruned[index] = offset
        log.debug("pruned %s-%d up to offset %d", TOPIC, index, start)
        return start

    def partition_for(self, key: SharePartitionKey | str) -> int:
        """The state partition of a key (or of its FindCoordinator text)."""
        text = key if isinstance(key, str) else key.coordinator_key()
        return partition_for(text, self.runtime.num_partitions)

    async def run(self, key: SharePartitionKey, op, result_cls):
        """Run ``op`` on the shard of ``key`` here (the APIs 83-87 from another broker): its
        result, or ``result_cls`` with the error - NOT_COORDINATOR when this broker does not
        host the key's shard, COORDINATOR_LOAD_IN_PROGRESS while it loads."""
        try:
            return await self.runtime.write(self.partition_for(key), op)
        except KafkaError as exc:
            return result_cls(exc.error, exc.message)

    def apply(self, old, new, delta):
        """Image listener: when topics are deleted, every loaded shard writes tombstones for the
        share partition states of those topics, as Kafka's share coordinator does."""
        if delta.deleted or delta.created:
            deleted = frozenset(deleted_topic_ids(old, new, delta))
            if deleted:
                for index, shard in list(self.runtime.shards.items()):
                    if shard.loading or shard.load_error is not None:
                        continue
                    try:
                        done = self.runtime.run(index, ops.forget_topics(deleted))
                    except KafkaError as exc:
                        log.warning("cannot drop the share states of deleted topics in %s-%d: "
                                    "%s", TOPIC, index, exc)
                        continue
                    done.add_done_callback(lambda f, i=index: _log_forgotten(f, i))
        yield from ()

    def coordinator_of(self, key: SharePartitionKey) -> int:
        """The broker leading the key's state partition (-1: none, or no topic yet)."""
        topic = self.runtime.controller.image.topic(TOPIC)
        if topic is None:
            return -1
        return topic.state(self.partition_for(key)).leader


def _log_forgotten(done: asyncio.Future, index: int) -> None:
    if done.cancelled():
        return
    if done.exception() is not None:
        log.warning("dropping the share states of deleted topics in %s-%d failed: %s", TOPIC,
                    index, done.exception())
    elif done.result():
        log.info("dropped %d share partition state(s) of deleted topics in %s-%d",
                 done.result(), TOPIC, index)


class BrokerPersister:
    """The persister share partitions and the group coordinator call (see the module doc)."""

    def __init__(self, coordinator: ShareCoordinator, config):
        self.coordinator = coordinator
        self.config = config
        self.node_id = coordinator.partitions.node_id
        self.timeout_s = config.get("request.timeout.ms") / 1000
        partitions = coordinator.partitions
        self.channel = InterBrokerChannel(
            self.node_id, self.timeout_s, "share-state",
            lambda: getattr(partitions, "inter_broker_security", None))
        self._closed = False

    def close(self) -> None:
        """The broker stops: calls waiting on another broker end, and nothing is retried."""
        self._closed = True
        self.channel.close()

    async def _run(self, key: SharePartitionKey, api: str, op, request):
        result_cls = wire.RESULT_TYPES[api]
        if not key.group_id:
            return result_cls(Errors.INVALID_REQUEST, "Group id must be specified and non-empty")
        deadline = time.monotonic() + self.timeout_s
        backoff = _RETRY_FIRST_S
        while True:
            result = await self._attempt(key, api, op, request, result_cls)
            if (result.error not in RETRIABLE or self._closed
                    or time.monotonic() + backoff > deadline):
                return result
            log.debug("%s of %s: %s; retrying", api, key.coordinator_key(), result.error.name)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, _RETRY_MAX_S)

    async def _attempt(self, key, api, op, request, result_cls):
        runtime = self.coordinator.runtime
        if not runtime.exists:
            try:
                await runtime.create_topic_if_missing()
            except KafkaError as exc:
                # Another broker creating it meanwhile, too few brokers yet: retriable.
                log.info("cannot create %s yet: %s", TOPIC, exc.message)
                return result_cls(Errors.COORDINATOR_NOT_AVAILABLE, exc.message)
        leader = self.coordinator.coordinator_of(key)
        if leader == self.node_id:
            return await self.coordinator.run(key, op, result_cls)
        if leader < 0:
            return result_cls(Errors.COORDINATOR_NOT_AVAILABLE,
                              f"{TOPIC}-{self.coordinator.partition_for(key)} has no leader")
        endpoint = self._endpoint(leader)
        if endpoint is None:
            return result_cls(Errors.COORDINATOR_NOT_AVAILABLE, f"broker {leader} is offline")
        try:
            response = await self.channel.request(leader, endpoint, api, request)
        except BrokerClientError as exc:
            return result_cls(Errors.COORDINATOR_NOT_AVAILABLE,
                              f"{api} to broker {leader} failed: {exc}")
        return wire.result_of(api, key, response)

    def _endpoint(self, broker_id: int):
        broker = self.coordinator.runtime.controller.image.brokers.get(broker_id)
        if broker is None or not broker.endpoints:
            return None
        endpoint = broker.endpoints.get(self.config.inter_broker_listener_name)
        return endpoint if endpoint is not None else next(iter(broker.endpoints.values()))

    async def initialize(self, key: SharePartitionKey, state_epoch: int,
                         start_offset: int) -> WriteResult:
        return await self._run(key, wire.INITIALIZE,
                               ops.initialize(key, state_epoch, start_offset),
                               wire.initialize_request(key, state_epoch, start_offset))

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> ReadResult:
        return await self._run(key, wire.READ, ops.read(key, leader_epoch),
                               wire.read_request(key, leader_epoch))

    async def write(self, key: SharePartitionKey, state_epoch: int, leader_epoch: int,
                    start_offset: int, batches: list[StateBatch],
                    delivery_complete_count: int = -1) -> WriteResult:
        batches = list(batches)
        return await self._run(
            key, wire.WRITE,
            ops.write(key, state_epoch, leader_epoch, start_offset, batches,
                      delivery_complete_count),
            wire.write_request(key, state_epoch, leader_epoch, start_offset, batches,
                               delivery_complete_count))

    async def delete(self, key: SharePartitionKey) -> WriteResult:
        return await self._run(key, wire.DELETE, ops.delete(key), wire.delete_request(key))

    async def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> SummaryResult:
        return await self._run(key, wire.SUMMARY, ops.read_summary(key, leader_epoch),
                               wire.summary_request(key, leader_epoch))
