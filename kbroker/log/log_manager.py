"""All partition logs of this broker across its log dirs (Kafka's LogManager).

Each log dir holds, next to the ``<topic>-<partition>/`` partition dirs (files in
:mod:`kbroker.log.checkpoint`):

* ``meta.properties`` - written on first start, checked on every start (node id and cluster id
  must match; a mismatch refuses to start rather than mix two clusters' data);
* ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
  ``replication-offset-checkpoint`` - written by :meth:`checkpoint` (periodically) and at close;
* ``.kafka_cleanshutdown`` - written last by :meth:`close` and deleted at start: without it the
  logs are recovered from their checkpointed recovery points;
* ``.lock`` - an exclusive ``flock`` while the broker runs, so two brokers cannot share a dir.

Dirs named ``<topic>-<partition>.<id>-delete`` are leftovers of an interrupted topic deletion
and are removed at start; ``-future`` and ``-stray`` dirs are ignored.

Concurrency rule: owned by the event loop, synchronous, no locks (fsync costs are accepted).
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import time
import uuid
from typing import Callable

from kbroker.log import file_cache
from kbroker.log.checkpoint import (CLEAN_SHUTDOWN_FILE, LOG_START_OFFSET_CHECKPOINT,
                                    META_PROPERTIES, RECOVERY_POINT_CHECKPOINT,
                                    REPLICATION_OFFSET_CHECKPOINT, CheckpointError,
                                    read_offset_checkpoint, read_properties, uuid_from_base64,
                                    uuid_to_base64,
                                    write_atomic, write_offset_checkpoint,
                                    write_partition_metadata, write_properties)
from kbroker.log.partition_log import DELETE_DIR_SUFFIX, LogConfig, PartitionLog

log = logging.getLogger("kbroker.log")

LOCK_FILE = ".lock"


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """``<topic>-<partition>`` -> (topic, partition); None for anything else."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


class LogManager:
    def __init__(self, log_dirs: list[str], node_id: int, cluster_id: str,
                 default_config: LogConfig | None = None, max_open_files: int | None = None):
        if not log_dirs:
            raise ValueError("at least one log dir is needed")
        if max_open_files is not None:  # log.open.files.max (kbroker.log.file_cache)
            file_cache.configure(max_open_files)
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.default_config = default_config or LogConfig()
        self.directory_ids: dict[str, uuid.UUID] = {}
        self.had_clean_shutdown: dict[str, bool] = {}
        # High watermarks from replication-offset-checkpoint, for the replica layer.
        self.checkpointed_high_watermarks: dict[tuple[str, int], int] = {}
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._dir_of: dict[tuple[str, int], str] = {}
        self._lock_fds: dict[str, int] = {}

    # --- start-up ----------------------------------------------------------------------------

    def open(self, config_for: Callable[[str], LogConfig] | None = None,
             now_ms: int | None = None) -> None:
        """Validate each log dir's meta.properties and load every partition dir in it."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        try:
            for log_dir in self.log_dirs:
                os.makedirs(log_dir, exist_ok=True)
                self._lock(log_dir)
                self._check_meta_properties(log_dir)
                self._load_dir(log_dir, config_for, now_ms)
        except BaseException:
            self._unlock()
            raise

    def _unlock(self) -> None:
        for fd in self._lock_fds.values():
            os.close(fd)
        self._lock_fds.clear()

    def _lock(self, log_dir: str) -> None:
        fd = os.open(os.path.join(log_dir, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise RuntimeError(f"log dir {log_dir} is in use by another process") from None
        self._lock_fds[log_dir] = fd

    def _check_meta_properties(self, log_dir: str) -> None:
        path = os.path.join(log_dir, META_PROPERTIES)
        props = read_properties(path)
        if props is None:
            directory_id = uuid.uuid4()
            write_properties(path, {"version": "1", "node.id": str(self.node_id),
                                    "cluster.id": self.cluster_id,
                                    "directory.id": uuid_to_base64(directory_id)})
            self.directory_ids[log_dir] = directory_id
            return
        if props.get("version") != "1":
            raise RuntimeError(f"{path}: unsupported meta.properties version "
                               f"{props.get('version')!r}")
        if props.get("cluster.id") != self.cluster_id:
            raise RuntimeError(f"{path}: cluster.id {props.get('cluster.id')!r} does not match "
                               f"this broker's {self.cluster_id!r}")
        if props.get("node.id") != str(self.node_id):
            raise RuntimeError(f"{path}: node.id {props.get('node.id')!r} does not match "
                               f"this broker's {self.node_id}")
        try:
            self.directory_ids[log_dir] = uuid_from_base64(props.get("directory.id", ""))
        except CheckpointError:
            self.directory_ids[log_dir] = uuid.uuid4()

    def _read_checkpoint(self, log_dir: str, name: str) -> dict[tuple[str, int], int]:
        try:
            return read_offset_checkpoint(os.path.join(log_dir, name))
        except CheckpointError as e:
            log.warning("ignoring unreadable checkpoint: %s", e)
            return {}

    def _load_dir(self, log_dir: str, config_for, now_ms: int) -> None:
        marker = os.path.join(log_dir, CLEAN_SHUTDOWN_FILE)
        clean = os.path.exists(marker)
        self.had_clean_shutdown[log_dir] = clean
        recovery_points = self._read_checkpoint(log_dir, RECOVERY_POINT_CHECKPOINT)
        log_starts = self._read_checkpoint(log_dir, LOG_START_OFFSET_CHECKPOINT)
        self.checkpointed_high_watermarks.update(
            self._read_checkpoint(log_dir, REPLICATION_OFFSET_CHECKPOINT))
        for name in sorted(os.listdir(log_dir)):
            path = os.path.join(log_dir, name)
            if not os.path.isdir(path):
                continue
            if name.endswith(DELETE_DIR_SUFFIX):
                shutil.rmtree(path, ignore_errors=True)
                continue
            if name.endswith(("-future", "-stray")):
                continue
            key = parse_partition_dir(name)
            if key is None:
                continue
            if key in self._logs:
                raise RuntimeError(f"partition {name} exists in two log dirs: "
                                   f"{self._dir_of[key]} and {log_dir}")
            config = config_for(key[0]) if config_for else self.default_config
            partition_log = PartitionLog.open(path, key[0], key[1], config,
                                              recovery_point=recovery_points.get(key, 0),
                                              log_start_offset=log_starts.get(key, 0),
                                              now_ms=now_ms, clean_shutdown=clean)
            self._logs[key] = partition_log
            self._dir_of[key] = log_dir
        if clean:
            # A crash from here on must be detected at the next start.
            os.unlink(marker)

    # --- partitions --------------------------------------------------------------------------

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> list[PartitionLog]:
        return list(self._logs.values())

    def log_dir_of(self, topic: str, partition: int) -> str | None:
        return self._dir_of.get((topic, partition))

    def create(self, topic: str, partition: int, config: LogConfig | None = None,
               topic_id: uuid.UUID | None = None, now_ms: int | None = None) -> PartitionLog:
        """Create the partition's log in the log dir holding the fewest partitions (or return
        the existing one)."""
        key = (topic, partition)
        existing = self._logs.get(key)
        if existing is not None:
            return existing
        counts = {d: 0 for d in self.log_dirs}
        for d in self._dir_of.values():
            counts[d] += 1
        log_dir = min(self.log_dirs, key=lambda d: counts[d])
        path = os.path.join(log_dir, f"{topic}-{partition}")
        os.makedirs(path, exist_ok=True)
        if topic_id is not None:
            write_partition_metadata(path, topic_id)
        partition_log = PartitionLog.open(path, topic, partition, config or self.default_config,
                                          now_ms=now_ms, clean_shutdown=True)
        self._logs[key] = partition_log
        self._dir_of[key] = log_dir
        return partition_log

    def delete(self, topic: str, partition: int) -> bool:
        key = (topic, partition)
        partition_log = self._logs.pop(key, None)
        self._dir_of.pop(key, None)
        if partition_log is None:
            return False
        partition_log.delete()
        return True

    # --- periodic work -----------------------------------------------------------------------

    def cleanup(self, now_ms: int | None = None) -> int:
        """Retention over every log; returns the number of segments deleted."""
        return sum(partition_log.delete_old_segments(now_ms) for partition_log in self.all_logs())

    def flush_if_needed(self, now_ms: int | None = None) -> None:
        for partition_log in self.all_logs():
            partition_log.flush_if_needed(now_ms)

    def checkpoint(self) -> None:
        """Write the three offset checkpoint files of every log dir."""
        for log_dir in self.log_dirs:
            logs = {key: self._logs[key] for key, d in self._dir_of.items() if d == log_dir}
            write_offset_checkpoint(os.path.join(log_dir, RECOVERY_POINT_CHECKPOINT),
                                    {key: l.recovery_point for key, l in logs.items()})
            write_offset_checkpoint(os.path.join(log_dir, LOG_START_OFFSET_CHECKPOINT),
                                    {key: l.log_start_offset for key, l in logs.items()})
            write_offset_checkpoint(os.path.join(log_dir, REPLICATION_OFFSET_CHECKPOINT),
                                    {key: l.high_watermark for key, l in logs.items()})

    def close(self) -> None:
        """Clean shutdown: close (flush + snapshot) every log, checkpoint, then mark each dir
        cleanly shut down and release its lock."""
        for partition_log in self.all_logs():
            partition_log.close()
        self.checkpoint()
        for log_dir in self.log_dirs:
            write_atomic(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE),
                         b'{"version":"0","broker_epoch":"-1"}')
        self._unlock()
