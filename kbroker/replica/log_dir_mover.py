"""Moving a replica between this broker's log dirs (AlterReplicaLogDirs; Kafka's
``ReplicaAlterLogDirsManager`` and its threads).

A move creates a *future log* of the partition in the destination dir
(:meth:`LogManager.create_future`) and copies the current log's batches into it, as a follower
copies its leader's: same offsets, same leader epochs, producer state and transaction indexes
rebuilt by the append. The partition keeps serving reads and writes from its current log the
whole time. Each round first reconciles the copy with what the current log became meanwhile:

* the current log was truncated (a follower diverging from a new leader): the future is cut at
  the end offset of its own latest epoch in the current log, as a follower truncates by
  OffsetForLeaderEpoch;
* the current log's start moved (retention, DeleteRecords): the future's start follows, or the
  future starts again there when it had not reached it.

Then it copies up to ``replica.fetch.max.bytes`` from the future's log end offset, paced by
``replica.alter.log.dirs.io.max.bytes.per.second`` (shared by every move of the broker, read at
each round so a dynamic change applies at once). When both logs end at the same offset the copy
is complete: the swap (:meth:`LogManager.replace_current_with_future`, then
:meth:`Partition.replace_log`) happens in the same synchronous step as that check, so no append
can slip in between (Kafka takes the partition's write lock for the same reason).

A failed copy (the destination dir is full or unwritable, the current log offline) removes the
future log and leaves the replica where it was, with one error line.

Concurrency rule: one asyncio task per moving partition, on the event loop like every log
operation; no locks.
"""

from __future__ import annotations

import asyncio
import logging
import time

from kbroker.metadata import state_change
from kbroker.protocol.errors import Errors, KafkaError

log = logging.getLogger("kbroker.replicas")

UNLIMITED = 2 ** 63 - 1
DEFAULT_CHUNK_BYTES = 1024 * 1024


class LogDirMover:
    def __init__(self, replicas):
        self._replicas = replicas
        self._tasks: dict[tuple[str, int], asyncio.Task] = {}
        self._waiting: set[tuple[str, int]] = set()  # moves known before the event loop ran
        self._next_free = 0.0  # monotonic time the shared byte rate allows the next copy at
        self.completed = 0  # moves finished since start (for tests and the console)

    # --- control -------------------------------------------------------------------------------

    def start(self, topic: str, index: int) -> None:
        """Copy the partition's future log until it can replace the current one (idempotent)."""
        key = (topic, index)
        task = self._tasks.get(key)
        if task is not None and not task.done():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # at start-up: resumed by :meth:`resume`
            self._waiting.add(key)
            return
        self._tasks[key] = loop.create_task(self._copy(key), name=f"move-{topic}-{index}")

    def resume(self) -> None:
        """Start the moves found at start-up (future logs left by the last run)."""
        waiting, self._waiting = self._waiting, set()
        for topic, index in sorted(waiting):
            self.start(topic, index)

    def stop(self, topic: str, index: int) -> None:
        """Stop copying (the move was cancelled or the partition is going away)."""
        key = (topic, index)
        self._waiting.discard(key)
        task = self._tasks.pop(key, None)
        if task is not None:
            task.cancel()

    def stop_all(self) -> None:
        for topic, index in list(self._tasks) + list(self._waiting):
            self.stop(topic, index)

    def moving(self) -> list[tuple[str, int]]:
        return sorted(set(self._tasks) | self._waiting)

    # --- the copy ------------------------------------------------------------------------------

    def _settings(self) -> tuple[int, int]:
        config = self._replicas.broker_config
        if config is None:
            return UNLIMITED, DEFAULT_CHUNK_BYTES
        return (config.get("replica.alter.log.dirs.io.max.bytes.per.second"),
                config.get("replica.fetch.max.bytes"))

    async def _copy(self, key: tuple[str, int]) -> None:
        topic, index = key
        log_manager = self._replicas.log_manager
        started = time.monotonic()
        try:
            while True:
                partition = self._replicas.get(topic, index)
                future = log_manager.future_of(topic, index)
                if partition is None or future is None:
                    return  # removed or cancelled meanwhile
                current = partition.log
                if getattr(current, "offline", False):  # could not be opened at start
                    raise KafkaError(Errors.KAFKA_STORAGE_ERROR,
                                     f"the current log is offline: {current.reason}")
                reconcile(current, future)
                if future.log_end_offset == current.log_end_offset:
                    self._swap(partition, started)
                    return
                rate, chunk = self._settings()
                if rate == 0:  # paused by the operator
                    await asyncio.sleep(1.0)
                    continue
                read = current.read(future.log_end_offset, chunk)
                data = b"".join(region.read() for region in read.regions)
                if not data:  # nothing readable yet (cannot last: the next round reconciles)
                    await asyncio.sleep(0.05)
                    continue
                future.append_as_follower(data)
                future.high_watermark = min(current.high_watermark, future.log_end_offset)
                delay = self._charge(len(data), rate)
                # Caught up: swap at once; the bytes still count against the next copy.
                await asyncio.sleep(delay if future.log_end_offset < current.log_end_offset
                                    else 0)
        except asyncio.CancelledError:
            raise
        except (KafkaError, OSError) as exc:
            destination = log_manager.future_dir_of(topic, index)
            log.error("moving %s-%d to %s failed: %s; the replica stays in %s", topic, index,
                      destination, exc, log_manager.log_dir_of(topic, index))
            log_manager.abort_future(topic, index)
        finally:
            if self._tasks.get(key) is asyncio.current_task():
                del self._tasks[key]

    def _charge(self, copied: int, rate: int) -> float:
        """Seconds to wait before copying more: the byte rate is shared by every move."""
        if rate >= UNLIMITED:
            return 0.0
        now = time.monotonic()
        self._next_free = max(self._next_free, now) + copied / rate
        return max(0.0, self._next_free - now)

    def _swap(self, partition, started: float) -> None:
        topic, index = partition.topic, partition.index
        log_manager = self._replicas.log_manager
        source = log_manager.log_dir_of(topic, index)
        moved = log_manager.replace_current_with_future(topic, index)
        partition.replace_log(moved)
        self.completed += 1
        destination = log_manager.log_dir_of(topic, index)
        log.info("moved %s-%d from %s to %s: %d bytes up to offset %d in %.2f s", topic, index,
                 source, destination, moved.size_in_bytes, moved.log_end_offset,
                 time.monotonic() - started)
        state_change.replica_moved(self._replicas.node_id, topic, index, source, destination)


def reconcile(current, future) -> None:
    """Bring ``future`` back in line with what ``current`` became since the last round (see the
    module docstring): cut what the current log no longer holds, follow its log start."""
    epoch = future.leader_epoch_cache.latest_epoch
    if epoch is not None and future.log_end_offset > future.log_start_offset:
        found, end = current.leader_epoch_cache.end_offset_for(epoch, current.log_end_offset)
        if found < 0:  # the current log knows no such epoch: it was replaced wholesale
            future.truncate_fully_and_start_at(current.log_start_offset)
        elif end < future.log_end_offset:
            future.truncate_to(max(end, future.log_start_offset))
    if future.log_end_offset > current.log_end_offset:
        future.truncate_to(current.log_end_offset)
    if current.log_start_offset > future.log_end_offset or (
            future.log_end_offset == future.log_start_offset
            and future.log_start_offset != current.log_start_offset):
        future.truncate_fully_and_start_at(current.log_start_offset)
    future.high_watermark = min(current.high_watermark, future.log_end_offset)
    if future.log_start_offset < current.log_start_offset <= future.high_watermark:
        future.delete_records_before(current.log_start_offset)
