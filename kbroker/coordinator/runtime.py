"""The coordinator runtime: shards over the partitions of an internal topic (Kafka's
``CoordinatorRuntime``).

A :class:`Shard` holds the state of one partition of the internal topic. Its durable state changes
only in ``replay(offset, key, value)`` (``value`` None for a tombstone), which is pure: no clock,
timers or futures. That state lives in timeline maps (:mod:`kbroker.coordinator.timeline`) on the
shard's ``timeline`` registry, so a write that is not committed is undone at the cost of what it
changed.

An operation is a function ``op(shard) -> CoordinatorResult`` and never writes itself. The runtime
(:meth:`CoordinatorRuntime.run`) takes the result's records, appends them as one batch to the
shard's partition (``Partition.append`` -> ``(result, committed)``), replays them into the shard,
and gives the response once ``committed`` completes. If the append fails nothing was replayed; if
``committed`` fails the shard's durable state goes back to the mark taken before the replay
(reverting the timeline journal), and every later write still waiting for its commit fails with it (their records sat after the
failed one in the log). The caller gets the error Kafka's coordinators answer
(:func:`coordinator_error`), or what the result's ``on_failed`` makes of it.

Execution model: the event loop is single-threaded and an operation, its append and its replay are
synchronous, so a shard runs one operation at a time with no locks; only the wait for the commit is
asynchronous, and commits complete in offset order. An operation without records that runs while
earlier writes wait for their commit answers after them (it may have read their uncommitted state).

Timers (session timeouts, rebalance delays, later transaction timeouts) live here, keyed per shard;
a timer fires an operation like any other. Unloading a shard (leadership moved, or broker stop)
cancels its timers, fails its pending writes with NOT_COORDINATOR and tells the shard
(``on_unloaded``); loading one replays its partition from the log start offset, so a restart (or a
``kill -9``) and a leadership move load the same way.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from kbroker.coordinator.timeline import SnapshotRegistry, TimelineDict
from kbroker.metadata.topic_policy import NewTopic
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.protocol.records import (CONTROL_COMMIT, CorruptRecordError, RecordBatchBuilder,
                                      decode_records, iter_batches, parse_control_record)

log = logging.getLogger("kbroker.coordinator")

_LOAD_READ_BYTES = 1024 * 1024
_MAX_UNCOMPRESSED = 64 * 1024 * 1024
_LOAD_RETRY_FIRST_S = 1.0  # a failed load is retried after 1 s, doubling up to 30 s
_LOAD_RETRY_MAX_S = 30.0
_HW_WAIT_S = 0.02  # how often a load checks whether the high watermark reached the log end


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class CoordinatorResult:
    """What an operation returns.

    ``records`` ([(key bytes, value bytes or None)]) are appended as one batch and replayed;
    ``response`` is handed to the caller once they are committed. ``on_committed()`` runs then,
    before the response is given (in-memory work that must follow the log, e.g. answering the
    members waiting for an assignment). ``then(shard)`` is a follow-up operation run after the
    commit; its response replaces this one. ``on_failed(error)`` runs after the state was restored
    when the write fails, and returns the response to give instead (without it the caller gets
    the KafkaError).

    With a ``producer_id`` (>= 0) the records are written as a transactional batch of that
    producer and epoch (TxnOffsetCommit) and replayed through ``Shard.replay_transactional``;
    they take effect when the transaction's marker is written (``Shard.replay_end_txn``)."""
    records: list = field(default_factory=list)
    response: Any = None
    on_committed: Callable[[], None] | None = None
    then: Callable[["Shard"], "CoordinatorResult"] | None = None
    on_failed: Callable[[KafkaError], Any] | None = None
    producer_id: int = -1
    producer_epoch: int = -1


def respond(response) -> CoordinatorResult:
    """A result without records."""
    return CoordinatorResult([], response)


# Kafka's GroupCoordinatorService.normalizeException (the transaction coordinator maps alike).
_APPEND_ERRORS = {
    Errors.UNKNOWN_TOPIC_OR_PARTITION: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_ENOUGH_REPLICAS: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.REQUEST_TIMED_OUT: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_LEADER_OR_FOLLOWER: Errors.NOT_COORDINATOR,
    Errors.KAFKA_STORAGE_ERROR: Errors.NOT_COORDINATOR,
    Errors.MESSAGE_TOO_LARGE: Errors.UNKNOWN_SERVER_ERROR,
    Errors.RECORD_LIST_TOO_LARGE: Errors.UNKNOWN_SERVER_ERROR,
    Errors.INVALID_FETCH_SIZE: Errors.UNKNOWN_SERVER_ERROR,
}


def coordinator_error(exc: BaseException) -> KafkaError:
    """The error a coordinator answers for a failed append or commit."""
    if isinstance(exc, KafkaError):
        error = _APPEND_ERRORS.get(exc.error, exc.error)
        return KafkaError(error, exc.message)
    return KafkaError(Errors.COORDINATOR_NOT_AVAILABLE, str(exc) or type(exc).__name__)


class Shard:
    """One partition's state machine; subclasses implement :meth:`replay` over durable state kept
    in timeline maps of ``self.timeline`` (:meth:`timeline_dict`)."""

    def __init__(self, runtime: "CoordinatorRuntime", partition_index: int):
        self.runtime = runtime
        self.partition_index = partition_index
        self.loading = True
        self.load_error: str | None = None  # why the last load attempt failed
        self.timeline = SnapshotRegistry()
        # The time of the records being replayed, set by the runtime (replay itself reads no
        # clock, and loading reads none at all): a write's time, or a loaded batch's timestamp.
        self.replay_time_ms = 0

    def timeline_dict(self) -> TimelineDict:
        """A new map of this shard's durable state."""
        return TimelineDict(self.timeline)

    def replay(self, offset: int, key: bytes, value: bytes | None) -> None:
        raise NotImplementedError

    def durable_state(self) -> Any:
        """A comparable copy of the durable state (tests check reverts and replays with it)."""
        raise NotImplementedError

    def replay_transactional(self, offset: int, producer_id: int, producer_epoch: int,
                             key: bytes, value: bytes | None) -> None:
        """A record of a transactional batch; pending until its marker (default: ignored)."""

    def replay_end_txn(self, offset: int, producer_id: int, commit: bool) -> None:
        """A COMMIT or ABORT marker of ``producer_id`` (default: nothing pending to settle)."""

    def on_loaded(self) -> None:
        """Called once the whole partition has been replayed."""

    def on_unloaded(self) -> None:
        """Called when the shard is dropped (its timers are already cancelled)."""

    # --- timers (owned by the runtime, keyed by this shard) -------------------------------------

    def schedule(self, key, delay_ms: int, op: Callable[["Shard"], CoordinatorResult | None]):
        self.runtime.schedule(self, key, delay_ms, op)

    def cancel(self, key) -> None:
        self.runtime.cancel_timer(self.partition_index, key)


@dataclass(eq=False)
class _PendingWrite:
    first_offset: int  # also its mark in the shard's timeline
    last_offset: int
    result: CoordinatorResult
    done: asyncio.Future  # the caller's answer


class CoordinatorRuntime:
    """Shards of ``topic`` hosted by this broker (all of them, on a single node)."""

    def __init__(self, controller, partitions, topic: str, num_partitions: int,
                 topic_configs: dict, shard_factory, replication_factor: int = 1):
        self.controller = controller
        self.partitions = partitions
        self.topic = topic
        self.default_partitions = num_partitions
        self.replication_factor = replication_factor
        self.topic_configs = topic_configs
        self.shard_factory = shard_factory
        self.shards: dict[int, Shard] = {}
        self._load_tasks: dict[int, asyncio.Task] = {}
        self._timers: dict[int, dict] = {}  # shard index -> key -> TimerHandle
        self._pending: dict[int, list[_PendingWrite]] = {}  # shard index -> writes in offset order
        self._creating: asyncio.Task | None = None  # the internal topic's creation, if under way

    @property
    def num_partitions(self) -> int:
        topic = self.controller.image.topic(self.topic)
        return topic.num_partitions if topic is not None else self.default_partitions

    @property
    def exists(self) -> bool:
        return self.controller.image.topic(self.topic) is not None

    def _partition(self, index: int):
        return self.partitions.get(self.topic, index)

    # --- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Load the shards of the internal topic if it exists (at broker start-up)."""
        if self.exists:
            self._load_all()

    async def create_topic_if_missing(self) -> None:
        """FindCoordinator's step: create the internal topic on first use, as Kafka does; the
        shards this broker leads load as the new image reaches the runtime (:meth:`apply`).
        Raises the controller's KafkaError (in a cluster: another broker created it first, too
        few brokers, the controller moved)."""
        if not self.exists:
            # One creation for every request that finds the topic missing meanwhile (a burst of
            # pipelined JoinGroups): the others wait for it rather than collide with it.
            if self._creating is None or self._creating.done():
                self._creating = asyncio.ensure_future(self._create_topic())
                # Every waiter may be gone (its client disconnected) when the creation fails,
                # e.g. on a full disk: not worth asyncio's "never retrieved" traceback.
                self._creating.add_done_callback(_retrieve)
            try:
                await asyncio.shield(self._creating)
            except KafkaError:
                if not self.exists:  # else another path created it first: all the same
                    raise
        if len(self.shards) < self.num_partitions:
            self._load_all()

    async def _create_topic(self) -> None:
        topic = await self.controller.create_topic(NewTopic(
            self.topic, self.default_partitions, self.replication_factor,
            configs=dict(self.topic_configs)))
        log.info("created internal topic %s with %d partitions", self.topic,
                 topic.num_partitions)

    def ready(self) -> bool:
        """The topic exists and every shard of it this broker leads is hosted: nothing for
        :meth:`ensure_topic` to do (checked first so that the hot path makes no coroutine)."""
        topic = self.controller.image.topic(self.topic)
        return topic is not None and len(self.shards) >= topic.num_partitions

    async def ensure_topic(self) -> None:
        """Before any other coordinator write: the topic exists (a single node creates it on
        first use, whatever the request). A broker that cannot create it is, for this request,
        not the coordinator: NOT_COORDINATOR sends the client back to FindCoordinator, as Kafka
        answers a broker that hosts no shard of the group. The controller's own error would be
        fatal to a client: the Java consumer gives up on a JoinGroup answered
        TOPIC_ALREADY_EXISTS (the race with another broker creating it) or
        INVALID_REPLICATION_FACTOR."""
        try:
            await self.create_topic_if_missing()
        except KafkaError as exc:
            log.debug("%s is not available on this broker yet (%s: %s): NOT_COORDINATOR",
                      self.topic, exc.error.name, exc.message)
            raise KafkaError(Errors.NOT_COORDINATOR,
                             f"{self.topic} is not available on this broker yet") from None

    def require_topic(self) -> None:
        """For a read or an in-line step that cannot wait for a creation: NOT_COORDINATOR while
        the internal topic does not exist (the client finds its coordinator, which creates it)."""
        if not self.exists:
            raise KafkaError(Errors.NOT_COORDINATOR,
                             f"{self.topic} is not available on this broker yet")

    async def stop(self) -> None:
        tasks = list(self._load_tasks.values())
        for index in list(self.shards):
            self.unload(index)
        for task in tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass

    def _load_all(self) -> None:
        for index in range(self.num_partitions):
            if index not in self.shards and self.leads(index):
                self.load(index)

    def leads(self, index: int) -> bool:
        """Whether this broker leads partition ``index`` of the topic (always, on one node)."""
        topic = self.controller.image.topic(self.topic)
        node = getattr(self.partitions, "node_id", None)
        return topic is not None and (node is None or topic.state(index).leader == node)

    def apply(self, old, new, delta):
        """Image listener: load the shards whose partition this broker came to lead (on a single
        node: every one, once the topic exists), unload those it no longer leads (their groups'
        clients get NOT_COORDINATOR and find the new coordinator). Subscribed after the replica
        manager, so the partition has its new role before its shard loads."""
        if self.topic not in delta.topic_names():
            return
        before, after = old.topic(self.topic), new.topic(self.topic)
        if after is None or before is after:
            return
        node = getattr(self.partitions, "node_id", None)
        for index in range(after.num_partitions):
            leads = after.state(index).leader == node
            if leads and index not in self.shards:
                self.load(index)
            elif not leads and index in self.shards:
                self.unload(index)
        yield from ()

    def load(self, index: int) -> None:
        """Host the shard of partition ``index`` (this broker leads it): replay the partition,
        then serve. Until then operations get COORDINATOR_LOAD_IN_PROGRESS."""
        if index in self.shards:
            return
        shard = self.shard_factory(self, index)
        self.shards[index] = shard
        partition = self._partition(index)
        if partition is None or partition.log_end_offset == partition.log_start_offset:
            self._finish_load(shard, 0)  # nothing to replay: usable at once
            return
        task = asyncio.get_running_loop().create_task(self._load(shard),
                                                      name=f"load {self.topic}-{index}")
        self._load_tasks[index] = task
        task.add_done_callback(lambda _: self._load_tasks.pop(index, None)
                               if self._load_tasks.get(index) is task else None)

    def unload(self, index: int) -> None:
        """Stop hosting the shard (leadership moved, or the broker stops): later operations and
        every write still waiting for its commit get NOT_COORDINATOR; timers are cancelled."""
        shard = self.shards.pop(index, None)
        task = self._load_tasks.pop(index, None)
        if task is not None:
            task.cancel()
        for handle in self._timers.pop(index, {}).values():
            handle.cancel()
        for pending in self._pending.pop(index, []):
            if not pending.done.done():
                pending.done.set_exception(KafkaError(
                    Errors.NOT_COORDINATOR, f"{self.topic}-{index} is no longer hosted here"))
        if shard is not None and not shard.loading:
            shard.on_unloaded()

    async def _load(self, shard: Shard) -> None:
        """Replay the shard's partition. A load that fails (a damaged segment) leaves the shard
        unavailable - COORDINATOR_NOT_AVAILABLE for its groups, so clients retry rather than wait
        on a load that never ends - and is retried on a fresh shard with a growing backoff,
        so the shard comes back once the partition is readable again."""
        index = shard.partition_index
        backoff = _LOAD_RETRY_FIRST_S
        failures = 0
        while True:
            started = time.monotonic()
            try:
                count = await self._replay_partition(shard)
                break
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures += 1
                reason = f"{type(exc).__name__}: {exc}"
                if failures == 1:
                    log.error("cannot load %s-%d: %s; its groups get COORDINATOR_NOT_AVAILABLE "
                              "while the load is retried (every %.0f-%.0f s)", self.topic, index,
                              reason, _LOAD_RETRY_FIRST_S, _LOAD_RETRY_MAX_S)
                log.debug("loading %s-%d failed", self.topic, index, exc_info=True)
                shard.load_error = reason
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _LOAD_RETRY_MAX_S)
                if self.shards.get(index) is not shard:
                    return  # unloaded meanwhile
                # The failed replay left part of the partition in the shard: start afresh.
                fresh = self.shard_factory(self, index)
                fresh.load_error = reason
                self.shards[index] = shard = fresh
        if failures:
            log.info("loaded %s-%d after %d failed attempt(s)", self.topic, index, failures)
        self._finish_load(shard, count, time.monotonic() - started)

    async def _replay_partition(self, shard: Shard) -> int:
        """Replay the partition up to its high watermark into ``shard``; the record count."""
        partition = self._partition(shard.partition_index)
        if partition is None:
            return 0
        # A new leader's high watermark trails its log until the followers fetch from it, yet
        # everything in its log may have been acknowledged by the previous leader (committed
        # there, replicated here): wait until that much is committed here too, or the shard
        # would come up without the last acknowledged writes. (Kafka replays to the log end and
        # holds back the uncommitted part; waiting gives the same state.)
        target = partition.log_end_offset
        while partition.high_watermark < target:
            await asyncio.sleep(_HW_WAIT_S)
            partition = self._partition(shard.partition_index) or partition
        count = 0
        offset = partition.log_start_offset
        while offset < partition.high_watermark:
            next_offset, replayed = replay_chunk(shard, partition, offset)
            if next_offset is None:
                break
            offset = next_offset
            count += replayed
            await asyncio.sleep(0)  # let other work run between chunks
        return count

    def _finish_load(self, shard: Shard, count: int, elapsed: float = 0.0) -> None:
        shard.loading = False
        shard.load_error = None
        shard.on_loaded()
        if count:
            log.info("loaded %s-%d: replayed %d record(s) in %.3f s", self.topic,
                     shard.partition_index, count, elapsed)

    # --- operations ----------------------------------------------------------------------------

    def shard(self, index: int) -> Shard:
        """The loaded shard of a partition; COORDINATOR_LOAD_IN_PROGRESS while it loads,
        COORDINATOR_NOT_AVAILABLE while its load fails."""
        shard = self.shards.get(index)
        if shard is None:
            raise KafkaError(Errors.NOT_COORDINATOR,
                             f"this broker hosts no shard of {self.topic}-{index}")
        if shard.load_error is not None:
            raise KafkaError(Errors.COORDINATOR_NOT_AVAILABLE,
                             f"{self.topic}-{index} cannot be loaded: {shard.load_error}")
        if shard.loading:
            raise KafkaError(Errors.COORDINATOR_LOAD_IN_PROGRESS)
        return shard

    async def write(self, index: int, op: Callable[[Shard], CoordinatorResult]):
        """Run ``op`` on shard ``index``; its response once its records are committed. A caller
        that goes away (its connection closed) does not stop the write's follow-up work."""
        done = self.run(index, op)
        if done.done():  # answered at once (a write without records, or a single node's)
            return done.result()
        # With the caller gone nobody awaits it: its error (NOT_COORDINATOR when the shard
        # unloads, say) is the caller's, not worth asyncio's "never retrieved" ERROR line.
        done.add_done_callback(_retrieve)
        return await asyncio.shield(done)

    def run(self, index: int, op: Callable[[Shard], CoordinatorResult]) -> asyncio.Future:
        """Run ``op`` now; a future of its response. Raises KafkaError when the shard is not
        available (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS) or ``op`` itself raises."""
        shard = self.shard(index)
        result = op(shard)
        done = asyncio.get_running_loop().create_future()
        if result is None:
            result = CoordinatorResult()
        pending = self._pending.get(index)
        if not result.records:
            if pending:
                # Answer after the writes whose uncommitted state the operation may have read.
                _after(pending[-1].done, done, lambda: self._committed(shard, result, done))
            else:
                self._committed(shard, result, done)
            return done
        partition = self._partition(index)
        if partition is None:
            raise KafkaError(Errors.NOT_COORDINATOR, f"{self.topic}-{index} is not hosted here")
        timestamp = now_ms()
        transactional = result.producer_id >= 0
        builder = RecordBatchBuilder(producer_id=result.producer_id,
                                     producer_epoch=result.producer_epoch,
                                     is_transactional=True) if transactional \
            else RecordBatchBuilder()
        for key, value in result.records:
            builder.append(timestamp, key, value)
        try:
            if transactional:  # the coordinator's own batch: no client sequence checks
                appended, committed = partition.append(builder.build(), timestamp,
                                                       from_client=False)
            else:
                appended, committed = partition.append(builder.build(), timestamp)
        except KafkaError as exc:
            log.warning("appending %d record(s) to %s-%d failed: %s", len(result.records),
                        self.topic, index, exc)
            self._failed(result, coordinator_error(exc), done)
            return done
        at_once = committed.done() and not committed.cancelled() and committed.exception() is None
        # Nothing to revert for a write committed already (a single node: every write).
        if not at_once:
            shard.timeline.mark(appended.first_offset)
        shard.replay_time_ms = now_ms()
        for delta, (key, value) in enumerate(result.records):
            if transactional:
                shard.replay_transactional(appended.first_offset + delta, result.producer_id,
                                           result.producer_epoch, key, value)
            else:
                shard.replay(appended.first_offset + delta, key, value)
        if at_once:
            self._committed(shard, result, done)
            return done
        write = _PendingWrite(appended.first_offset,
                              appended.first_offset + len(result.records) - 1, result, done)
        self._pending.setdefault(index, []).append(write)
        committed.add_done_callback(lambda f: self._on_commit(shard, write, f))
        return done

    def _on_commit(self, shard: Shard, write: _PendingWrite, committed: asyncio.Future) -> None:
        pending = self._pending.get(shard.partition_index)
        if not pending or write not in pending:
            return  # failed with an earlier write, or the shard unloaded
        position = pending.index(write)
        if committed.cancelled() or committed.exception() is not None:
            exc = KafkaError(Errors.NOT_COORDINATOR) if committed.cancelled() \
                else committed.exception()
            error = coordinator_error(exc)
            log.warning("write at offset %d of %s-%d was not committed: %s; restoring the "
                        "shard to before it", write.last_offset, self.topic,
                        shard.partition_index, exc)
            failed = pending[position:]
            del pending[position:]
            shard.timeline.revert_to(write.first_offset)
            for w in failed:
                self._failed(w.result, error, w.done)
            return
        del pending[position]
        shard.timeline.release_before(pending[0].first_offset if pending else None)
        self._committed(shard, write.result, write.done)

    def _committed(self, shard: Shard, result: CoordinatorResult, done: asyncio.Future) -> None:
        # The follow-up work runs even when nobody waits for the answer any more.
        try:
            if result.on_committed is not None:
                result.on_committed()
            if result.then is not None:
                _chain(self.run(shard.partition_index, result.then), done)
                return
        except Exception as exc:
            _settle(done, exception=exc)
            return
        _settle(done, result.response)

    @staticmethod
    def _failed(result: CoordinatorResult, error: KafkaError, done: asyncio.Future) -> None:
        if result.on_failed is None:
            _settle(done, exception=error)
            return
        try:
            _settle(done, result.on_failed(error))
        except Exception as exc:
            _settle(done, exception=exc)

    # --- transaction markers --------------------------------------------------------------------

    def append_txn_marker(self, index: int, producer_id: int, producer_epoch: int,
                          coordinator_epoch: int, commit: bool,
                          transaction_version: int = 0) -> asyncio.Future:
        """Write a transaction marker to shard ``index``'s partition and settle the producer's
        pending records in the shard; the marker's committed future. Raises KafkaError."""
        partition = self._partition(index)
        if partition is None:
            raise KafkaError(Errors.NOT_LEADER_OR_FOLLOWER,
                             f"{self.topic}-{index} is not hosted here")
        appended, committed = partition.append_txn_marker(producer_id, producer_epoch,
                                                          coordinator_epoch, commit, now_ms(),
                                                          transaction_version)
        shard = self.shards.get(index)
        if shard is not None and not shard.loading:
            shard.replay_end_txn(appended.first_offset, producer_id, commit)
        return committed

    # --- timers --------------------------------------------------------------------------------

    def schedule(self, shard: Shard, key, delay_ms: int, op) -> None:
        """(Re)arm timer ``key`` of ``shard``: after ``delay_ms`` the runtime runs ``op(shard)``
        as an operation (its records are written like a request's). A shard that is no longer
        hosted schedules nothing."""
        index = shard.partition_index
        if self.shards.get(index) is not shard:
            return
        timers = self._timers.setdefault(index, {})
        handle = timers.pop(key, None)
        if handle is not None:
            handle.cancel()

        def fire():
            if timers.get(key) is not handle_ref[0]:
                return
            del timers[key]
            try:
                done = self.run(index, op)
            except KafkaError as exc:
                log.warning("timer %s of %s-%d: %s", key, self.topic, index, exc)
                return
            except Exception:
                log.exception("timer %s of %s-%d failed", key, self.topic, index)
                return
            done.add_done_callback(lambda f: _log_timer_outcome(f, key, self.topic, index))

        handle_ref = [None]
        handle_ref[0] = asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000, fire)
        timers[key] = handle_ref[0]

    def cancel_timer(self, index: int, key) -> None:
        handle = self._timers.get(index, {}).pop(key, None)
        if handle is not None:
            handle.cancel()

    def timer_keys(self, index: int) -> set:
        return set(self._timers.get(index, {}))

    def has_timer(self, index: int, key) -> bool:
        return key in self._timers.get(index, ())


def replay_chunk(shard: Shard, partition, offset: int, **read_options) -> tuple[int | None, int]:
    """Replay one read's worth of ``partition`` from ``offset`` (below its high watermark) into
    ``shard``: (the next offset, or None when nothing was read; records replayed). Loading uses
    it, and so does a reader that follows a replica it does not lead (``read_options`` then
    allow a follower to serve: ``follower_may_serve=True``)."""
    result = partition.read(offset, _LOAD_READ_BYTES, **read_options)
    if not result.regions:
        return None, 0
    count = 0
    for region in result.regions:
        for header in iter_batches(memoryview(region.read())):
            offset = header.next_offset
            shard.replay_time_ms = header.max_timestamp  # when it was written
            if header.is_control:
                _replay_marker(shard, header)
                continue
            transactional = header.is_transactional and header.producer_id >= 0
            for record in decode_records(header, _MAX_UNCOMPRESSED):
                if record.key is None:
                    continue
                if transactional:
                    shard.replay_transactional(
                        record.offset(header), header.producer_id,
                        header.producer_epoch, record.key, record.value)
                else:
                    shard.replay(record.offset(header), record.key, record.value)
                count += 1
    return offset, count


def _replay_marker(shard: Shard, header) -> None:
    if header.producer_id < 0:
        return
    try:
        records = decode_records(header, _MAX_UNCOMPRESSED)
        control_type, coordinator_epoch = parse_control_record(records[0])
    except (CorruptRecordError, IndexError):
        log.warning("skipping an unreadable control batch at offset %d of shard %d",
                    header.base_offset, shard.partition_index)
        return
    if coordinator_epoch is not None:
        shard.replay_end_txn(header.base_offset, header.producer_id,
                             control_type == CONTROL_COMMIT)


def _settle(future: asyncio.Future, result=None, exception: BaseException | None = None) -> None:
    if future.done():
        return
    if exception is not None:
        future.set_exception(exception)
    else:
        future.set_result(result)


def _chain(source: asyncio.Future, target: asyncio.Future) -> None:
    def copy(f: asyncio.Future) -> None:
        if target.done():
            return
        if f.cancelled():
            target.cancel()
        elif f.exception() is not None:
            target.set_exception(f.exception())
        else:
            target.set_result(f.result())

    source.add_done_callback(copy)


def _retrieve(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()


def _after(first: asyncio.Future, target: asyncio.Future, then: Callable[[], None]) -> None:
    """Run ``then`` once ``first`` is done; ``target`` fails as ``first`` did."""
    def proceed(f: asyncio.Future) -> None:
        if f.cancelled():
            _settle(target, exception=KafkaError(Errors.NOT_COORDINATOR))
        elif f.exception() is not None:
            _settle(target, exception=f.exception())
        else:
            then()

    first.add_done_callback(proceed)


def _log_timer_outcome(done: asyncio.Future, key, topic: str, index: int) -> None:
    if done.cancelled():
        return
    exc = done.exception()
    if exc is not None:
        log.warning("the write of timer %s of %s-%d failed: %s", key, topic, index, exc)
