"""All partitions this broker hosts, and the bridge from topic metadata to partition logs.

Handlers and coordinators reach partitions only through :meth:`ReplicaManager.get` and the
:class:`~kbroker.replica.partition.Partition` it returns; the broker's background jobs
(retention, flush, checkpoints) run through the methods below, so nothing above this layer
touches a log.
"""

from __future__ import annotations

import logging
import time

from kbroker.metadata.image import TopicMetadata
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

    # --- applying metadata ---------------------------------------------------------------------

    def ensure_topic(self, topic: TopicMetadata) -> None:
        """Open or create the log of every partition of ``topic`` (after start-up or a change)."""
        config = self.log_config_for(topic)
        for index in range(topic.num_partitions):
            if (topic.name, index) in self._partitions:
                continue
            partition_log = self.log_manager.get(topic.name, index)
            if partition_log is None:
                partition_log = self.log_manager.create(topic.name, index, config, topic.topic_id)
            else:
                partition_log.config = config
            self._partitions[(topic.name, index)] = Partition(
                topic.name, index, topic.topic_id, partition_log, local_replica_id=self.node_id)

    def on_topic_change(self, name: str, topic: TopicMetadata | None) -> None:
        """Apply a change the controller published: a new or changed topic, or a deleted one."""
        if topic is None:
            self.delete_topic(name)
        else:
            self.ensure_topic(topic)
            self.update_config(topic)

    def update_config(self, topic: TopicMetadata) -> None:
        config = self.log_config_for(topic)
        for index in range(topic.num_partitions):
            partition = self._partitions.get((topic.name, index))
            if partition is not None:
                partition.update_log_config(config)

    def delete_topic(self, name: str) -> None:
        for key in [k for k in self._partitions if k[0] == name]:
            partition = self._partitions.pop(key)
            partition.on_removed()
            self.log_manager.delete(name, key[1])

    def remove_stray_logs(self, known_topics) -> None:
        """Delete logs of topics the metadata no longer has (a crash in the middle of a delete)."""
        for partition_log in list(self.log_manager.all_logs()):
            if partition_log.topic not in known_topics:
                log.info("deleting stray log %s-%d", partition_log.topic, partition_log.partition)
                self.log_manager.delete(partition_log.topic, partition_log.partition)

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
