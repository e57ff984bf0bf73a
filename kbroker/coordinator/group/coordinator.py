"""GroupCoordinator: routes a group to its shard, runs operations there through the runtime, and
owns the groups' background work: the periodic offset expiry, share-partition initialization
and streams groups' internal topics (each a task it keeps and cancels at stop)."""

from __future__ import annotations

import asyncio
import logging

from kbroker.coordinator.group import offsets
from kbroker.coordinator.partitioning import partition_for
from kbroker.metadata.delta import deleted_topic_ids
from kbroker.coordinator.group.shard import GroupShard, TopicChanges
from kbroker.coordinator.runtime import CoordinatorRuntime
from kbroker.protocol.errors import Errors, KafkaError

log = logging.getLogger("kbroker.coordinator.group")

TOPIC = "__consumer_offsets"


class GroupCoordinator:
    def __init__(self, config, controller, partitions, share_persister=None,
                 share_end_offsets=None):
        self.config = config
        self.controller = controller
        self.topic_changes = TopicChanges()
        topic_configs = {"cleanup.policy": "compact", "compression.type": "producer",
                         "segment.bytes": str(config.get("offsets.topic.segment.bytes"))}
        self.runtime = CoordinatorRuntime(
            controller, partitions, TOPIC, config.get("offsets.topic.num.partitions"), topic_configs,
            lambda runtime, index: GroupShard(runtime, index, config, self.topic_changes,
                                              self.group_configs),
            config.get("offsets.topic.replication.factor"))
        self._expiry: asyncio.Task | None = None
        self._background: set[asyncio.Task] = set()  # initializations, topic creations
        self._creating: set[str] = set()  # streams internal topics being created here
        # The share coordinator's persister (kbroker.coordinator.share.persister.Persister):
        # share groups initialize, read and delete share-partition state through it. Without one
        # (tests of other group types) no partition is initialized, so share groups get no
        # assignment.
        self.share_persister = share_persister
        # Each partition's latest offset, from its leader, for DescribeShareGroupOffsets' lag
        # (kbroker.coordinator.group.share.end_offsets.PartitionEndOffsets).
        self.share_end_offsets = share_end_offsets

    def group_configs(self, group_id: str):
        """A group's configs (the GROUP resource) as the current metadata image holds them:
        read at each use, so a change applies to running groups from their next heartbeat
        (interval) and next deadlines (session timeout), as on Kafka."""
        return self.controller.image.group_config(group_id)

    def share_group_settings(self, group_id: str):
        """What a share partition of ``group_id`` needs of its group's configs
        (:class:`kbroker.coordinator.group.group_configs.ShareGroupSettings`): the group's
        ``share.*`` overrides, else the broker's ``group.share.*`` values; read at each call."""
        from kbroker.coordinator.group.group_configs import share_group_settings_of
        return share_group_settings_of(self.config, self.group_configs(group_id))

    def start(self) -> None:
        self.runtime.start()
        self.controller.subscribe(_TopicListener(self))
        self._expiry = asyncio.get_running_loop().create_task(self._expire_periodically(),
                                                              name="offset expiry")

    async def stop(self) -> None:
        for task in list(self._background):
            task.cancel()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        if self._expiry is not None:
            self._expiry.cancel()
            try:
                await self._expiry
            except asyncio.CancelledError:
                pass
        await self.runtime.stop()

    def _spawn(self, job, name: str) -> None:
        task = asyncio.get_running_loop().create_task(job, name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def initialize_share_partitions(self, request) -> None:
        """Initialize the share partitions a heartbeat found (an InitializeRequest) in the
        background (:func:`kbroker.coordinator.group.share.initialize.initialize_partitions`)."""
        from kbroker.coordinator.group.share.initialize import initialize_partitions
        if self.share_persister is None:
            log.warning("group %s: no share persister yet: %d topic(s) of share partitions stay "
                        "uninitialized and unassigned", request.group_id, len(request.topics))
            return
        self._spawn(initialize_partitions(self, self.share_persister, request),
                    f"share-init-{request.group_id}")

    def create_internal_topic(self, group_id: str, topic) -> None:
        """Create a streams group's missing internal topic (a streams ``TopicConfig``) in the
        background, once at a time per name (Kafka's AutoTopicCreationManager)."""
        if topic.name in self._creating:
            return
        self._creating.add(topic.name)
        self._spawn(self._create_internal_topic(group_id, topic), f"create-{topic.name}")

    async def _create_internal_topic(self, group_id: str, topic) -> None:
        from kbroker.metadata.topic_policy import NewTopic
        try:
            await self.controller.create_topic(NewTopic(
                topic.name, topic.partitions, topic.replication_factor or -1,
                configs=dict(topic.configs) or None))
            log.info("group %s: created internal topic %s with %d partition(s)", group_id,
                     topic.name, topic.partitions)
        except KafkaError as exc:
            if exc.error is not Errors.TOPIC_ALREADY_EXISTS:
                log.warning("group %s: creating internal topic %s failed: %s %s", group_id,
                            topic.name, exc.error.name, exc.message or "")
        except Exception:  # noqa: BLE001 - logged, the next heartbeat retries
            log.exception("group %s: creating internal topic %s failed", group_id, topic.name)
        finally:
            self._creating.discard(topic.name)

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
        if not self.runtime.ready():
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


class _TopicListener:
    """Follows the metadata image for the consumer groups (Kafka's onMetadataUpdate): a group
    subscribed to a topic that was created, changed or deleted re-checks its metadata hash at its
    next heartbeat; groups with regexes re-resolve them once topics were created; a deleted topic
    leaves the share groups' state metadata."""

    def __init__(self, coordinator: GroupCoordinator):
        self.coordinator = coordinator

    def apply(self, old, new, delta):
        changes = self.coordinator.topic_changes
        changes.version += 1
        created = [n for n in delta.created if old.topic(n) is None]
        if created:
            changes.created_version = changes.version
        changed = delta.topic_names()
        if changed:
            for shard in list(self.coordinator.runtime.shards.values()):
                if not shard.loading:
                    consumer_topics_changed(shard, changed, bool(created))
        deleted = set(deleted_topic_ids(old, new, delta))
        if deleted:
            for shard in list(self.coordinator.runtime.shards.values()):
                if not shard.loading and shard.groups_of_type("share"):
                    share_topics_deleted(shard, deleted)
        yield from ()


def share_topics_deleted(shard, topic_ids: set) -> None:
    """Deleted topics leave the share groups' state metadata (a write on the shard, soon)."""
    from kbroker.coordinator.group.share.initialize import forget_deleted_topics
    from kbroker.coordinator.runtime import CoordinatorResult
    shard.schedule(("share-deleted-topics", frozenset(topic_ids)), 0,
                   lambda s: CoordinatorResult(forget_deleted_topics(s, topic_ids)))


def consumer_topics_changed(shard, changed: set, created: bool) -> None:
    from kbroker.coordinator.group.consumer import subscription
    from kbroker.coordinator.group.consumer.regex import REFRESH_MIN_INTERVAL_MS
    from kbroker.coordinator.runtime import now_ms
    now = now_ms()
    for group in shard.groups_of_type("consumer"):
        if any(topic in group.subscribed for topic in changed):
            group.metadata_refresh = (0, 0)
        if created and group.regex_subscribers:
            last, _ = group.last_regex_refresh()
            delay = max(0, last + REFRESH_MIN_INTERVAL_MS + 1 - now)
            subscription.schedule_refresh(shard, group.group_id, delay)
