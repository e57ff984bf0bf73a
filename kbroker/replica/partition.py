"""One partition as a replica: the only door to its log.

A :class:`Partition` owns what replication and transactions need to know about a partition:

- its role (``LEADER`` or ``FOLLOWER``; a single node leads everything) and leader epoch;
- the offsets ``log_start_offset <= last_stable_offset <= high_watermark <= log_end_offset``.
  The log moves its start and end; the high watermark (HW) is decided here, from the log end
  offsets of the in-sync replicas (``isr``), and written through to the log, whose retention and
  DeleteRecords must not pass it. The last stable offset (LSO) is the HW, held back to the first
  offset of the oldest open transaction (the log's producer state; see "transactions" below);
- two kinds of waiters:
  * *commit waiters*: the future :meth:`append` returns, completed in offset order once the HW
    passes the batch's last offset (acks=all produces, coordinator writes);
  * *parked fetches*: long-poll fetches waiting for news. Consumer fetches wake when the HW or
    LSO moves, follower fetches when the log end offset moves.
- fetch bounds: consumers read below the HW, read_committed consumers below the LSO, followers
  (replica id >= 0) below the log end offset.

Single node, RF=1: the ISR is this broker alone, so an append moves the HW at once and its commit
future is already done when :meth:`append` returns. The cluster issue adds follower log end
offsets through :meth:`update_follower_end_offset` (from follower fetches) and ISR changes; the
same :meth:`maybe_advance_high_watermark` then makes acks=all wait for real.

Concurrency rule: owned by the event loop thread; no locks. Waiters are plain futures completed by
the loop; a waiter's owner removes it when it is cancelled (see :func:`wait_for_news`).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import uuid

from kbroker.log.partition_log import (EARLIEST_LOCAL_TIMESTAMP, EARLIEST_TIMESTAMP,
                                       LATEST_TIMESTAMP, AppendResult, PartitionLog, ReadResult)
from kbroker.log.producer_state import UNVERIFIED, VERIFICATION_OFF  # noqa: F401 (for handlers)
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.protocol.records import CONTROL_ABORT, CONTROL_COMMIT, build_control_batch
from kbroker.replica.followers import FOLLOWER, LEADER, FollowerState, LeaderFollowers

log = logging.getLogger("kbroker.replicas")

CONSUMER_REPLICA_ID = -1  # Fetch and ListOffsets from a client, not from a replica

# Tie-breaker for commit waiters with the same last offset (a retried idempotent batch).
_sequence = itertools.count()


class Partition(LeaderFollowers):
    __slots__ = ("topic", "index", "topic_id", "_log", "local_replica_id", "role", "leader_epoch",
                 "high_watermark", "last_stable_offset", "isr", "_follower_end_offsets",
                 "_commit_waiters", "_consumer_fetches", "_follower_fetches", "leader_id",
                 "replicas", "state_version", "controller_epoch", "leader_epoch_start_offset",
                 "_followers", "pending_isr", "isr_writer", "_isr_task")

    def __init__(self, topic: str, index: int, topic_id: uuid.UUID, log: PartitionLog,
                 leader_epoch: int = 0, local_replica_id: int = 0):
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self._log = log
        self.local_replica_id = local_replica_id
        self.role = LEADER
        self.leader_epoch = leader_epoch
        # Opening a log recovers it; on a single node everything on disk was committed.
        self.high_watermark = log.high_watermark
        self.last_stable_offset = self.high_watermark
        self._update_last_stable_offset()  # transactions left open in the log hold it back
        self.isr: frozenset[int] = frozenset((local_replica_id,))
        # Log end offset of each follower, as its fetches report it (empty on a single node).
        self._follower_end_offsets: dict[int, int] = {}
        # Heap of (last offset, sequence, future): completed when the HW passes the last offset.
        self._commit_waiters: list[tuple[int, int, asyncio.Future]] = []
        self._consumer_fetches: set[asyncio.Future] = set()
        self._follower_fetches: set[asyncio.Future] = set()
        # Cluster state (a single node keeps these defaults: it leads alone at epoch 0).
        self.leader_id = local_replica_id
        self.replicas: tuple[int, ...] = (local_replica_id,)
        self.state_version = 0  # the partition state znode version the ISR was read at
        self.controller_epoch = 0
        self.leader_epoch_start_offset: int | None = None  # LEO when this leader epoch began
        self._followers: dict[int, FollowerState] = {}  # leader: what each follower fetched
        # An ISR change sent through ``isr_writer`` and not yet answered; meanwhile the HW is
        # computed over ISR | pending (Kafka's "maximal ISR"), so an expansion in flight counts
        # the new member and a shrink in flight still waits for the leaving one.
        self.pending_isr: frozenset[int] | None = None
        # async (topic, index, proposed PartitionState) -> PartitionState written; set by the
        # replica manager in a cluster. Any exception means "lost": the next image decides.
        self.isr_writer = None
        self._isr_task: asyncio.Task | None = None

    def __repr__(self) -> str:
        return (f"Partition({self.topic}-{self.index}, {self.role}, epoch={self.leader_epoch}, "
                f"start={self.log_start_offset}, lso={self.last_stable_offset}, "
                f"hw={self.high_watermark}, end={self.log_end_offset})")

    # --- offsets -------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log.log_end_offset

    @property
    def size_in_bytes(self) -> int:
        """Bytes of all segment files (DescribeLogDirs)."""
        return self._log.size_in_bytes

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """Kafka's fencing of requests that carry the client's view of the leader epoch."""
        if current_leader_epoch < 0:
            return
        if current_leader_epoch < self.leader_epoch:
            raise KafkaError(Errors.FENCED_LEADER_EPOCH,
                             f"leader epoch {current_leader_epoch} is older than "
                             f"{self.leader_epoch} for {self.topic}-{self.index}")
        if current_leader_epoch > self.leader_epoch:
            raise KafkaError(Errors.UNKNOWN_LEADER_EPOCH,
                             f"leader epoch {current_leader_epoch} is newer than "
                             f"{self.leader_epoch} for {self.topic}-{self.index}")

    def check_min_insync_replicas(self) -> None:
        """An acks=all produce needs at least ``min.insync.replicas`` in the ISR (Kafka's
        Partition.appendRecordsToLeader); NOT_ENOUGH_REPLICAS otherwise, nothing appended.
        A non-leader answers NOT_LEADER_OR_FOLLOWER first, as Kafka does."""
        self._require_leader()
        required = self._log.config.min_insync_replicas
        if len(self.isr) < required:
            raise KafkaError(Errors.NOT_ENOUGH_REPLICAS,
                             f"The size of the current ISR : {len(self.isr)} is insufficient to "
                             f"satisfy the min.isr requirement of {required} for partition "
                             f"{self.topic}-{self.index}")

    def _require_leader(self) -> None:
        if self.role != LEADER:
            raise KafkaError(Errors.NOT_LEADER_OR_FOLLOWER,
                             f"this broker is not the leader of {self.topic}-{self.index}")

    # --- the high watermark and the last stable offset -----------------------------------------

    def maybe_advance_high_watermark(self) -> bool:
        """Move the HW to the smallest log end offset in the ISR if that is higher; complete the
        commit waiters it passes (in offset order) and wake consumer fetches. True if it moved.

        Called after every append (alone in the ISR, the HW follows the log end offset) and, in a
        cluster, after a follower fetch moves that follower's log end offset."""
        if self.role != LEADER:
            return False
        new_high_watermark = self._log.log_end_offset
        isr = self.isr if self.pending_isr is None else self.isr | self.pending_isr
        if len(isr) > 1:
            # A member that has not fetched in this leader epoch holds the HW (Kafka starts
            # every remote replica's log end offset unknown when leadership changes).
            ends = self._follower_end_offsets
            for replica_id in isr:
                if replica_id != self.local_replica_id:
                    end_offset = ends.get(replica_id, -1)
                    if end_offset < new_high_watermark:
                        new_high_watermark = end_offset
        if new_high_watermark <= self.high_watermark:
            return False
        self.high_watermark = new_high_watermark
        self._log.high_watermark = new_high_watermark
        self._update_last_stable_offset()
        self._complete_commit_waiters()
        if self._consumer_fetches:
            _wake(self._consumer_fetches)
        return True

    def _complete_commit_waiters(self) -> None:
        """Complete the waiters the HW passed. As Kafka's checkEnoughReplicasReachOffset: if the
        ISR shrank below ``min.insync.replicas`` meanwhile, the write is on the replicas that
        are left but not as safe as asked: NOT_ENOUGH_REPLICAS_AFTER_APPEND."""
        waiters = self._commit_waiters
        high_watermark = self.high_watermark
        error = None
        required = self._log.config.min_insync_replicas
        if waiters and waiters[0][0] < high_watermark and len(self.isr) < required:
            error = KafkaError(Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                               f"the ISR of {self.topic}-{self.index} has {len(self.isr)} "
                               f"replica(s), below min.insync.replicas={required}")
        while waiters and waiters[0][0] < high_watermark:
            future = heapq.heappop(waiters)[2]
            if not future.done():
                if error is None:
                    future.set_result(None)
                else:
                    future.set_exception(error)
                    future.exception()  # an acks=1 produce never awaits it

    def _update_last_stable_offset(self) -> None:
        # Records below the HW are decided unless an open transaction holds them back.
        first_unstable = self._log.first_unstable_offset
        if first_unstable is None or first_unstable >= self.high_watermark:
            self.last_stable_offset = self.high_watermark
        else:
            self.last_stable_offset = first_unstable

    def update_follower_end_offset(self, replica_id: int, log_end_offset: int) -> None:
        """A follower's fetch showed it holds everything below ``log_end_offset``."""
        self._follower_end_offsets[replica_id] = log_end_offset
        self.maybe_advance_high_watermark()

    def update_isr(self, isr) -> None:
        """Take a new in-sync replica set (this broker's id stays in it while it leads); the HW
        may move when a lagging replica leaves, never back."""
        self.isr = frozenset(isr) | {self.local_replica_id}
        self.maybe_advance_high_watermark()

    # --- leadership (from metadata images) -----------------------------------------------------

    def make_unattached(self) -> None:
        """Cluster mode, before the first state is applied: neither leader nor follower of any
        epoch, so the image's state (whatever its epoch) is news."""
        self.role = FOLLOWER
        self.leader_id = -1
        self.leader_epoch = -1
        self._update_last_stable_offset()

    def is_stale(self, state) -> bool:
        """A state from before this partition's leader epoch: an old image, ignored (fencing)."""
        return state.leader_epoch < self.leader_epoch

    def make_leader(self, state, replicas, now_ms: int) -> bool:
        """Become (or stay) leader as ``state`` (an image's PartitionState) says. True when this
        is a new leadership (a new epoch, or a follower promoted); False for an ISR-only update
        or a stale state (older leader epoch: ignored, Kafka's leader epoch fencing)."""
        if self.is_stale(state):
            return False
        self.replicas = tuple(replicas)
        new_leadership = self.role != LEADER or state.leader_epoch > self.leader_epoch
        if not new_leadership:
            self._take_isr(state)
            self.maybe_advance_high_watermark()
            return False
        self.role = LEADER
        self.leader_id = self.local_replica_id
        self.leader_epoch = state.leader_epoch
        self.controller_epoch = state.controller_epoch
        self.isr = frozenset(state.isr) | {self.local_replica_id}
        self.state_version = state.version
        self.pending_isr = None
        end = self._log.log_end_offset
        self.leader_epoch_start_offset = end
        # OffsetsForLeaderEpoch of the last epoch must answer where this one begins (KIP-101),
        # even before this leader appends anything.
        cache = self._log.leader_epoch_cache
        if cache.latest_epoch is None or cache.latest_epoch < state.leader_epoch:
            # Not fsynced here (10,000 leaderships after a failover would cost 20,000 fsyncs):
            # no data of this epoch exists yet; the cache is made durable before any is flushed
            # (PartitionLog.flush), and recovery re-reads the epochs of data past the recovery
            # point from its batches, as Kafka's does (KAFKA-15046 took these fsyncs out too).
            cache.assign(state.leader_epoch, end, durable=False)
        # Every follower starts unknown: in-sync ones as caught up now, the others never.
        self._follower_end_offsets = {}
        self._followers = {r: FollowerState(now_ms if r in self.isr else 0)
                           for r in self.replicas if r != self.local_replica_id}
        self._update_last_stable_offset()
        self.maybe_advance_high_watermark()
        return True

    def make_follower(self, state, replicas) -> bool:
        """Follow ``state.leader`` (-1: nobody leads yet). True when the leader or epoch changed
        (the fetcher must restart and truncate), False for an ISR-only update or a stale
        state. Commit waiters fail with NOT_LEADER_OR_FOLLOWER, as Kafka completes the delayed
        produces of a partition it stops leading; parked fetches wake to see the error."""
        if self.is_stale(state):
            return False
        self.replicas = tuple(replicas)
        changed = (self.role != FOLLOWER or state.leader_epoch > self.leader_epoch
                   or state.leader != self.leader_id)
        if not changed:
            self._take_isr(state)
            return False
        self.role = FOLLOWER
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.controller_epoch = state.controller_epoch
        self.leader_epoch_start_offset = None
        self._follower_end_offsets = {}
        self._followers = {}
        self.pending_isr = None
        self._take_isr(state)
        self._fail_commit_waiters(f"this broker no longer leads {self.topic}-{self.index}")
        _wake(self._consumer_fetches)
        _wake(self._follower_fetches)
        return True

    def _take_isr(self, state) -> None:
        if state.version < self.state_version:
            return  # an image older than an ISR write this leader already saw succeed
        self.isr = frozenset(state.isr)
        self.state_version = state.version
        self.controller_epoch = state.controller_epoch
        if self.role == LEADER:
            self.isr |= {self.local_replica_id}
            if self.pending_isr is not None and self._isr_task is None:
                self.pending_isr = None

    # --- writes --------------------------------------------------------------------------------

    def append(self, records, now_ms: int, *, from_client: bool = True,
               verification=VERIFICATION_OFF,
               transaction_version: int = 0) -> tuple[AppendResult, asyncio.Future]:
        """Append one batch as leader; a writable ``records`` buffer is stamped in place.

        Returns ``(result, committed)`` once the batch is on the log: the append result, and a
        future that completes when the HW passes the batch's last offset (done already when this
        broker is the whole ISR). Raises KafkaError, with nothing written, for a bad batch.
        ``verification`` is the guard from :meth:`start_verification` for a transactional batch
        the coordinator confirmed (UNVERIFIED when nobody asked it)."""
        self._require_leader()
        log = self._log
        result = log.append_as_leader(records, self.leader_epoch, now_ms, in_place=True,
                                      from_client=from_client, verification=verification,
                                      transaction_version=transaction_version)
        log.flush_if_needed(now_ms)
        if not result.duplicate:
            if self._follower_fetches:
                _wake(self._follower_fetches)
            self.maybe_advance_high_watermark()
        committed = asyncio.get_running_loop().create_future()
        if result.last_offset < self.high_watermark:
            committed.set_result(None)
        else:  # a retried idempotent batch can be older than waiters already queued: a heap
            heapq.heappush(self._commit_waiters, (result.last_offset, next(_sequence), committed))
        return result, committed

    def append_as_follower(self, records, leader_high_watermark: int,
                           leader_log_start_offset: int = -1) -> int:
        """Append what the leader sent and take its HW (bounded by our log end offset) and its
        log start offset (bounded by our HW), as Kafka's ReplicaFetcherThread does; returns
        the bytes appended."""
        if self.role != FOLLOWER:
            raise KafkaError(Errors.NOT_LEADER_OR_FOLLOWER,
                             f"{self.topic}-{self.index} is not a follower here")
        appended = self._log.append_as_follower(records) if records else 0
        self.update_follower_high_watermark(leader_high_watermark)
        if self._log.log_start_offset < leader_log_start_offset <= self.high_watermark:
            # Retention or DeleteRecords on the leader: the follower drops the same prefix.
            self._log.delete_records_before(leader_log_start_offset)
        return appended

    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        new = min(leader_high_watermark, self._log.log_end_offset)
        if new > self.high_watermark:
            self.high_watermark = new
            self._log.high_watermark = new
            self._update_last_stable_offset()
            if self._consumer_fetches:  # consumers reading from this follower (KIP-392)
                _wake(self._consumer_fetches)

    def truncate_to(self, offset: int) -> None:
        """A follower's log diverged from its leader's: cut it back to ``offset`` (KIP-101)."""
        if offset < self._log.log_end_offset:
            log.info("%s-%d: truncating from %d to %d (leader epoch %d)", self.topic,
                     self.index, self._log.log_end_offset, offset, self.leader_epoch)
        # Also at or past the end: the log drops an epoch it began there without data.
        self._log.truncate_to(offset)
        self.high_watermark = min(self.high_watermark, self._log.log_end_offset)
        self._update_last_stable_offset()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """The leader's log starts past ours: drop everything and start at ``offset``."""
        log.info("%s-%d: starting over at the leader's log start offset %d", self.topic,
                 self.index, offset)
        self._log.truncate_fully_and_start_at(offset)
        self.high_watermark = self._log.log_end_offset
        self._log.high_watermark = self.high_watermark
        self._update_last_stable_offset()

    def diverging_epoch(self, fetch_offset: int, last_fetched_epoch: int):
        """Fetch v12+ with ``last_fetched_epoch``: ``(epoch, end offset)`` where the fetcher's
        log leaves this one (it must truncate there), or None when it does not diverge. As
        Kafka's Partition.fetchRecords: OFFSET_OUT_OF_RANGE when this log knows no epoch at or
        below the fetcher's."""
        epoch, end = self._log.leader_epoch_cache.end_offset_for(last_fetched_epoch,
                                                                 self._log.log_end_offset)
        if epoch < 0 or end < 0:
            raise KafkaError(Errors.OFFSET_OUT_OF_RANGE,
                             f"{self.topic}-{self.index} has no leader epoch at or below "
                             f"{last_fetched_epoch}")
        if epoch < last_fetched_epoch or end < fetch_offset:
            return epoch, end
        return None

    def last_offset_for_leader_epoch(self, current_leader_epoch: int, leader_epoch: int):
        """OffsetForLeaderEpoch on the leader: ``(epoch, end offset)`` of the largest epoch
        <= ``leader_epoch`` (-1, -1 when unknown), after fencing ``current_leader_epoch``."""
        self.check_leader_epoch(current_leader_epoch)
        self._require_leader()
        return self._log.leader_epoch_cache.end_offset_for(leader_epoch,
                                                           self._log.log_end_offset)

    @property
    def latest_epoch(self) -> int | None:
        """The last leader epoch in this replica's log (its leader-epoch checkpoint)."""
        return self._log.leader_epoch_cache.latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """``(epoch, end offset)`` of the largest epoch <= ``epoch`` in this log (Kafka's
        LeaderEpochFileCache.endOffsetFor); (-1, -1) when unknown."""
        return self._log.leader_epoch_cache.end_offset_for(epoch, self._log.log_end_offset)

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: make ``offset`` (-1: the HW) the log start offset and delete the
        segments below it; returns the new log start offset. OFFSET_OUT_OF_RANGE past the HW."""
        self._require_leader()
        if offset < -1:
            raise KafkaError(Errors.OFFSET_OUT_OF_RANGE,
                             f"Cannot increment the log start offset to {offset} of partition "
                             f"{self.topic}-{self.index}: it is negative")
        return self._log.delete_records_before(offset)

    def delete_old_segments(self, now_ms: int) -> int:
        """Retention (never past the HW); the number of segments deleted."""
        return self._log.delete_old_segments(now_ms)

    def flush_if_needed(self, now_ms: int) -> bool:
        """Kafka's ``flush.messages`` / ``flush.ms`` policy."""
        return self._log.flush_if_needed(now_ms)

    def flush(self) -> None:
        self._log.flush()

    def update_log_config(self, config) -> None:
        """A topic config change the controller published (retention, segment size, ...)."""
        self._log.config = config

    @property
    def log(self) -> PartitionLog:
        """The partition's current log (the log-dir mover copies from it)."""
        return self._log

    def replace_log(self, moved: PartitionLog) -> None:
        """The log moved to another log dir (:mod:`kbroker.replica.log_dir_mover`): the copy,
        holding the same batches up to the same log end offset, serves from now on."""
        moved.config = self._log.config
        moved.high_watermark = self.high_watermark
        self._log = moved
        self._update_last_stable_offset()

    # --- reads ---------------------------------------------------------------------------------

    def fetch_bound(self, replica_id: int = CONSUMER_REPLICA_ID,
                    read_committed: bool = False) -> int:
        """The first offset a fetcher may not see: a follower's is the log end offset, a
        read_committed consumer's the LSO, any other consumer's the HW."""
        if replica_id >= 0:
            return self._log.log_end_offset
        return self.last_stable_offset if read_committed else self.high_watermark

    def read(self, fetch_offset: int, max_bytes: int, min_one_message: bool = True, *,
             read_committed: bool = False, replica_id: int = CONSUMER_REPLICA_ID,
             follower_may_serve: bool = False) -> ReadResult:
        """Whole batches from ``fetch_offset`` below the fetcher's bound (:meth:`fetch_bound`),
        as file regions; OFFSET_OUT_OF_RANGE outside the log. A follower serves consumers only
        with ``follower_may_serve`` (KIP-392, a replica selector is configured), below its HW."""
        if not (follower_may_serve and replica_id < 0 and self.role == FOLLOWER):
            self._require_leader()
        return self._log.read(fetch_offset, max_bytes,
                              self.fetch_bound(replica_id, read_committed), min_one_message)

    def offset_for_timestamp(self, timestamp: int, read_committed: bool = False,
                             replica_id: int = CONSUMER_REPLICA_ID):
        """ListOffsets: ``(offset, timestamp, leader_epoch)`` for a timestamp or a special value
        (-1 latest, -2 earliest, -3 max timestamp, -4 earliest local, -5 latest tiered), or None
        when no record qualifies. As Kafka's Partition.fetchOffsetForTimestamp: "latest" is the
        fetch bound with the current leader epoch; earliest comes from the log as is; anything
        else the log finds is hidden (None) unless it lies below the fetch bound."""
        self._require_leader()
        if replica_id != CONSUMER_REPLICA_ID:  # a replica, or a debugging tool (-2)
            bound = self._log.log_end_offset
        else:
            bound = self.last_stable_offset if read_committed else self.high_watermark
        if timestamp == LATEST_TIMESTAMP:
            return bound, -1, self.leader_epoch
        if timestamp == EARLIEST_LOCAL_TIMESTAMP:
            # Without tiered storage Kafka's UnifiedLog answers it exactly as EARLIEST.
            timestamp = EARLIEST_TIMESTAMP
        found = self._log.fetch_offset_by_timestamp(timestamp)
        if timestamp == EARLIEST_TIMESTAMP or found is None:
            return found
        return found if found[0] < bound else None

    # --- transactions --------------------------------------------------------------------------

    def append_txn_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                          commit: bool, now_ms: int,
                          transaction_version: int = 0) -> tuple[AppendResult, asyncio.Future]:
        """Write a COMMIT or ABORT marker for the producer's transaction (WriteTxnMarkers): the
        log closes the transaction, indexes an abort, and the LSO moves past it once the HW
        does. Raises KafkaError (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED, ...).
        ``transaction_version`` 2: the coordinator bumped the epoch for this marker."""
        batch = build_control_batch(CONTROL_COMMIT if commit else CONTROL_ABORT, producer_id,
                                    producer_epoch, coordinator_epoch, timestamp_ms=now_ms)
        before = self.last_stable_offset
        result = self.append(bytearray(batch), now_ms, from_client=False,
                             transaction_version=transaction_version)
        self._update_last_stable_offset()
        if self.last_stable_offset != before and self._consumer_fetches:
            _wake(self._consumer_fetches)
        return result

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list:
        """Aborted transactions a read_committed fetch from ``fetch_offset`` must skip:
        ``[(producer_id, first_offset)]`` overlapping ``[fetch_offset, upper_bound)``."""
        return [(t.producer_id, t.first_offset)
                for t in self._log.collect_aborted_txns(fetch_offset, upper_bound)]

    def start_verification(self, producer_id: int, sequence: int, epoch: int,
                           supports_epoch_bump: bool, now_ms: int):
        """KIP-890: a transactional batch is about to be confirmed with the transaction
        coordinator. The guard its append must bring back, or None when the producer's
        transaction is open here already (nothing to confirm). Raises INVALID_PRODUCER_EPOCH for
        a zombie epoch (:mod:`kbroker.log.producer_state`)."""
        self._require_leader()
        return self._log.producer_state.start_verification(producer_id, sequence, epoch,
                                                           supports_epoch_bump, now_ms)

    def active_producers(self) -> list:
        """The producer state entries of this partition's log (DescribeProducers): each has
        ``producer_id``, ``producer_epoch``, ``last_seq``, ``last_timestamp``,
        ``coordinator_epoch`` and ``current_txn_first_offset``. Read only."""
        return list(self._log.producer_state.producers.values())

    # --- parked fetches ------------------------------------------------------------------------

    def park_fetch(self, waiter: asyncio.Future, replica_id: int = CONSUMER_REPLICA_ID) -> None:
        """Complete ``waiter`` (with True) on news for this fetcher: a follower wakes when the log
        end offset moves, a consumer when the HW or LSO moves. The owner must unpark it."""
        (self._follower_fetches if replica_id >= 0 else self._consumer_fetches).add(waiter)

    def unpark_fetch(self, waiter: asyncio.Future, replica_id: int = CONSUMER_REPLICA_ID) -> None:
        (self._follower_fetches if replica_id >= 0 else self._consumer_fetches).discard(waiter)

    @property
    def parked_fetches(self) -> int:
        return len(self._consumer_fetches) + len(self._follower_fetches)

    @property
    def pending_commits(self) -> int:
        return len(self._commit_waiters)

    # --- removal -------------------------------------------------------------------------------

    def on_removed(self) -> None:
        """The partition is gone (topic deleted): parked fetches wake (their next read answers
        with the error) and commit waiters fail with NOT_LEADER_OR_FOLLOWER, as Kafka completes
        delayed produces of a partition it stops leading."""
        self.role = FOLLOWER
        self.leader_id = -1
        if self._isr_task is not None:
            self._isr_task.cancel()
            self._isr_task = None
        _wake(self._consumer_fetches)
        _wake(self._follower_fetches)
        self._fail_commit_waiters(f"{self.topic}-{self.index} was removed")

    def _fail_commit_waiters(self, why: str) -> None:
        waiters, self._commit_waiters = self._commit_waiters, []
        for _, _, future in waiters:
            if not future.done():
                future.set_exception(KafkaError(Errors.NOT_LEADER_OR_FOLLOWER, why))
                # Nobody need await it (an acks=1 produce drops it): keep asyncio from logging
                # "exception was never retrieved".
                future.exception()


def _wake(waiters: set) -> None:
    if waiters:
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(True)
        waiters.clear()


async def wait_for_news(partitions, timeout_s: float,
                        replica_id: int = CONSUMER_REPLICA_ID) -> bool:
    """Park a long-poll fetch on ``partitions`` until one of them has news (True) or
    ``timeout_s`` passes (False). Cancelling the caller, as a closed connection does, unparks it
    from every partition at once."""
    loop = asyncio.get_running_loop()
    woken = loop.create_future()
    for partition in partitions:
        partition.park_fetch(woken, replica_id)
    timer = loop.call_later(timeout_s, _expire, woken)
    try:
        return await woken
    finally:
        timer.cancel()
        for partition in partitions:
            partition.unpark_fetch(woken, replica_id)


def _expire(waiter: asyncio.Future) -> None:
    if not waiter.done():
        waiter.set_result(False)
