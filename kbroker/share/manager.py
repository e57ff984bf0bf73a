"""The share-partition manager (Kafka's ``SharePartitionManager`` and ``DelayedShareFetch``).

It owns every share partition this broker serves (one per group, topic and partition, created
by the first ShareFetch that names it), the share sessions, and the acquisition-lock timers.

- :meth:`fetch` starts loading the partitions not loaded yet and acquires records for the member
  from those that are, in request order, until ``max_records`` (whole batches in the default
  batch-optimized mode), each partition taking at most its even share of ``max_bytes``; with
  nothing acquired it long-polls until a load finishes, new records reach the log, records are
  released (by an acknowledgement, a lock timeout or a closed session), or ``max_wait_ms``
  passes. As Kafka's DelayedShareFetch: the first answer of a new group carries the partitions
  whose state loaded first, and a partition still loading is left out of the answer (its records
  come with the next fetch).
- :meth:`acknowledge` applies acknowledgements and persists them before answering.
- :meth:`release_session` / :meth:`connection_closed` give a member's locked records back.
- Lock timers: one asyncio timer per share partition, set to its earliest lock deadline; when it
  fires, expired records are released, the change persisted and waiting fetches woken.
- Dead-letter queues (KIP-1191, as Kafka 4.4): records a change left in ARCHIVING (a REJECT, or
  the delivery limit reached, in a group with a DLQ) are written to the group's DLQ topic by
  :class:`kbroker.share.dlq.DeadLetterWriter` once ARCHIVING is persisted (for an
  acknowledgement: once it is persisted and answered), then archived and persisted again,
  whether the DLQ write succeeded or not. A partition that loads records in ARCHIVING resends
  them (see the writer for how duplicates are avoided).

Everything runs on the event loop; state changes happen synchronously between awaits.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
from dataclasses import dataclass, field

from kbroker.coordinator.share.persister import Persister, SharePartitionKey
from kbroker.metadata.delta import touched_topic_ids
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.share.partition import SharePartition
from kbroker.share.sessions import ShareSessionCache
from kbroker.share.settings import SettingsProvider, limits_of
from kbroker.share.state import DELIVERY_COUNT_EXCEEDED, CLIENT_REJECT, Acquired

log = logging.getLogger("kbroker.share")
RECORD_LIMIT_MODE = 1  # ShareAcquireMode (KIP-1206): 0 batch_optimized, 1 record_limit


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class FetchedPartition:
    error: Errors = Errors.NONE
    message: str | None = None
    records: list = field(default_factory=list)  # file regions of whole batches
    acquired: list[Acquired] = field(default_factory=list)


@dataclass(frozen=True)
class FetchParams:
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    max_records: int
    acquire_mode: int = 0
    batch_size: int = 0
    isolation_level: int = 0


class SharePartitionManager:
    def __init__(self, persister: Persister, settings: SettingsProvider, max_sessions: int,
                 wait_for_news=None, node_id: int | None = None, dead_letters=None):
        """``dead_letters``: a :class:`kbroker.share.dlq.DeadLetterWriter`; None (tools and
        tests without one) means no group has a dead-letter queue."""
        self.persister = persister
        self.dead_letters = dead_letters
        self.node_id = node_id  # this broker: share partitions it no longer leads are dropped
        self.settings = settings
        self.sessions = ShareSessionCache(max_sessions)
        self._partitions: dict[SharePartitionKey, SharePartition] = {}
        # The same share partitions by topic id: a metadata change looks at its topics' only.
        self._by_topic: dict[uuid.UUID, set[SharePartitionKey]] = {}
        self._waiters: set[asyncio.Future] = set()
        self._tasks: set[asyncio.Task] = set()
        # ReplicaManager.wait_for_news(partitions, timeout_s) -> bool: new data in the log.
        self._wait_for_news = wait_for_news

    def share_partition(self, key: SharePartitionKey, replica) -> SharePartition:
        partition = self._partitions.get(key)
        # A new replica object means the partition was recreated or this broker took it up
        # again: load the state again. A new leader epoch alone does not (the ZooKeeper
        # controller bumps it when the ISR shrinks, with the leader unchanged): Kafka keeps its
        # share partition then, and so do we; dropping it would lose the records acquired under
        # it, and an acknowledgement answered just before the reload would be read back stale.
        # Leadership that moved away and back is seen by apply() or, if the images in between
        # were merged, by the share coordinator fencing this copy's epoch (_fence).
        if partition is None or partition.replica is not replica:
            if partition is not None:
                self._drop(partition)
            partition = SharePartition(
                key, replica, self.persister, self._resume_dead_letters, self._fence)
            self._partitions[key] = partition
            self._by_topic.setdefault(key.topic_id, set()).add(key)
        return partition

    def _is_current(self, partition: SharePartition) -> bool:
        """``partition`` is still the copy this broker serves (not dropped while it waited)."""
        return self._partitions.get(partition.key) is partition

    def _drop(self, partition: SharePartition) -> None:
        """Forget ``partition`` and end its lock timer."""
        if partition.timer is not None:
            partition.timer.cancel()
            partition.timer = None
        key = partition.key
        if self._partitions.get(key) is partition:
            del self._partitions[key]
            keys = self._by_topic.get(key.topic_id)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_topic[key.topic_id]

    def _fence(self, partition: SharePartition) -> None:
        """The share coordinator refused ``partition``'s epoch: drop it (the next fetch loads
        the state again), as Kafka's fencedSharePartitionHandler does."""
        if self._is_current(partition):
            log.info("share partition %s was fenced by a newer epoch: loading it again",
                     partition.display_name())
            self._drop(partition)

    def apply(self, old, new, delta):
        """Image listener: drop the share partitions of deleted topics and of partitions this
        broker no longer leads, with their lock timers, as Kafka's SharePartitionManager does on
        a leadership change (the new leader loads the persisted state; a stale copy here would
        keep firing lock expiries against a fenced epoch, and deleted topics' copies would stay
        in memory for good)."""
        if self.node_id is None or not self._by_topic or not delta.touches_topics:
            return iter(())
        for topic_id in touched_topic_ids(old, new, delta):
            topic = new.topic_by_id(topic_id)
            for key in list(self._by_topic.get(topic_id, ())):
                if topic is not None and key.partition < topic.num_partitions and \
                        topic.state(key.partition).leader == self.node_id:
                    continue
                self._drop(self._partitions[key])
        return iter(())

    def loaded(self) -> list[SharePartition]:
        """The share partitions whose state is loaded, for /metrics and the console."""
        return [p for p in list(self._partitions.values()) if p.state is not None]

    # --- fetch ---------------------------------------------------------------------------------

    async def fetch(self, group_id: str, member_id: str, wanted: list, params: FetchParams
                    ) -> dict[SharePartitionKey, FetchedPartition]:
        """``wanted``: [(SharePartitionKey, replica Partition)] in request order."""
        settings = self.settings(group_id)
        results: dict[SharePartitionKey, FetchedPartition] = {}
        if params.max_records <= 0 or params.max_bytes <= 0:
            return results  # Kafka reads nothing then
        min_bytes = min(params.min_bytes, params.max_bytes)
        partitions = [self.share_partition(key, replica) for key, replica in wanted]
        # Loads run on their own (shared by concurrent fetches). This fetch takes them in as
        # they finish, one at a time, as Kafka's DelayedShareFetch is woken by each persister
        # answer: it acquires from the partitions loaded before it and those taken in so far.
        loading = {p.key: p.start_load(settings) for p in partitions if p.state is None}
        usable = {p.key for p in partitions if p.key not in loading}
        try:
            if loading:
                await asyncio.sleep(0)  # a read that needs no wait is done now
            deadline = time.monotonic() + max(params.max_wait_ms, 0) / 1000
            while True:
                remaining = deadline - time.monotonic()
                finished = [key for key, load in loading.items() if load.done()]
                # At the deadline every finished load counts (Kafka's onComplete).
                for key in finished if remaining <= 0 else finished[:1]:
                    load = loading.pop(key)
                    if not load.cancelled() and isinstance(load.exception(), KafkaError):
                        results[key] = FetchedPartition(load.exception().error,
                                                        load.exception().message)
                    else:
                        usable.add(key)
                loaded = [p for p in partitions if p.key in usable and p.state is not None]
                more = any(load.done() for load in loading.values())
                if min_bytes > 1 and remaining > 0 and loaded \
                        and self._acquirable_bytes(loaded, params, settings) < min_bytes:
                    if not more:
                        await self._wait(loaded, remaining, loading.values())
                    continue
                acquired_any = self._acquire(member_id, loaded, params, settings, results)
                remaining = deadline - time.monotonic()
                if acquired_any or (remaining <= 0 and not more) or not (loaded or loading):
                    return results
                if not more:
                    await self._wait(loaded, remaining, loading.values())
        finally:
            for load in loading.values():  # still loading: the next fetch finds it loaded
                load.add_done_callback(_retrieve)

    def _acquirable_bytes(self, partitions, params, settings) -> int:
        """What a fetch could take now, in bytes of whole batches from each partition's next
        fetch offset, for ``min_bytes``, as Kafka's DelayedShareFetch estimates it: counted
        only for partitions that may acquire (released records in the window, or room under
        the record-lock cap), as if all of it were acquirable. A read error counts as enough:
        the fetch answers it at once."""
        limits = self._limits(settings)
        total = 0
        for partition in partitions:
            state = partition.state
            if not state.has_available() and state.in_flight_count() >= limits.max_record_locks:
                continue
            try:
                _, raw = partition.read_batches(params.max_bytes, settings.isolation_level)
            except KafkaError:
                return params.min_bytes
            total += sum(len(region) for region in raw)
            if total >= params.min_bytes:
                break
        return total

    def _acquire(self, member_id, partitions, params, settings, results) -> bool:
        """Acquire from ``partitions`` in order: ``max_records`` for them all, ``max_bytes``
        split evenly among those that may acquire (Kafka's UNIFORM PartitionMaxBytesStrategy,
        the remainder to a random one)."""
        records_left = params.max_records
        limits = self._limits(settings)
        now = _now_ms()
        acquired_any = False
        able = [p for p in partitions if p.state.in_flight_count() < limits.max_record_locks
                or p.state.has_available()]  # the cheap test first
        share, extra = divmod(params.max_bytes, max(len(able), 1))
        lucky = random.choice(able) if able and extra else None
        able = set(map(id, able))
        for partition in partitions:
            key = partition.key
            out = results[key] = FetchedPartition()
            bytes_left = share + (extra if partition is lucky else 0)
            if records_left <= 0 or id(partition) not in able:
                continue
            try:
                batches, raw = partition.read_batches(bytes_left, settings.isolation_level)
            except KafkaError as exc:
                out.error, out.message = exc.error, exc.message
                continue
            ranges, changed = partition.state.acquire(
                member_id, batches, records_left, params.acquire_mode == RECORD_LIMIT_MODE,
                limits, now, params.batch_size)
            if changed:
                self._persist_later(partition, changed)
            if not ranges:
                continue
            acquired_any = True
            out.acquired = ranges
            for batch, region in zip(batches, raw):
                if any(r.first_offset <= batch.last_offset and batch.base_offset <= r.last_offset
                       for r in ranges):
                    _append_region(out.records, region)
            records_left -= sum(r.last_offset - r.first_offset + 1 for r in ranges)
            self._schedule_expiry(partition, settings, now + limits.lock_duration_ms)
        return acquired_any

    async def _wait(self, partitions, timeout_s: float, loads=()) -> None:
        """Until new records reach one of the logs, records are released somewhere, or one of
        ``loads`` finishes."""
        released = asyncio.get_running_loop().create_future()
        self._waiters.add(released)
        waits = [released]
        loads = list(loads)
        if self._wait_for_news is not None:
            waits.append(asyncio.ensure_future(self._wait_for_news(
                [p.replica for p in partitions], timeout_s)))
        try:
            await asyncio.wait(waits + loads, timeout=timeout_s,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._waiters.discard(released)
            for waiting in waits:  # never the loads: they are shared
                waiting.cancel()

    def _wake(self) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()

    # --- acknowledge ---------------------------------------------------------------------------

    async def acknowledge(self, group_id: str, member_id: str, acks: list
                          ) -> dict[SharePartitionKey, tuple[Errors, str | None]]:
        """``acks``: [(SharePartitionKey, [(first, last, types)])]. UNKNOWN_TOPIC_OR_PARTITION for
        a partition this broker has no share partition for (never fetched), as Kafka."""
        limits = self._limits(self.settings(group_id))
        results = {}
        writes = []
        for key, batches in acks:
            partition = self._partitions.get(key)
            if partition is None or partition.state is None:
                results[key] = (Errors.UNKNOWN_TOPIC_OR_PARTITION,
                                Errors.UNKNOWN_TOPIC_OR_PARTITION.message)
                continue
            state = partition.state
            start, remembered = state.start_offset, {}
            try:
                changed = state.acknowledge(member_id, batches, limits, _now_ms(), remembered)
            except KafkaError as exc:
                results[key] = (exc.error, exc.message)
                continue
            results[key] = (Errors.NONE, None)
            # No timer change: acknowledged records leave it early at worst (it then finds
            # nothing expired and looks again), and a renewed lock only ends later.
            if changed:
                self._wake()
                after = state.fields(changed)
                writes.append((key, partition, remembered, changed, after,
                               partition.persist(changed, state.start_offset != start)))
        for key, partition, remembered, changed, after, write in writes:
            error = await write
            if error != Errors.NONE:
                # As Kafka: a change the persister did not take is undone and the member may
                # acknowledge again.
                partition.state.undo(remembered, changed, after)
                self._schedule_expiry(partition, self.settings(group_id))
                results[key] = (error, None)
            else:
                self._dead_letter(partition, changed)
        return results

    # --- releasing -----------------------------------------------------------------------------

    async def release_session(self, group_id: str, member_id: str) -> None:
        """The member's share session closed (epoch -1): release everything it holds."""
        self.sessions.remove(group_id, member_id)
        await self._release_member(group_id, member_id)

    def connection_closed(self, connection) -> None:
        for session in self.sessions.connection_closed(connection):
            self._spawn(self._release_member(session.group_id, session.member_id))

    async def _release_member(self, group_id: str, member_id: str) -> None:
        limits = self._limits(self.settings(group_id))
        writes = []
        for key, partition in list(self._partitions.items()):
            if key.group_id != group_id or partition.state is None:
                continue
            changed = partition.state.release_member(member_id, limits)
            if changed:
                writes.append(self._persist_then_dead_letter(partition, changed))
        if writes:
            self._wake()
            await asyncio.gather(*writes)

    # --- acquisition locks ---------------------------------------------------------------------

    def _schedule_expiry(self, partition: SharePartition, settings,
                         new_deadline_ms: int | None = None) -> None:
        """Set the partition's timer to its earliest lock deadline. With ``new_deadline_ms``
        (records were just acquired until then) a timer due no later stays as it is: a fetch
        then costs no timer handle of its own."""
        if partition.timer is not None:
            if new_deadline_ms is not None and partition.timer_due_ms <= new_deadline_ms:
                return
            partition.timer.cancel()
            partition.timer = None
        if not self._is_current(partition):
            return  # dropped meanwhile (fenced, or no longer led): its locks are not ours to end
        deadline = new_deadline_ms
        if deadline is None:
            deadline = partition.state.next_deadline_ms()
            if deadline is None:
                return
        delay = max(0.0, (deadline - _now_ms()) / 1000)
        partition.timer_due_ms = deadline
        partition.timer = asyncio.get_running_loop().call_later(
            delay, self._expire, partition, partition.key.group_id)

    def _expire(self, partition: SharePartition, group_id: str) -> None:
        partition.timer = None
        if partition.state is None or not self._is_current(partition):
            return
        settings = self.settings(group_id)
        changed = partition.state.expire_locks(_now_ms(), self._limits(settings))
        if changed:
            log.debug("acquisition locks of %d records of %s expired", len(changed),
                      partition.key)
            self._persist_later(partition, changed)
            self._wake()
        self._schedule_expiry(partition, settings)

    def _persist_later(self, partition: SharePartition, changed: set[int]) -> None:
        self._spawn(self._persist_then_dead_letter(partition, changed))

    async def _persist_then_dead_letter(self, partition: SharePartition, changed: set[int]
                                        ) -> None:
        """Persist a release or a lock expiry; records it left in ARCHIVING then go to the DLQ
        even when that write failed (as Kafka: they were released, so nothing undoes them)."""
        await partition.persist(changed)
        self._dead_letter(partition, changed)

    # --- dead-letter queues (KIP-1191) -----------------------------------------------------------

    def _limits(self, settings):
        writer = self.dead_letters
        return limits_of(settings, writer is not None and writer.enabled())

    def _dead_letter(self, partition: SharePartition, changed, resumed: bool = False) -> None:
        """Send the ARCHIVING records among ``changed`` (all of them when None) to the DLQ, in
        the background."""
        state = partition.state
        if state is None:
            return
        found = state.archiving(changed)
        if not found:
            return
        from kbroker.share.dlq import DeadLetter

        limit = self.settings(partition.key.group_id).delivery_count_limit
        letters = [DeadLetter(offset, count, cause or (
            DELIVERY_COUNT_EXCEEDED if count >= limit else CLIENT_REJECT))
            for offset, count, cause in found]
        self._spawn(self._write_dead_letters(partition, letters, resumed))

    def _resume_dead_letters(self, partition: SharePartition) -> None:
        """A loaded state with records in ARCHIVING: their DLQ write may not have happened (or
        its ARCHIVED write did not), so it is done again, whatever the group's configs are now
        (as Kafka; a DLQ name removed since fails the write and they are archived)."""
        self._dead_letter(partition, None, resumed=True)

    async def _write_dead_letters(self, partition: SharePartition, letters, resumed: bool
                                  ) -> None:
        group_id = partition.key.group_id
        if self.dead_letters is not None:
            try:
                await self.dead_letters.write(group_id, self.settings(group_id),
                                              partition.replica, letters, resumed)
            except asyncio.CancelledError:
                raise  # the broker is stopping: the records stay ARCHIVING, resent on load
            except Exception as exc:  # noqa: BLE001 - whatever failed, the records are archived
                log.error("Failed to write to DLQ, proceeding to ARCHIVED regardless. "
                          "(share group %s, %s-%d offsets %d-%d: %s)", group_id,
                          partition.replica.topic, partition.replica.index, letters[0].offset,
                          letters[-1].offset, exc)
        state = partition.state
        changed = state.finish_archiving([letter.offset for letter in letters])
        if not changed:
            return
        error = await partition.persist(changed)
        if error != Errors.NONE:
            log.error("Could not persist ARCHIVED state for %s (%s)", partition.key, error.name)
        self._wake()

    def _spawn(self, coro) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def close(self) -> None:
        for partition in self._partitions.values():
            if partition.timer is not None:
                partition.timer.cancel()
        for task in self._tasks:
            task.cancel()


def _retrieve(future: asyncio.Future) -> None:
    """A load nobody waits for any more: its error is the next fetch's, not a log line."""
    if not future.cancelled():
        future.exception()


def _append_region(regions: list, region) -> None:
    """Add a batch's file region, merged with the previous one when they are adjacent in the
    same file (one sendfile instead of two)."""
    if regions:
        last = regions[-1]
        if last.file is region.file and last.position + last.length == region.position:
            regions[-1] = last.slice(0, last.length + region.length)
            return
    regions.append(region)
