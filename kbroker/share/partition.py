"""A share partition with its I/O: load through the persister, read the log, persist changes.

:class:`SharePartition` wraps the pure :class:`~kbroker.share.state.SharePartitionState` of one
(group, topic, partition). It is created on the first ShareFetch naming it and loads its state with
``persister.read`` (Kafka's SharePartition.maybeInitialize): an unset start offset means the
group never read this partition, so it starts where ``share.auto.offset.reset`` points (latest:
the high watermark; earliest: the log start offset). Persister errors map as Kafka's
fetchPersisterError: coordinator trouble -> COORDINATOR_NOT_AVAILABLE (retriable), fenced epochs
-> NOT_LEADER_OR_FOLLOWER, GROUP_ID_NOT_FOUND and UNKNOWN_TOPIC_OR_PARTITION as they are,
anything else UNKNOWN_SERVER_ERROR; a failed load is retried by the next fetch.

What is persisted, and when (``persister.write``, as Kafka): after acknowledgements, releases,
lock timeouts and archiving, the changed offsets still in flight as state batches with their
delivery counts, and the start offset (which carries everything below it as done). Acquisition
itself is not written: an acquired record whose broker dies is redelivered, its delivery count
counted from the last write.

Concurrency: all of it runs on the event loop; state changes are synchronous, so two requests
never interleave inside one; only the persister calls await.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time

from kbroker.coordinator.share.persister import NO_OFFSET, Persister, SharePartitionKey
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.protocol.records import RECORDS_OFFSET, BatchHeader
from kbroker.share.settings import READ_COMMITTED, ShareGroupSettings
from kbroker.share.state import FetchedBatch, SharePartitionState

log = logging.getLogger("kbroker.share")

_LOAD_ERRORS = {
    Errors.NOT_COORDINATOR: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.COORDINATOR_NOT_AVAILABLE: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.COORDINATOR_LOAD_IN_PROGRESS: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.GROUP_ID_NOT_FOUND: Errors.GROUP_ID_NOT_FOUND,
    Errors.UNKNOWN_TOPIC_OR_PARTITION: Errors.UNKNOWN_TOPIC_OR_PARTITION,
    Errors.FENCED_LEADER_EPOCH: Errors.NOT_LEADER_OR_FOLLOWER,
    Errors.FENCED_STATE_EPOCH: Errors.NOT_LEADER_OR_FOLLOWER,
}


def persister_error(error: Errors) -> Errors:
    return _LOAD_ERRORS.get(error, Errors.UNKNOWN_SERVER_ERROR)


_FENCED = (Errors.FENCED_LEADER_EPOCH, Errors.FENCED_STATE_EPOCH)


class SharePartition:
    def __init__(self, key: SharePartitionKey, replica, persister: Persister, on_load=None,
                 on_fenced=None):
        """``on_load(partition)``: called once its state is loaded (the manager resumes the
        dead-letter writes of records loaded in ARCHIVING). ``on_fenced(partition)``: called when
        the share coordinator refuses its epoch (the manager drops it; the next fetch loads the
        state again)."""
        self.key = key
        self.on_load = on_load
        self.on_fenced = on_fenced
        self.replica = replica  # kbroker.replica.partition.Partition (this broker leads it)
        # The leader epoch this state was loaded under, kept for every read and write as Kafka's
        # SharePartition keeps its leaderEpoch: a later epoch of the same leadership (the ZooKeeper
        # controller bumps it when the ISR shrinks) changes nothing here; another leader having
        # read the state since fences our writes (FENCED_LEADER_EPOCH), and then we reload.
        self.leader_epoch = replica.leader_epoch
        self.persister = persister
        self.state: SharePartitionState | None = None
        self._loading: asyncio.Future | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.timer_due_ms = 0  # the lock deadline the timer fires for (wall-clock ms)

    async def load(self, settings: ShareGroupSettings) -> None:
        """Load once; concurrent callers wait for the same read. Raises KafkaError."""
        if self.state is not None:
            return
        await asyncio.shield(self.start_load(settings))

    def start_load(self, settings: ShareGroupSettings) -> asyncio.Future:
        """The read of the state, started if none is under way: done once the state is loaded,
        or failed with the KafkaError (the next call reads again)."""
        if self._loading is None:
            self._loading = loading = asyncio.ensure_future(self._read(settings))

            def done(future: asyncio.Future) -> None:
                if future.cancelled() or future.exception() is not None:
                    if self._loading is future:
                        self._loading = None  # the next fetch tries again
            loading.add_done_callback(done)
        return self._loading

    async def _read(self, settings: ShareGroupSettings) -> None:
        result = await self.persister.read(self.key, self.leader_epoch)
        if result.error != Errors.NONE:
            self._maybe_fenced(result.error)
            error = persister_error(result.error)
            log.warning("share partition %s could not load its state: %s (%s)",
                        self.display_name(), result.error.name, result.error_message)
            raise KafkaError(error, result.error_message)
        start = result.start_offset
        if start == NO_OFFSET:
            start = self._reset_offset(settings)
        try:
            self.state = SharePartitionState.from_persisted(result, start)
        except ValueError as exc:
            log.error("share partition %s has an invalid persisted state: %s",
                      self.display_name(), exc)
            raise KafkaError(Errors.UNKNOWN_SERVER_ERROR, str(exc)) from None
        if self.on_load is not None:
            self.on_load(self)

    def _reset_offset(self, settings) -> int:
        """Where a group that never read this partition starts (share.auto.offset.reset)."""
        if settings.auto_offset_reset == "earliest":
            return self.replica.log_start_offset
        duration_ms = getattr(settings, "auto_offset_reset_duration_ms", None)
        if duration_ms is not None:  # by_duration: the first record at most that old
            found = self.replica.offset_for_timestamp(int(time.time() * 1000) - duration_ms)
            if found is not None:
                return found[0]
        return self.replica.high_watermark

    def display_name(self) -> str:
        return f"{self.key.group_id}:{self.replica.topic}-{self.replica.index}"

    def read_batches(self, max_bytes: int, isolation_level: int) -> tuple[list[FetchedBatch], list]:
        """The log's batches from the next fetch offset: their offsets (with control and aborted
        batches marked not deliverable) and each one's file region, which goes to the socket with
        sendfile. Only the batch headers are read. Raises KafkaError from the replica."""
        state = self.state
        state.move_start_to(self.replica.log_start_offset)
        offset = state.next_fetch_offset()
        read_committed = isolation_level == READ_COMMITTED
        bound = self.replica.fetch_bound(read_committed=read_committed)
        if offset >= bound:
            return [], []
        result = self.replica.read(offset, max_bytes, True, read_committed=read_committed)
        aborted = {}
        if read_committed:
            for producer_id, first_offset in self.replica.aborted_transactions(offset, bound):
                aborted.setdefault(producer_id, []).append(first_offset)
        batches, raw = [], []
        open_aborts: set[int] = set()
        for header, region in _headers(result.regions):
            pid = header.producer_id
            for first in aborted.get(pid, ()):
                if header.base_offset >= first and not header.is_control:
                    open_aborts.add(pid)
            deliverable = not header.is_control
            if header.is_transactional and pid in open_aborts:
                deliverable = False
                if header.is_control:
                    open_aborts.discard(pid)  # the abort marker closes the transaction
                    aborted[pid] = [f for f in aborted[pid] if f > header.base_offset]
            batches.append(FetchedBatch(header.base_offset, header.last_offset, deliverable))
            raw.append(region)
        return batches, raw

    async def persist(self, changed: set[int], start_moved: bool = True) -> Errors:
        """Write the changed offsets and the start offset; the error, NONE when written."""
        state = self.state
        if state is None or (not changed and not start_moved):
            return Errors.NONE
        batches = state.persisted_batches(changed)
        result = await self.persister.write(self.key, state.state_epoch, self.leader_epoch,
                                            state.start_offset, batches,
                                            state.delivery_complete_count())
        if result.error != Errors.NONE:
            log.warning("share partition %s could not persist its state: %s (%s)",
                        self.display_name(), result.error.name, result.error_message)
            self._maybe_fenced(result.error)
            return persister_error(result.error)
        return Errors.NONE

    def _maybe_fenced(self, error: Errors) -> None:
        """Another leader (or a newer state epoch) owns the persisted state now: this copy is
        stale, as Kafka's fencedSharePartitionHandler drops it."""
        if error in _FENCED and self.on_fenced is not None:
            self.on_fenced(self)


def _headers(regions):
    """(BatchHeader, the batch's own FileRegion) for each whole batch of ``regions``, reading
    the 61 header bytes of each batch with pread."""
    for region in regions:
        fd, pos = region.fileno(), 0
        while pos + RECORDS_OFFSET <= region.length:
            head = os.pread(fd, RECORDS_OFFSET, region.position + pos)
            if len(head) < RECORDS_OFFSET:
                return  # truncated under us (a follower's truncation): stop here
            header = BatchHeader(head, 0)
            size = header.size
            if size < RECORDS_OFFSET or pos + size > region.length:
                return
            yield header, region.slice(pos, size)
            pos += size
