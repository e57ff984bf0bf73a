"""All partitions this broker hosts, and the bridge from metadata images to partition logs.

The controller publishes immutable metadata images; :meth:`ReplicaManager.apply` brings the log
dirs from one image to the next (create or delete partition dirs, new LogConfigs). Start-up runs
the same ``apply`` from the image of what is on disk to the stored image, which repairs a crash
at any step of a metadata change (a committed change whose partitions were never made, a
deletion whose dirs were left).

In a cluster (an image with live ``brokers``) ``apply`` also follows each partition's state
(``topic.state(i)``: leader, leader epoch, ISR): it hosts only partitions whose assignment names
this broker (deleting those reassigned away), makes each leader or follower (a state with an
older leader epoch than the partition has is ignored: fencing), hands followers to the replica
fetchers (:mod:`kbroker.replica.fetcher`) and tells leadership listeners (the coordinators)
about every change. :meth:`start_replication` (cluster wiring) injects the ISR writer and starts
the fetchers and the ISR shrink job. A single node never calls it and keeps its behaviour.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
import uuid
from typing import TYPE_CHECKING, Callable, Iterator

from kbroker.metadata import state_change
from kbroker.metadata.delta import MetadataDelta
from kbroker.metadata.image import MetadataImage, TopicMetadata
from kbroker.protocol.errors import Errors
from kbroker.replica.log_dir_mover import LogDirMover
from kbroker.replica.partition import (CONSUMER_REPLICA_ID, FOLLOWER, LEADER, Partition,
                                       wait_for_news)

if TYPE_CHECKING:  # replica fetchers are loaded by the first start_replication (a cluster)
    from kbroker.replica.fetcher import FetcherSettings, ReplicaFetcherManager

log = logging.getLogger("kbroker.replicas")


def now_ms() -> int:
    return int(time.time() * 1000)


class ReplicaManager:
    def __init__(self, log_manager, log_config_for, node_id: int = 0, cluster: bool = False):
        """``log_config_for(topic_metadata)`` gives the LogConfig of a topic's partitions.
        ``cluster``: follow partition states even in an image that lists no live broker yet
        (the first broker of a restarting cluster reads topics before anyone registered)."""
        self.log_manager = log_manager
        self.log_config_for = log_config_for
        self.node_id = node_id
        self.cluster = cluster
        self._partitions: dict[tuple[str, int], Partition] = {}
        self.broker_config = None  # set by open(); start_replication reads replica.* from it
        self.image: MetadataImage | None = None  # the last image applied
        self._isr_writer = None
        self._fetchers: ReplicaFetcherManager | None = None
        self._inter_broker_listener: str | None = None
        # How this broker connects to others (InterBrokerSecurity; None: PLAINTEXT). Set by
        # start_replication; whoever else opens a BrokerClient (transaction markers) uses it too.
        self.inter_broker_security = None
        self._isr_job: asyncio.Task | None = None
        self._leadership_listeners: list[Callable] = []
        self.log_dir_mover = LogDirMover(self)

    @classmethod
    def open(cls, broker_config, image: "MetadataImage", node_id: int) -> "ReplicaManager":
        """Open (and recover) the logs in ``log.dirs`` with each topic's own settings, then bring
        them to ``image`` (see :meth:`start`). The broker's one way to get at its storage."""
        from kbroker.replica.log_settings import log_config_factory
        from kbroker.log.log_manager import LogManager

        log_config_for = log_config_factory(broker_config)
        default_config = log_config_for(None)
        topics = image.topics()
        log_manager = LogManager(broker_config.log_dirs, node_id, image.cluster_id,
                                 max_open_files=broker_config.get("log.open.files.max"))
        # Recovery validates and indexes with each topic's own settings.
        log_manager.open(config_for=lambda name: log_config_for(topics[name])
                         if name in topics else default_config)
        replicas = cls(log_manager, log_config_for, node_id,
                       cluster=bool(broker_config.get("zookeeper.connect")))
        replicas.broker_config = broker_config
        # Repairs a crash between a persisted change and its application.
        replicas.start(image)
        return replicas

    def log_cleaner(self, backoff_ms: int):
        """The compaction cleaner over these logs; the broker runs its ``run()`` as a task."""
        from kbroker.log.cleaner import LogCleaner

        return LogCleaner(self.log_manager, backoff_ms=backoff_ms)

    def close(self) -> None:
        """Flush and close every log, writing the checkpoints and the clean-shutdown marker.
        Replica fetchers and the ISR job stop first (cancelled; :meth:`stop_replication` is
        the graceful way), so nothing appends to a closed log."""
        if self._isr_job is not None:
            self._isr_job.cancel()
            self._isr_job = None
        if self._fetchers is not None:
            self._fetchers.cancel_all()
            self._fetchers = None
        self.log_dir_mover.stop_all()  # a future log left here resumes at the next start
        self.log_manager.close()

    def get(self, topic: str, index: int) -> Partition | None:
        return self._partitions.get((topic, index))

    def partitions(self):
        return self._partitions.values()

    @property
    def log_dirs(self) -> list[str]:
        return self.log_manager.log_dirs

    def log_dir_of(self, topic: str, index: int) -> str | None:
        return self.log_manager.log_dir_of(topic, index)

    # --- moves between log dirs (AlterReplicaLogDirs) -------------------------------------------

    def alter_log_dir(self, topic: str, index: int, log_dir: str) -> Errors:
        """Move the replica to ``log_dir`` (one of ``log.dirs``, as an absolute path), in the
        checks' order of Kafka's ReplicaManager.alterReplicaLogDirs. The answer comes at once;
        :mod:`kbroker.replica.log_dir_mover` copies in the background. Naming the dir the replica
        is in cancels a move in progress. For a replica not hosted yet the dir is remembered and
        used when it is created (REPLICA_NOT_AVAILABLE, which kafka-reassign-partitions.sh
        retries until the reassignment has made the replica)."""
        log_manager = self.log_manager
        if len(f"{topic}-{index}.{uuid.uuid4().hex}-future") > 255:
            return Errors.INVALID_TOPIC_EXCEPTION
        if log_dir not in log_manager.log_dirs:
            return Errors.LOG_DIR_NOT_FOUND
        key = (topic, index)
        current = log_manager.get(topic, index)
        if current is not None and getattr(current, "offline", False):
            return Errors.KAFKA_STORAGE_ERROR
        future_dir = log_manager.future_dir_of(topic, index)
        if future_dir is not None and future_dir != log_dir:
            self.log_dir_mover.stop(topic, index)
            log_manager.abort_future(topic, index)
            log.info("cancelled the move of %s-%d to %s", topic, index, future_dir)
            future_dir = None
        current_dir = log_manager.log_dir_of(topic, index)
        if log_dir not in (current_dir, future_dir):
            log_manager.preferred_dirs[key] = log_dir
        partition = self._partitions.get(key)
        if partition is None or current is None:
            known = self.image is not None and self.image.topic(topic) is not None
            return Errors.REPLICA_NOT_AVAILABLE if known else Errors.UNKNOWN_TOPIC_OR_PARTITION
        log_manager.preferred_dirs.pop(key, None)
        if log_dir == current_dir or log_dir == future_dir:
            return Errors.NONE
        try:
            log_manager.create_future(topic, index, log_dir)
        except OSError as exc:
            log.error("cannot move %s-%d to %s: %s", topic, index, log_dir, exc.strerror)
            return Errors.KAFKA_STORAGE_ERROR
        log.info("moving %s-%d from %s to %s", topic, index, current_dir, log_dir)
        self.log_dir_mover.start(topic, index)
        return Errors.NONE

    def future_logs(self) -> dict:
        """``{(topic, index): future log}`` of the moves in progress (DescribeLogDirs)."""
        return self.log_manager.futures()

    def resume_log_dir_moves(self) -> None:
        """Once serving: resume the moves whose future logs the last run left."""
        self.log_dir_mover.resume()

    async def wait_for_news(self, partitions, timeout_s: float,
                            replica_id: int = CONSUMER_REPLICA_ID) -> bool:
        """Park a long-poll fetch; see :func:`kbroker.replica.partition.wait_for_news`."""
        return await wait_for_news(partitions, timeout_s, replica_id)

    # --- replication (cluster mode) --------------------------------------------------------------

    def add_leadership_listener(self, listener) -> None:
        """``listener(topic, index, is_leader, leader_epoch)`` on every leadership change of a
        hosted partition (the coordinators load and unload their shards with it)."""
        self._leadership_listeners.append(listener)

    def start_replication(self, isr_writer, *, settings: FetcherSettings | None = None,
                          inter_broker_listener: str | None = None,
                          lag_time_max_ms: int | None = None, security=None) -> None:
        """Cluster mode: ISR changes go through ``isr_writer(topic, index, proposed
        PartitionState) -> PartitionState`` (async; any exception: lost, the next image
        decides); followers fetch from their leaders on ``inter_broker_listener``, connecting
        with ``security`` (an InterBrokerSecurity, None for PLAINTEXT); leaders drop followers
        lagging more than ``replica.lag.time.max.ms``. Needs a running event loop."""
        from kbroker.replica.fetcher import FetcherSettings, ReplicaFetcherManager

        config = self.broker_config
        if settings is None:
            settings = FetcherSettings.from_config(config)
        if inter_broker_listener is None and config is not None:
            inter_broker_listener = config.inter_broker_listener_name
        if lag_time_max_ms is None:
            lag_time_max_ms = config.get("replica.lag.time.max.ms") if config else 30000
        self._isr_writer = isr_writer
        self._inter_broker_listener = inter_broker_listener
        self.inter_broker_security = security
        self._fetchers = ReplicaFetcherManager(self.node_id, settings, self._leader_endpoint,
                                               security)
        for partition in self._partitions.values():
            partition.isr_writer = isr_writer
            if partition.role == FOLLOWER:
                self._fetchers.add_partition(partition)
        self._isr_job = asyncio.get_running_loop().create_task(
            self._shrink_isrs_every(lag_time_max_ms), name="isr-shrink")

    async def stop_replication(self) -> None:
        if self._isr_job is not None:
            self._isr_job.cancel()
            await asyncio.gather(self._isr_job, return_exceptions=True)
            self._isr_job = None
        if self._fetchers is not None:
            await self._fetchers.shutdown()
            self._fetchers = None

    @property
    def fetchers(self) -> ReplicaFetcherManager | None:
        return self._fetchers

    def _leader_endpoint(self, leader_id: int) -> tuple[str, int] | None:
        broker = self.image.brokers.get(leader_id) if self.image is not None else None
        if broker is None or not broker.endpoints:
            return None
        endpoint = broker.endpoints.get(self._inter_broker_listener)
        return endpoint if endpoint is not None else next(iter(broker.endpoints.values()))

    async def _shrink_isrs_every(self, lag_time_max_ms: int) -> None:
        # Kafka checks at half the lag time, so a replica leaves within 1.5x of it.
        while True:
            await asyncio.sleep(max(lag_time_max_ms / 2, 10) / 1000)
            self.shrink_isrs(lag_time_max_ms)

    def shrink_isrs(self, lag_time_max_ms: int, now: int | None = None) -> None:
        now = now_ms() if now is None else now
        for partition in list(self._partitions.values()):
            if partition.role == LEADER and len(partition.isr) > 1:
                partition.maybe_shrink_isr(now, lag_time_max_ms)

    def _apply_state(self, partition: Partition, topic: TopicMetadata, index: int) -> None:
        """Make ``partition`` what its state in the image says (cluster mode only)."""
        state = topic.state(index)
        replicas = topic.assignments[index]
        was_leader = partition.role == LEADER
        if partition.is_stale(state):
            state_change.stale_state(self.node_id, topic.name, index, state,
                                     partition.leader_epoch)
            return
        was = _role(partition)
        if state.leader == self.node_id:
            changed = partition.make_leader(state, replicas, now_ms())
            if changed:
                state_change.became_leader(self.node_id, topic.name, index, state, replicas, was)
                if self._fetchers is not None:
                    self._fetchers.remove_partition(partition)
        else:
            changed = partition.make_follower(state, replicas)
            if changed:
                state_change.became_follower(self.node_id, topic.name, index, state, replicas,
                                             was)
                if self._fetchers is not None:
                    self._fetchers.add_partition(partition)
        if changed and (was_leader or partition.role == LEADER):
            self._tell_listeners(partition, partition.role == LEADER)

    def _tell_listeners(self, partition: Partition, is_leader: bool) -> None:
        for listener in self._leadership_listeners:
            try:
                listener(partition.topic, partition.index, is_leader, partition.leader_epoch)
            except Exception:
                log.exception("leadership listener failed for %s-%d", partition.topic,
                              partition.index)

    # --- background jobs (the broker schedules them) -------------------------------------------

    def enforce_retention(self, now: int | None = None) -> None:
        """Delete segments past retention.ms / retention.bytes or below the log start offset."""
        now = now_ms() if now is None else now
        for partition in list(self._partitions.values()):
            deleted = partition.delete_old_segments(now)
            if deleted:
                log.info("retention deleted %d segment(s) of %s-%d; log start offset is now %d",
                         deleted, partition.topic, partition.index, partition.log_start_offset)

    def flush_if_needed(self, now: int | None = None) -> None:
        """Kafka's flush.messages / flush.ms policy, for every partition."""
        now = now_ms() if now is None else now
        for partition in self._partitions.values():
            partition.flush_if_needed(now)

    def checkpoint(self) -> None:
        """Write the recovery-point, log-start-offset and high-watermark checkpoint files."""
        self.log_manager.checkpoint()

    # --- applying metadata images ----------------------------------------------------------------

    def start(self, image: MetadataImage) -> None:
        """At start-up: bring the log dirs to ``image`` (create partitions a crash left
        missing, delete strays, give every log its topic's settings), through the same
        :meth:`apply` every change uses, from the image of what is on disk. A topic whose
        partitions cannot be made is logged and left unhosted; the broker still starts."""
        on_disk = self.disk_image(image.cluster_id)
        for name, topic in on_disk.topics().items():
            stored = image.topic(name)
            if stored is None or _replaced(topic, stored):
                log.warning("deleting the %d partition dir(s) of topic %s (id %s): the metadata "
                            "does not have it (an interrupted deletion or refused creation)",
                            topic.num_partitions, name, topic.topic_id)
        # Every topic on either side: the one time the whole image is looked at.
        steps = self.apply(on_disk, image, MetadataDelta(
            created=dict(image.topics()),
            deleted=frozenset(on_disk.topics()) - frozenset(image.topics())))
        try:
            while True:
                next(steps)
        except StopIteration as done:
            for name, exc in (done.value or {}).items():
                log.error("cannot host the partitions of topic %s: %s", name, exc)

    def disk_image(self, cluster_id: str) -> MetadataImage:
        """What the log dirs hold, as an image: each topic with as many partitions as its
        highest partition dir, and the topic id its ``partition.metadata`` names (if any)."""
        highest: dict[str, int] = {}
        ids: dict[str, uuid.UUID | None] = {}
        for partition_log in self.log_manager.all_logs():
            name = partition_log.topic
            highest[name] = max(highest.get(name, -1), partition_log.partition)
            ids[name] = ids.get(name) or partition_log.topic_id
        return MetadataImage.build(cluster_id, [
            TopicMetadata(name, ids[name], ((),) * (top + 1)) for name, top in highest.items()])

    def apply(self, old: MetadataImage, new: MetadataImage, delta):
        """Bring this broker's partitions from ``old`` to ``new``: delete the partitions of
        removed topics (or of a topic re-created under a new id), create missing ones, set new
        LogConfigs. Yields after each partition created or deleted, so the caller decides when
        the event loop gets a turn. Only the topics ``delta`` names are looked at, and within
        one, replica lists and states are compared by identity (an image shares what a change
        did not touch): a leader change in a topic of 20,000 partitions touches one partition. In a cluster,
        only partitions assigned to this broker are hosted, each as its state says (see the
        module docstring). Returns ``{topic: OSError}`` for the topics whose partitions could
        not be made (what was made of them is removed again); the other topics are applied."""
        self.image = new
        cluster = self.cluster or bool(new.brokers)
        failures = {}
        for name in sorted(delta.topic_names()):
            before, after = old.topic(name), new.topic(name)
            try:
                yield from self._apply_topic(name, before, after, cluster)
            except OSError as exc:
                failures[name] = exc
                if after is not None:
                    yield from self._remove_partitions(name, range(after.num_partitions))
        if old.dynamic_broker_configs != new.dynamic_broker_configs:  # a small dict each
            # Topic settings default to broker configs: re-derive every topic's.
            for topic in new.topics().values():
                config = self.log_config_for(topic)
                for index in range(topic.num_partitions):
                    partition = self._partitions.get((topic.name, index))
                    if partition is not None:
                        partition.update_log_config(config)
        return failures

    def _apply_topic(self, name: str, before, after, cluster: bool) -> Iterator[None]:
        if before is not None and (after is None or _replaced(before, after)):
            yield from self._remove_partitions(name, range(before.num_partitions))
            before = None
        if after is None:
            return
        configs_changed = before is None or before.configs is not after.configs
        config = self.log_config_for(after)
        for index in range(after.num_partitions):
            replicas = after.assignments[index]
            if (before is not None and index < before.num_partitions and not configs_changed
                    and before.assignments[index] is replicas
                    and (not cluster or before.state(index) is after.state(index))):
                continue  # this partition did not change
            partition = self._partitions.get((name, index))
            if cluster and self.node_id not in replicas:
                if partition is not None or self.log_manager.get(name, index) is not None:
                    yield from self._remove_partitions(name, (index,))
                continue
            if partition is None:
                partition = self._add_partition(after, index, config, cluster)
                yield
            elif configs_changed:
                partition.update_log_config(config)
            if cluster:
                self._apply_state(partition, after, index)
        if before is not None and before.num_partitions > after.num_partitions:
            yield from self._remove_partitions(
                name, range(after.num_partitions, before.num_partitions))

    def _add_partition(self, topic: TopicMetadata, index: int, config,
                       cluster: bool = False) -> Partition:
        name = topic.name
        partition_log = self.log_manager.get(name, index)
        if partition_log is not None and _replaced_log(partition_log, topic):
            log.warning("deleting %s-%d: it belongs to an older topic %s (id %s, now %s)", name,
                        index, name, partition_log.topic_id, topic.topic_id)
            self.log_manager.delete(name, index)
            partition_log = None
        if partition_log is None:
            try:
                partition_log = self.log_manager.create(name, index, config, topic.topic_id)
            except OSError:
                self._remove_unopened_dir(name, index)
                raise
        else:
            partition_log.config = config
        if cluster:
            # Not everything on disk is committed in a cluster: start from the checkpointed HW
            # (replication-offset-checkpoint), as Kafka does.
            checkpointed = self.log_manager.checkpointed_high_watermarks.get((name, index), 0)
            partition_log.high_watermark = min(checkpointed, partition_log.log_end_offset)
        partition = Partition(name, index, topic.topic_id, partition_log,
                              local_replica_id=self.node_id)
        if cluster:
            state_change.replica_added(self.node_id, name, index,
                                       self.log_manager.log_dir_of(name, index))
            partition.make_unattached()  # the state in the image decides what it is
            partition.isr_writer = self._isr_writer
        self._partitions[(name, index)] = partition
        if self.log_manager.future_of(name, index) is not None:
            self.log_dir_mover.start(name, index)  # a move the last run did not finish
        return partition

    def _remove_partitions(self, name: str, indexes) -> Iterator[None]:
        for index in indexes:
            self.log_dir_mover.stop(name, index)
            partition = self._partitions.pop((name, index), None)
            if partition is not None:
                if self.cluster:
                    state_change.replica_removed(self.node_id, name, index, _role(partition))
                was_leader = partition.role == LEADER and (
                    self.cluster or self.image is not None and bool(self.image.brokers))
                if self._fetchers is not None:
                    self._fetchers.remove_partition(partition)
                partition.on_removed()
                if was_leader:
                    self._tell_listeners(partition, False)
            if self.log_manager.delete(name, index):
                yield

    def _remove_unopened_dir(self, name: str, index: int) -> None:
        """A partition dir made before opening its log failed is not a log yet: remove it
        here, so nothing of a refused creation stays on disk."""
        for log_dir in self.log_manager.log_dirs:
            path = os.path.join(log_dir, f"{name}-{index}")
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)


def _role(partition: Partition) -> str:
    if partition.role == LEADER:
        return f"leader at epoch {partition.leader_epoch}"
    if partition.role == FOLLOWER:
        return f"follower of {partition.leader_id} at epoch {partition.leader_epoch}"
    return "new"


def _replaced(before: TopicMetadata, after: TopicMetadata) -> bool:
    """A different topic under the same name (deleted and created again)."""
    return before.topic_id is not None and before.topic_id != after.topic_id


def _replaced_log(partition_log, topic: TopicMetadata) -> bool:
    return partition_log.topic_id is not None and partition_log.topic_id != topic.topic_id
