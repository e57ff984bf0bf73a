"""The coordinator runtime: shards over the partitions of an internal topic.

A :class:`Shard` subclass holds the state of one partition of the internal topic and implements
``replay(offset, key, value)`` (``value`` is None for a tombstone) and, optionally, ``on_loaded``
and ``on_unloaded``. Operations run through :meth:`CoordinatorRuntime.write`: the records (pairs of
key and value bytes) are appended as one batch to the shard's partition, then replayed in order.
Nothing of a shard's durable state changes anywhere else, so loading a shard after a restart (or a
``kill -9``) is the same replay, starting at the partition's log start offset.
"""

from __future__ import annotations

import asyncio
import logging
import time

from kbroker.protocol.errors import Errors, KafkaError
from kbroker.protocol.records import RecordBatchBuilder, decode_records, iter_batches

log = logging.getLogger("kbroker.coordinator")

_LOAD_READ_BYTES = 1024 * 1024
_MAX_UNCOMPRESSED = 64 * 1024 * 1024


def now_ms() -> int:
    return int(time.time() * 1000)


class Shard:
    """One partition's state machine; subclasses implement :meth:`replay`."""

    def __init__(self, runtime: "CoordinatorRuntime", partition_index: int):
        self.runtime = runtime
        self.partition_index = partition_index
        self.loading = True
        self._timers: dict = {}

    def replay(self, offset: int, key: bytes, value: bytes | None) -> None:
        raise NotImplementedError

    def on_loaded(self) -> None:
        """Called once the whole partition has been replayed."""

    def on_unloaded(self) -> None:
        self.cancel_all_timers()

    def write(self, records: list) -> None:
        self.runtime.write(self, records)

    # --- timers owned by the shard -------------------------------------------------------------

    def schedule(self, key, delay_ms: int, callback) -> None:
        """(Re)arm the timer ``key``: ``callback()`` runs after ``delay_ms`` unless cancelled."""
        self.cancel(key)
        loop = asyncio.get_running_loop()

        def fire():
            self._timers.pop(key, None)
            try:
                callback()
            except Exception:
                log.exception("coordinator timer %s of shard %d failed", key, self.partition_index)

        self._timers[key] = loop.call_later(max(delay_ms, 0) / 1000, fire)

    def cancel(self, key) -> None:
        handle = self._timers.pop(key, None)
        if handle is not None:
            handle.cancel()

    def cancel_all_timers(self) -> None:
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()


class CoordinatorRuntime:
    """Shards of ``topic`` hosted by this broker (all of them, on a single node)."""

    def __init__(self, controller, partitions, topic: str, num_partitions: int,
                 topic_configs: dict, shard_factory):
        self.controller = controller
        self.partitions = partitions
        self.topic = topic
        self.default_partitions = num_partitions
        self.topic_configs = topic_configs
        self.shard_factory = shard_factory
        self.shards: dict[int, Shard] = {}
        self._load_tasks: set[asyncio.Task] = set()

    @property
    def num_partitions(self) -> int:
        topic = self.controller.image.topic(self.topic)
        return topic.num_partitions if topic is not None else self.default_partitions

    @property
    def exists(self) -> bool:
        return self.controller.image.topic(self.topic) is not None

    # --- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Load the shards of the internal topic if it exists (at broker start-up)."""
        if self.exists:
            self._load_all()

    def ensure_topic(self) -> None:
        """Create the internal topic on first use (Kafka: on the first FindCoordinator)."""
        if not self.exists:
            topic = self.controller.create_topic(self.topic, self.default_partitions,
                                                 dict(self.topic_configs))
            log.info("created internal topic %s with %d partitions", self.topic,
                     topic.num_partitions)
        if len(self.shards) < self.num_partitions:
            self._load_all()

    async def stop(self) -> None:
        for task in list(self._load_tasks):
            task.cancel()
        for task in list(self._load_tasks):
            try:
                await task
            except asyncio.CancelledError:
                pass
        for shard in self.shards.values():
            shard.on_unloaded()
        self.shards.clear()

    def _load_all(self) -> None:
        for index in range(self.num_partitions):
            if index not in self.shards:
                shard = self.shard_factory(self, index)
                self.shards[index] = shard
                partition = self.partitions.get(self.topic, index)
                if partition is None or partition.log_end_offset == partition.log_start_offset:
                    self._finish_load(shard, 0)  # nothing to replay: usable at once
                    continue
                task = asyncio.get_running_loop().create_task(self._load(shard),
                                                              name=f"load {self.topic}-{index}")
                self._load_tasks.add(task)
                task.add_done_callback(self._load_tasks.discard)

    async def _load(self, shard: Shard) -> None:
        started = time.monotonic()
        partition = self.partitions.get(self.topic, shard.partition_index)
        count = 0
        try:
            offset = partition.log_start_offset
            while offset < partition.high_watermark:
                result = partition.read(offset, _LOAD_READ_BYTES)  # below the high watermark
                if not result.regions:
                    break
                for region in result.regions:
                    for header in iter_batches(memoryview(region.read())):
                        offset = header.next_offset
                        if header.is_control:
                            continue
                        for record in decode_records(header, _MAX_UNCOMPRESSED):
                            if record.key is None:
                                continue
                            shard.replay(record.offset(header), record.key, record.value)
                            count += 1
                await asyncio.sleep(0)  # let other work run between chunks
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loading %s-%d failed; the shard stays unavailable", self.topic,
                          shard.partition_index)
            return
        self._finish_load(shard, count, time.monotonic() - started)

    def _finish_load(self, shard: Shard, count: int, elapsed: float = 0.0) -> None:
        shard.loading = False
        shard.on_loaded()
        if count:
            log.info("loaded %s-%d: replayed %d record(s) in %.3f s", self.topic,
                     shard.partition_index, count, elapsed)

    # --- operations ----------------------------------------------------------------------------

    def shard(self, index: int) -> Shard:
        """The loaded shard of a partition; COORDINATOR_LOAD_IN_PROGRESS while it loads."""
        shard = self.shards.get(index)
        if shard is None:
            raise KafkaError(Errors.NOT_COORDINATOR,
                             f"this broker hosts no shard of {self.topic}-{index}")
        if shard.loading:
            raise KafkaError(Errors.COORDINATOR_LOAD_IN_PROGRESS)
        return shard

    def write(self, shard: Shard, records: list) -> None:
        """Append ``records`` ([(key, value or None)]) as one batch, then replay them.

        Raises KafkaError (nothing replayed) when the append fails: callers map it to the
        error their clients expect (Kafka: COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR)."""
        if not records:
            return
        partition = self.partitions.get(self.topic, shard.partition_index)
        if partition is None:
            raise KafkaError(Errors.NOT_COORDINATOR,
                             f"{self.topic}-{shard.partition_index} is not hosted here")
        timestamp = now_ms()
        builder = RecordBatchBuilder()
        for key, value in records:
            builder.append(timestamp, key, value)
        try:
            result, _committed = partition.append(builder.build(), timestamp)
        except KafkaError as exc:
            log.warning("appending %d coordinator record(s) to %s-%d failed: %s", len(records),
                        self.topic, shard.partition_index, exc)
            raise KafkaError(Errors.COORDINATOR_NOT_AVAILABLE, exc.message) from None
        for delta, (key, value) in enumerate(records):
            shard.replay(result.first_offset + delta, key, value)
