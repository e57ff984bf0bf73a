"""All partitions this broker hosts, and the bridge from metadata images to partition logs.

The controller publishes immutable metadata images; :meth:`ReplicaManager.apply` brings the log
dirs from one image to the next (create or delete partition dirs, new LogConfigs). Start-up runs
the same ``apply`` from the image of what is on disk to the stored image, which repairs a crash
between a persisted change and its application.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import uuid
from typing import Iterator

from kbroker.metadata.image import MetadataImage, TopicMetadata
from kbroker.replica.partition import CONSUMER_REPLICA_ID, Partition, wait_for_news

log = logging.getLogger("kbroker.replicas")


def now_ms() -> int:
    return int(time.time() * 1000)


class ReplicaManager:
    def __init__(self, log_manager, log_config_for, node_id: int = 0):
        """``log_config_for(topic_metadata)`` gives the LogConfig of a topic's partitions."""
        self.log_manager = log_manager
        self.log_config_for = log_config_for
        self.node_id = node_id
        self._partitions: dict[tuple[str, int], Partition] = {}

    @classmethod
    def open(cls, broker_config, image: "MetadataImage", node_id: int) -> "ReplicaManager":
        """Open (and recover) the logs in ``log.dirs`` with each topic's own settings, then bring
        them to ``image`` (see :meth:`start`). The broker's one way to get at its storage."""
        from kbroker.config.log_settings import log_config_factory
        from kbroker.log.log_manager import LogManager

        log_config_for = log_config_factory(broker_config)
        default_config = log_config_for(None)
        topics = image.topics()
        log_manager = LogManager(broker_config.log_dirs, node_id, image.cluster_id,
                                 max_open_files=broker_config.get("log.open.files.max"))
        # Recovery validates and indexes with each topic's own settings.
        log_manager.open(config_for=lambda name: log_config_for(topics[name])
                         if name in topics else default_config)
        replicas = cls(log_manager, log_config_for, node_id)
        # Repairs a crash between a persisted change and its application.
        replicas.start(image)
        return replicas

    def log_cleaner(self, backoff_ms: int):
        """The compaction cleaner over these logs; the broker runs its ``run()`` as a task."""
        from kbroker.log.cleaner import LogCleaner

        return LogCleaner(self.log_manager, backoff_ms=backoff_ms)

    def close(self) -> None:
        """Flush and close every log, writing the checkpoints and the clean-shutdown marker."""
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

    async def wait_for_news(self, partitions, timeout_s: float,
                            replica_id: int = CONSUMER_REPLICA_ID) -> bool:
        """Park a long-poll fetch; see :func:`kbroker.replica.partition.wait_for_news`."""
        return await wait_for_news(partitions, timeout_s, replica_id)

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
        :meth:`apply` every change uses, from the image of what is on disk."""
        on_disk = self.disk_image(image.cluster_id)
        for name, topic in on_disk.topics().items():
            stored = image.topic(name)
            if stored is None or _replaced(topic, stored):
                log.warning("deleting the %d partition dir(s) of topic %s (id %s): the metadata "
                            "does not have it (an interrupted deletion or refused creation)",
                            topic.num_partitions, name, topic.topic_id)
        for _ in self.apply(on_disk, image):
            pass

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

    def apply(self, old: MetadataImage, new: MetadataImage) -> Iterator[None]:
        """Bring this broker's partitions from ``old`` to ``new``: delete the partitions of
        removed topics (or of a topic re-created under a new id), create missing ones, set new
        LogConfigs. Yields after each partition created or deleted, so the caller decides when
        the event loop gets a turn. Topics are compared by identity: an image shares every
        topic a change did not touch."""
        for name in _changed_topics(old, new):
            before, after = old.topic(name), new.topic(name)
            if before is not None and (after is None or _replaced(before, after)):
                yield from self._remove_partitions(name, range(before.num_partitions))
                before = None
            if after is None:
                continue
            config = self.log_config_for(after)
            for index in range(after.num_partitions):
                partition = self._partitions.get((name, index))
                if partition is None:
                    self._add_partition(after, index, config)
                    yield
                else:
                    partition.update_log_config(config)
            if before is not None and before.num_partitions > after.num_partitions:
                yield from self._remove_partitions(
                    name, range(after.num_partitions, before.num_partitions))
        if old.dynamic_broker_configs != new.dynamic_broker_configs:
            # Topic settings default to broker configs: re-derive every topic's.
            for topic in new.topics().values():
                config = self.log_config_for(topic)
                for index in range(topic.num_partitions):
                    partition = self._partitions.get((topic.name, index))
                    if partition is not None:
                        partition.update_log_config(config)

    def _add_partition(self, topic: TopicMetadata, index: int, config) -> None:
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
        self._partitions[(name, index)] = Partition(name, index, topic.topic_id, partition_log,
                                                    local_replica_id=self.node_id)

    def _remove_partitions(self, name: str, indexes) -> Iterator[None]:
        for index in indexes:
            partition = self._partitions.pop((name, index), None)
            if partition is not None:
                partition.on_removed()
            if self.log_manager.delete(name, index):
                yield

    def _remove_unopened_dir(self, name: str, index: int) -> None:
        """A partition dir made before opening its log failed is not a log yet: remove it
        here, so nothing of a refused creation stays on disk."""
        for log_dir in self.log_manager.log_dirs:
            path = os.path.join(log_dir, f"{name}-{index}")
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)


def _changed_topics(old: MetadataImage, new: MetadataImage) -> list[str]:
    old_topics, new_topics = old.topics(), new.topics()
    changed = [name for name, topic in new_topics.items() if old_topics.get(name) is not topic]
    changed += [name for name in old_topics if name not in new_topics]
    return sorted(changed)


def _replaced(before: TopicMetadata, after: TopicMetadata) -> bool:
    """A different topic under the same name (deleted and created again)."""
    return before.topic_id is not None and before.topic_id != after.topic_id


def _replaced_log(partition_log, topic: TopicMetadata) -> bool:
    return partition_log.topic_id is not None and partition_log.topic_id != topic.topic_id
