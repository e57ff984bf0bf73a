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
and are removed at start; ``-stray`` dirs are ignored.

A ``<topic>-<partition>.<id>-future`` dir is a *future log*: the copy of a partition being moved
to this log dir (AlterReplicaLogDirs; the copying is :mod:`kbroker.replica.log_dir_mover`). It
sits beside the partition's current log in another dir until it has caught up, then
:meth:`LogManager.replace_current_with_future` swaps it in, crash-safely:

1. the future log is closed, with the current log's producer state written beside it;
2. the current log's dir is renamed to ``-delete`` (and removed);
3. the future dir is renamed to ``<topic>-<partition>``.

Kafka renames the future first, and a crash between its two renames leaves two copies of the
partition that it refuses to start with. Here a crash after step 2 leaves a future log and no
current one, and only a completed copy can be in that state (a deletion removes the future
before the current log), so :meth:`open` promotes it. As in Kafka nothing is fsynced for the
swap: the copy keeps the recovery point it was last synced at, so a restart after a crash
validates it from there. A future log beside its current log
is loaded and the copy resumes where it stopped.

Creating a partition costs no fsync (100,000 partitions must be cheap to create): the partition
dir and its ``partition.metadata`` go to the page cache, which survives a kill -9, and
:meth:`LogManager.sync_created` makes every partition created since the last call durable in one
``syncfs`` per log dir (at each checkpoint and at close). A power loss before that loses at most
those dirs, which start-up repair re-creates from the persisted metadata image.

Concurrency rule: owned by the event loop, synchronous, no locks (fsync costs are accepted).
"""

from __future__ import annotations

import fcntl
import functools
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
                                    fsync_dir, read_offset_checkpoint, read_properties,
                                    uuid_from_base64,
                                    uuid_to_base64,
                                    write_atomic, write_offset_checkpoint, write_properties)
from kbroker.log.offline import OfflineLog
from kbroker.log.partition_log import (DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, LogConfig,
                                       PartitionLog, write_topic_id)
from kbroker.startup import EXIT_LOG_DIR, StartupError

log = logging.getLogger("kbroker.log")

LOCK_FILE = ".lock"


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """``<topic>-<partition>`` -> (topic, partition); None for anything else."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


def parse_future_dir(name: str) -> tuple[str, int] | None:
    """``<topic>-<partition>.<32 hex>-future`` -> (topic, partition); None for anything else."""
    if not name.endswith(FUTURE_DIR_SUFFIX):
        return None
    base, dot, unique = name[:-len(FUTURE_DIR_SUFFIX)].rpartition(".")
    if not dot or len(unique) != 32:
        return None
    return parse_partition_dir(base)


def future_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"


@functools.cache
def _libc():
    """libc, loaded on the first sync rather than at import (most starts have nothing to sync).
    The process's own symbols include libc's; ``ctypes.util.find_library`` would run ldconfig."""
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _syncfs(path: str) -> bool:
    """``syncfs(2)`` on the file system holding ``path``: one call makes every file and dir
    written there durable. False where libc has no syncfs (then the caller fsyncs each)."""
    syncfs = getattr(_libc(), "syncfs", None)
    if syncfs is None:
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        if syncfs(fd) != 0:
            import ctypes

            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), path)
    finally:
        os.close(fd)
    return True


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
        self._count_of: dict[str, int] = {d: 0 for d in self.log_dirs}  # partitions per dir
        self._unsynced: dict[str, list[str]] = {}  # log dir -> partition dirs created since sync
        self._lock_fds: dict[str, int] = {}
        self.offline: dict[tuple[str, int], str] = {}  # partitions that could not be opened
        # Future logs (a move to another log dir in progress) and the dir each is in.
        self._futures: dict[tuple[str, int], PartitionLog] = {}
        self._future_dir_of: dict[tuple[str, int], str] = {}
        # AlterReplicaLogDirs for a partition not hosted yet: where to create it (in memory, as
        # Kafka's preferred log dirs).
        self.preferred_dirs: dict[tuple[str, int], str] = {}
        self._dir_checkpoints: dict[str, tuple[dict, dict]] = {}  # at open: recovery, log start

    # --- start-up ----------------------------------------------------------------------------

    def open(self, config_for: Callable[[str], LogConfig] | None = None,
             now_ms: int | None = None) -> None:
        """Validate each log dir's meta.properties and load every partition dir in it."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        started = time.monotonic()
        futures: dict[tuple[str, int], list[str]] = {}
        try:
            for log_dir in self.log_dirs:
                try:
                    os.makedirs(log_dir, exist_ok=True)
                    self._lock(log_dir)
                    self._check_meta_properties(log_dir)
                    self._load_dir(log_dir, config_for, now_ms, futures)
                except PermissionError as exc:
                    raise StartupError(
                        f"log dir {log_dir} is not accessible: {exc.strerror} "
                        f"({exc.filename or log_dir})",
                        "give the broker's user read and write access to it, or change log.dirs",
                        EXIT_LOG_DIR) from None
                except OSError as exc:
                    raise StartupError(
                        f"log dir {log_dir} cannot be used: {exc.strerror} "
                        f"({exc.filename or log_dir})",
                        "check the disk and the path, or change log.dirs", EXIT_LOG_DIR) from None
            self._load_futures(futures, config_for, now_ms)
        except BaseException:
            self._unlock()
            raise
        scanned = sum(l.recovery_stats[0] for l in self._logs.values())
        truncated = sum(l.recovery_stats[1] for l in self._logs.values())
        log.info("loaded %d partition(s) from %d log dir(s) in %.2f s: %d segment(s) recovered, "
                 "%d bytes truncated, %d partition(s) offline%s", len(self._logs),
                 len(self.log_dirs), time.monotonic() - started, scanned, truncated,
                 len(self.offline), "" if not self.offline else
                 " (" + ", ".join(f"{t}-{p}" for t, p in sorted(self.offline)) + ")")

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
            raise StartupError(f"log dir {log_dir} is in use by another process "
                               f"({LOCK_FILE} is locked)",
                               "stop the other broker or give this one its own log.dirs",
                               EXIT_LOG_DIR) from None
        self._lock_fds[log_dir] = fd

    def _check_meta_properties(self, log_dir: str) -> None:
        path = os.path.join(log_dir, META_PROPERTIES)
        fix = (f"restore {META_PROPERTIES} from a backup, or point log.dirs elsewhere "
               f"(delete it only if the dir holds no data this broker needs)")
        try:
            props = read_properties(path)
        except CheckpointError as exc:
            raise StartupError(f"{path} is unreadable: {exc}", fix, EXIT_LOG_DIR) from None
        if props is None:
            directory_id = uuid.uuid4()
            write_properties(path, {"version": "1", "node.id": str(self.node_id),
                                    "cluster.id": self.cluster_id,
                                    "directory.id": uuid_to_base64(directory_id)})
            self.directory_ids[log_dir] = directory_id
            return
        if props.get("version") != "1":
            raise StartupError(f"{path}: unsupported meta.properties version "
                               f"{props.get('version')!r} (kbroker writes version=1)", fix,
                               EXIT_LOG_DIR)
        if props.get("cluster.id") != self.cluster_id:
            raise StartupError(f"{path}: cluster.id {props.get('cluster.id')!r} does not match "
                               f"this broker's {self.cluster_id!r}",
                               "this dir belongs to another cluster: point log.dirs elsewhere",
                               EXIT_LOG_DIR)
        if props.get("node.id") != str(self.node_id):
            raise StartupError(f"{path}: node.id {props.get('node.id')!r} does not match "
                               f"this broker's {self.node_id}",
                               "set node.id to the dir's, or point log.dirs elsewhere",
                               EXIT_LOG_DIR)
        try:
            self.directory_ids[log_dir] = uuid_from_base64(props.get("directory.id", ""))
        except CheckpointError:
            self.directory_ids[log_dir] = uuid.uuid4()

    def _read_checkpoint(self, log_dir: str, name: str, consequence: str
                         ) -> dict[tuple[str, int], int]:
        try:
            return read_offset_checkpoint(os.path.join(log_dir, name))
        except CheckpointError as e:
            # Kafka's LogManager does the same: warn and fall back to what the segments say.
            log.warning("ignoring unreadable checkpoint %s; %s", e, consequence)
            return {}

    def _load_dir(self, log_dir: str, config_for, now_ms: int,
                  futures: dict[tuple[str, int], list[str]]) -> None:
        marker = os.path.join(log_dir, CLEAN_SHUTDOWN_FILE)
        clean = os.path.exists(marker)
        self.had_clean_shutdown[log_dir] = clean
        recovery_points = self._read_checkpoint(
            log_dir, RECOVERY_POINT_CHECKPOINT,
            "every partition of the dir is recovered from its first segment")
        log_starts = self._read_checkpoint(
            log_dir, LOG_START_OFFSET_CHECKPOINT,
            "each log starts at its first segment's base offset")
        self._dir_checkpoints[log_dir] = (recovery_points, log_starts)  # for future logs
        self.checkpointed_high_watermarks.update(self._read_checkpoint(
            log_dir, REPLICATION_OFFSET_CHECKPOINT, "high watermarks restart at the log ends"))
        for name in sorted(os.listdir(log_dir)):
            path = os.path.join(log_dir, name)
            if not os.path.isdir(path):
                continue
            if name.endswith(DELETE_DIR_SUFFIX):
                shutil.rmtree(path, ignore_errors=True)
                continue
            if name.endswith(FUTURE_DIR_SUFFIX):
                future = parse_future_dir(name)
                if future is not None:
                    futures.setdefault(future, []).append(path)
                continue
            if name.endswith("-stray"):
                continue
            key = parse_partition_dir(name)
            if key is None:
                continue
            if key in self._logs:
                raise StartupError(f"partition {name} exists in two log dirs: "
                                   f"{self._dir_of[key]} and {log_dir}",
                                   "keep the copy you trust and move the other out of log.dirs",
                                   EXIT_LOG_DIR)
            config = config_for(key[0]) if config_for else self.default_config
            try:
                partition_log = PartitionLog.open(path, key[0], key[1], config,
                                                  recovery_point=recovery_points.get(key, 0),
                                                  log_start_offset=log_starts.get(key, 0),
                                                  now_ms=now_ms, clean_shutdown=clean)
            except Exception as exc:  # one damaged partition must not keep the broker down
                reason = f"{type(exc).__name__}: {exc}"
                log.error("partition %s is offline: cannot open %s (%s); its files are left as "
                          "they are; repair or remove the dir and restart to bring it back",
                          name, path, reason)
                log.debug("opening %s failed", path, exc_info=True)
                self.offline[key] = reason
                partition_log = OfflineLog(
                    path, key[0], key[1], config, reason,
                    log_start_offset=log_starts.get(key, 0),
                    recovery_point=recovery_points.get(key, 0),
                    high_watermark=self.checkpointed_high_watermarks.get(key, 0))
            self._logs[key] = partition_log
            self._dir_of[key] = log_dir
            self._count_of[log_dir] += 1
        if clean:
            # A crash from here on must be detected at the next start.
            os.unlink(marker)

    def _load_futures(self, futures: dict[tuple[str, int], list[str]], config_for,
                      now_ms: int) -> None:
        """Future logs found at start: beside their current log, loaded for the copy to resume;
        without one, a swap was interrupted after the current log went, and the future (complete
        and flushed before that) becomes the partition's log."""
        for key, paths in sorted(futures.items()):
            name = f"{key[0]}-{key[1]}"
            if len(paths) > 1:
                raise StartupError(f"partition {name} has {len(paths)} future logs: "
                                   f"{', '.join(sorted(paths))}",
                                   "remove all but one (or all: the current log is kept)",
                                   EXIT_LOG_DIR)
            path = paths[0]
            log_dir = os.path.dirname(path)
            if self._dir_of.get(key) == log_dir:  # cannot be: a move is always to another dir
                log.warning("removing %s: a future log in the current log's own dir", path)
                shutil.rmtree(path, ignore_errors=True)
                continue
            config = config_for(key[0]) if config_for else self.default_config
            checkpointed = self._dir_checkpoints.get(log_dir, ({}, {}))
            promote = key not in self._logs
            if promote:
                target = os.path.join(log_dir, name)
                log.info("%s: the move to %s was interrupted after the old copy was removed; "
                         "its completed copy becomes the partition's log", name, log_dir)
                os.replace(path, target)
                fsync_dir(log_dir)
                path = target
            partition_log = PartitionLog.open(
                path, key[0], key[1], config,
                recovery_point=checkpointed[0].get(key, 0),
                log_start_offset=checkpointed[1].get(key, 0), now_ms=now_ms,
                clean_shutdown=self.had_clean_shutdown.get(log_dir, False))
            if promote:
                self._logs[key] = partition_log
                self._dir_of[key] = log_dir
                self._count_of[log_dir] += 1
            else:
                log.info("%s: resuming its move from %s to %s at offset %d of %d", name,
                         self._dir_of[key], log_dir, partition_log.log_end_offset,
                         self._logs[key].log_end_offset)
                self._futures[key] = partition_log
                self._future_dir_of[key] = log_dir

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
        log_dir = self.preferred_dirs.pop(key, None)
        if log_dir not in self._count_of:
            log_dir = min(self.log_dirs, key=self._count_of.__getitem__)
        path = os.path.join(log_dir, f"{topic}-{partition}")
        os.makedirs(path, exist_ok=True)
        self._unsynced.setdefault(log_dir, []).append(path)
        if topic_id is not None:
            write_topic_id(path, topic_id)
        partition_log = PartitionLog.open(path, topic, partition, config or self.default_config,
                                          now_ms=now_ms, clean_shutdown=True)
        self._logs[key] = partition_log
        self._dir_of[key] = log_dir
        self._count_of[log_dir] += 1
        return partition_log

    def sync_created(self) -> None:
        """Make the partitions created since the last call durable: one ``syncfs`` per log dir
        where the platform has it, else an fsync of each new partition dir and its log dir."""
        pending, self._unsynced = self._unsynced, {}
        for log_dir, paths in pending.items():
            if _syncfs(log_dir):
                continue
            for path in paths:
                if os.path.isdir(path):
                    fsync_dir(path)
            fsync_dir(log_dir)

    def delete(self, topic: str, partition: int) -> bool:
        key = (topic, partition)
        self.preferred_dirs.pop(key, None)
        # The future first: a future log without a current one is taken for a finished move.
        self.abort_future(topic, partition)
        partition_log = self._logs.pop(key, None)
        log_dir = self._dir_of.pop(key, None)
        if partition_log is None:
            return False
        self._count_of[log_dir] -= 1
        partition_log.delete()
        return True

    # --- moves between log dirs (future logs) ------------------------------------------------

    def future_of(self, topic: str, partition: int) -> PartitionLog | None:
        return self._futures.get((topic, partition))

    def future_dir_of(self, topic: str, partition: int) -> str | None:
        return self._future_dir_of.get((topic, partition))

    def futures(self) -> dict[tuple[str, int], PartitionLog]:
        return dict(self._futures)

    def create_future(self, topic: str, partition: int, log_dir: str) -> PartitionLog:
        """An empty future log of the partition in ``log_dir`` (another dir than its current
        log's), starting at the current log's start offset. A future log in another dir is
        removed first (the move changed its destination)."""
        key = (topic, partition)
        current = self._logs[key]
        existing = self._futures.get(key)
        if existing is not None:
            if self._future_dir_of[key] == log_dir:
                return existing
            self.abort_future(topic, partition)
        path = os.path.join(log_dir, future_dir_name(topic, partition))
        os.makedirs(path)
        if current.topic_id is not None:
            write_topic_id(path, current.topic_id)
        future = PartitionLog.open(path, topic, partition, current.config, clean_shutdown=True)
        if current.log_start_offset:
            future.truncate_fully_and_start_at(current.log_start_offset)
        fsync_dir(log_dir)
        self._futures[key] = future
        self._future_dir_of[key] = log_dir
        return future

    def abort_future(self, topic: str, partition: int) -> bool:
        """Drop the partition's future log, if any (a cancelled move, or a deletion)."""
        key = (topic, partition)
        future = self._futures.pop(key, None)
        self._future_dir_of.pop(key, None)
        if future is None:
            return False
        future.delete()
        return True

    def replace_current_with_future(self, topic: str, partition: int) -> PartitionLog:
        """Swap the caught-up future log in as the partition's log (the module docstring gives
        the order and why it is crash-safe); returns the log now at the partition's usual dir
        name. The caller checked that both logs end at the same offset, synchronously with this
        call. The old log's segment files stay readable for reads in flight."""
        key = (topic, partition)
        future = self._futures.pop(key)
        log_dir = self._future_dir_of.pop(key)
        current = self._logs[key]
        future.high_watermark = min(current.high_watermark, future.log_end_offset)
        # No fsync, as in Kafka: the moved log keeps the recovery point its data was last
        # synced at, so a crash before the next flush validates it from there (kill -9 loses
        # nothing: the page cache holds it); a power loss can take the unsynced tail, as it can
        # of any append under the default flush policy.
        future.close(flush=False)
        # What the batches alone cannot rebuild comes from the current log, exact at the same
        # end offset: producers whose batches retention removed (kept until they expire, as on
        # the current log), and below, an epoch begun at the log end (a leader with no append).
        current.producer_state.take_snapshot(future.log_end_offset, into_dir=future.dir_path)
        current.delete()
        self._count_of[self._dir_of[key]] -= 1
        target = os.path.join(log_dir, f"{topic}-{partition}")
        os.replace(future.dir_path, target)
        fsync_dir(log_dir)
        moved = PartitionLog.open(target, topic, partition, current.config,
                                  recovery_point=future.recovery_point,
                                  log_start_offset=future.log_start_offset, clean_shutdown=True)
        moved.high_watermark = min(current.high_watermark, moved.log_end_offset)
        latest = moved.leader_epoch_cache.latest_epoch  # (opening drops one at the log end)
        for epoch, start in current.leader_epoch_cache.entries():
            if latest is None or epoch > latest:
                moved.leader_epoch_cache.assign(epoch, start)
        self._logs[key] = moved
        self._dir_of[key] = log_dir
        self._count_of[log_dir] += 1
        return moved

    # --- periodic work -----------------------------------------------------------------------

    def cleanup(self, now_ms: int | None = None) -> int:
        """Retention over every log; returns the number of segments deleted."""
        return sum(partition_log.delete_old_segments(now_ms) for partition_log in self.all_logs())

    def flush_if_needed(self, now_ms: int | None = None) -> None:
        for partition_log in self.all_logs():
            partition_log.flush_if_needed(now_ms)

    def checkpoint(self) -> None:
        """Write the three offset checkpoint files of every log dir. A dir that cannot be
        written (disk full) keeps its previous checkpoints: they only make recovery longer."""
        try:
            self.sync_created()
        except OSError as exc:
            log.warning("cannot sync newly created partition dirs: %s; start-up repair "
                        "re-creates any a power loss takes", exc.strerror)
        for log_dir in self.log_dirs:
            try:
                self._checkpoint_dir(log_dir)
            except OSError as exc:
                log.warning("cannot write the checkpoints of %s: %s; the previous ones stay",
                            log_dir, exc.strerror)

    def _checkpoint_dir(self, log_dir: str) -> None:
        logs = {key: self._logs[key] for key, d in self._dir_of.items() if d == log_dir}
        # A future log is checkpointed in its own dir under the partition's name, as Kafka's;
        # high watermarks are the current log's alone.
        copies = {key: self._futures[key] for key, d in self._future_dir_of.items()
                  if d == log_dir}
        write_offset_checkpoint(os.path.join(log_dir, RECOVERY_POINT_CHECKPOINT),
                                {key: l.recovery_point
                                 for key, l in (logs | copies).items()})
        write_offset_checkpoint(os.path.join(log_dir, LOG_START_OFFSET_CHECKPOINT),
                                {key: l.log_start_offset
                                 for key, l in (logs | copies).items()})
        write_offset_checkpoint(os.path.join(log_dir, REPLICATION_OFFSET_CHECKPOINT),
                                {key: l.high_watermark for key, l in logs.items()})

    def close(self) -> None:
        """Clean shutdown: close (flush + snapshot) every log, checkpoint, then mark each dir
        cleanly shut down and release its lock."""
        for partition_log in self.all_logs() + list(self._futures.values()):
            partition_log.close()
        self.checkpoint()  # also syncs the partitions created since the last one
        for log_dir in self.log_dirs:
            write_atomic(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE),
                         b'{"version":"0","broker_epoch":"-1"}')
        self._unlock()
