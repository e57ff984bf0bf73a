"""The leader's view of its followers: their fetch positions, catching up, and the ISR.

Kafka keeps this in Partition (Replica state, ``maybeExpandIsr``, ``maybeShrinkIsr``,
``findPreferredReadReplica``); here it is a mixin of :class:`~kbroker.replica.partition.Partition`
so that the partition module stays about offsets and waiters. Rules, as Kafka's:

- a follower's fetch offset is its log end offset; it counts as *caught up* (for
  ``replica.lag.time.max.ms``) when it asked for the leader's log end offset, or for what was the
  end at its previous fetch;
- it joins the ISR once it holds everything below the HW and has fetched inside this leader's
  epoch; it leaves after ``replica.lag.time.max.ms`` without being caught up;
- ISR changes go through the injected ``isr_writer`` (a conditional write on the metadata side),
  one at a time; until it answers, the HW is computed over ISR | pending ("maximal ISR"). A
  failed write is forgotten: the next metadata image says what the ISR is.

Concurrency rule: the event loop owns it; the ISR write is the only task, one per partition.
"""

from __future__ import annotations

import asyncio

from kbroker.metadata import state_change
from kbroker.metadata.image import PartitionState
from kbroker.protocol.errors import Errors, KafkaError


LEADER = "leader"
FOLLOWER = "follower"


class FollowerState:
    """The leader's view of one follower (Kafka's Replica state): when it was last caught up,
    and the leader's log end offset and time at its previous fetch."""

    __slots__ = ("last_caught_up_ms", "last_fetch_leader_end", "last_fetch_ms")

    def __init__(self, last_caught_up_ms: int):
        self.last_caught_up_ms = last_caught_up_ms
        self.last_fetch_leader_end = -1
        self.last_fetch_ms = 0


class LeaderFollowers:
    """Mixin of Partition: everything the leader tracks about its followers."""

    __slots__ = ()

    # --- the leader's view of its followers ------------------------------------------------------

    def update_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int,
                              last_fetched_epoch: int = -1) -> None:
        """A follower fetched from ``fetch_offset``: it holds everything below it. As Kafka's
        Replica.updateFetchState: it is caught up (for the ISR lag) when it asked for the log
        end offset, or for what was the end at its previous fetch. A fetch past this log's end,
        or one whose ``last_fetched_epoch`` diverges from this log, says nothing about what the
        follower holds in common with the leader (it must truncate first): ignored, as Kafka
        only updates the follower's state after a read without divergence."""
        self._require_leader()
        if replica_id not in self.replicas or replica_id == self.local_replica_id:
            raise KafkaError(Errors.NOT_LEADER_OR_FOLLOWER,
                             f"Replica with id {replica_id} is not available on broker "
                             f"{self.local_replica_id} for {self.topic}-{self.index}")
        end = self._log.log_end_offset
        if fetch_offset > end:
            return
        # A follower at the log end in the latest epoch cannot diverge (the check below would
        # find that epoch ending at the log end): skipped, since every session partition of
        # every fetch comes through here.
        if last_fetched_epoch >= 0 and not (
                fetch_offset == end
                and last_fetched_epoch == self._log.leader_epoch_cache.latest_epoch):
            try:
                if self.diverging_epoch(fetch_offset, last_fetched_epoch) is not None:
                    return
            except KafkaError:  # no common epoch: the read answers OFFSET_OUT_OF_RANGE
                return
        follower = self._followers.get(replica_id)
        if follower is None:
            follower = self._followers[replica_id] = FollowerState(0)
        if fetch_offset >= end:
            follower.last_caught_up_ms = max(follower.last_caught_up_ms, now_ms)
        elif fetch_offset >= follower.last_fetch_leader_end:
            follower.last_caught_up_ms = max(follower.last_caught_up_ms,
                                             follower.last_fetch_ms)
        follower.last_fetch_leader_end = end
        follower.last_fetch_ms = now_ms
        self._follower_end_offsets[replica_id] = fetch_offset
        self._maybe_expand_isr(replica_id, fetch_offset)
        if self.high_watermark < end:  # else nothing can move it (it never passes the log end)
            self.maybe_advance_high_watermark()

    def preferred_read_replica(self, client_rack: str | None, rack_of) -> int | None:
        """KIP-392, Kafka's RackAwareReplicaSelector: for a consumer in ``client_rack``, the
        replica to read from instead of this leader, or None (read here). Only in-sync followers
        that hold everything below the HW qualify; the leader wins when it is in the rack, else
        the follower with the highest log end offset (then the most recently caught up)."""
        if self.role != LEADER or not client_rack or rack_of(self.local_replica_id) == client_rack:
            return None
        best = None
        for replica_id in self.replicas:
            end = self._follower_end_offsets.get(replica_id, -1)
            if (replica_id == self.local_replica_id or replica_id not in self.isr
                    or end < self.high_watermark or rack_of(replica_id) != client_rack):
                continue
            follower = self._followers.get(replica_id)
            rank = (end, follower.last_caught_up_ms if follower else 0)
            if best is None or rank > best[0]:
                best = (rank, replica_id)
        return None if best is None else best[1]

    def follower_end_offset(self, replica_id: int) -> int:
        """The log end offset the follower last reported (-1 if unknown in this epoch)."""
        return self._follower_end_offsets.get(replica_id, -1)

    def _maybe_expand_isr(self, replica_id: int, end_offset: int) -> None:
        # Kafka's isFollowerInSync: at the HW and inside this leader's epoch.
        if (replica_id in self.isr or self.pending_isr is not None or self.isr_writer is None
                or end_offset < self.high_watermark or self.leader_epoch_start_offset is None
                or end_offset < self.leader_epoch_start_offset):
            return
        state_change.isr_proposed(self.local_replica_id, self.topic, self.index, self.isr,
                                  self.isr | {replica_id},
                                  f"replica {replica_id} caught up to {end_offset}")
        self._propose_isr(self.isr | {replica_id})

    def maybe_shrink_isr(self, now_ms: int, lag_time_max_ms: int) -> bool:
        """Drop from the ISR the followers not caught up for ``replica.lag.time.max.ms`` (Kafka's
        getOutOfSyncReplicas); True when a shrink was proposed."""
        if (self.role != LEADER or self.pending_isr is not None or self.isr_writer is None
                or len(self.isr) <= 1):
            return False
        out_of_sync = {r for r in self.isr if r != self.local_replica_id
                       and now_ms - self._followers.setdefault(r, FollowerState(now_ms))
                       .last_caught_up_ms > lag_time_max_ms}
        if not out_of_sync:
            return False
        state_change.isr_proposed(self.local_replica_id, self.topic, self.index, self.isr,
                                  self.isr - out_of_sync,
                                  f"{sorted(out_of_sync)} not caught up within "
                                  f"replica.lag.time.max.ms={lag_time_max_ms}")
        self._propose_isr(self.isr - out_of_sync)
        return True

    def _propose_isr(self, isr: frozenset) -> None:
        self.pending_isr = frozenset(isr)
        proposed = PartitionState(self.local_replica_id, self.leader_epoch,
                                  tuple(sorted(isr)), self.state_version, self.controller_epoch)
        self._isr_task = asyncio.get_running_loop().create_task(
            self._write_isr(proposed), name=f"isr-{self.topic}-{self.index}")

    async def _write_isr(self, proposed) -> None:
        try:
            written = await self.isr_writer(self.topic, self.index, proposed)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the writer's failure: lost, the next image decides
            state_change.isr_not_written(self.local_replica_id, self.topic, self.index,
                                         proposed.isr, f"{exc}; waiting for the next metadata")
            if self._isr_task is not asyncio.current_task():
                return  # leadership changed meanwhile and a newer proposal owns the state
            self._isr_task = None
            if self.role == LEADER and self.leader_epoch == proposed.leader_epoch:
                self.pending_isr = None
            return
        if self._isr_task is not asyncio.current_task():
            return  # leadership changed meanwhile and a newer proposal owns the state
        self._isr_task = None
        self.pending_isr = None
        if self.role != LEADER or written.leader_epoch != self.leader_epoch:
            return
        self._take_isr(written)
        self.maybe_advance_high_watermark()
        self._complete_commit_waiters()  # the min.isr check may now fail waiters the HW passed
