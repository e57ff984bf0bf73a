"""ShareShard: the share partitions' states kept in one ``__share_group_state`` partition.

Durable state changes only in :meth:`ShareShard.replay` (Kafka's ShareCoordinatorShard.replay):
a ShareSnapshot record is a share partition's whole state; a ShareUpdate record carries the
batches that changed and is merged into the state held so far (``combiner.combine``); a
tombstone forgets the partition. Beside the states the shard keeps, per share partition, the
highest leader and state epochs seen (for fencing) and how many updates followed the last
snapshot (a write past ``share.coordinator.snapshot.update.records.per.snapshot`` of them is
written as a new snapshot), and where each one's latest snapshot is (records below the oldest
of those can be pruned). Every value is immutable and every map a timeline map
(:mod:`kbroker.coordinator.timeline`): a write that is not committed is reverted entry by entry.
"""

from __future__ import annotations

import logging

from kbroker.coordinator.runtime import Shard
from kbroker.coordinator.share import records as rec
from kbroker.coordinator.share.combiner import combine
from kbroker.coordinator.share.records import ShareState
from kbroker.coordinator.timeline import TimelineValue

log = logging.getLogger("kbroker.coordinator.share")
_NONE = 2**63 - 1  # no redundant offset known yet


class ShareShard(Shard):
    def __init__(self, runtime, partition_index: int, updates_per_snapshot: int):
        super().__init__(runtime, partition_index)
        self.updates_per_snapshot = updates_per_snapshot
        self.states: dict = self.timeline_dict()  # SharePartitionKey -> ShareState
        self.leader_epochs: dict = self.timeline_dict()
        self.state_epochs: dict = self.timeline_dict()
        self.update_counts: dict = self.timeline_dict()
        # Pruning (Kafka's ShareCoordinatorOffsetsManager): the offset of each live share
        # partition's latest snapshot; everything below the smallest is no longer needed.
        self.snapshot_offsets: dict = self.timeline_dict()
        self._redundant_offset = TimelineValue(self.timeline, _NONE)

    def replay(self, offset: int, key: bytes, value: bytes | None) -> None:
        try:
            record = rec.decode(key, value)
        except Exception as exc:  # a damaged record must not stop the load of its neighbours
            log.warning("skipping an unreadable record at offset %d of %s-%d: %s", offset,
                        self.runtime.topic, self.partition_index, exc)
            return
        if record is None:
            return
        k, v = record.key, record.value
        if record.record_type == rec.SNAPSHOT_TYPE:
            self._snapshot_at(k, offset, deleted=v is None)
            if v is None:
                for m in (self.states, self.leader_epochs, self.state_epochs,
                          self.update_counts):
                    m.pop(k, None)
                return
            self._raise_epoch(self.leader_epochs, k, v.leader_epoch)
            self._raise_epoch(self.state_epochs, k, v.state_epoch)
            self.states[k] = ShareState(v.snapshot_epoch, v.state_epoch, v.leader_epoch,
                                        v.start_offset, v.delivery_complete_count,
                                        rec.batches_of(v), v.create_timestamp, v.write_timestamp)
            # As Kafka: the count restarts only when it had reached the limit (a snapshot
            # written by a write); an initialize's snapshot leaves it be.
            if k in self.update_counts and self.update_counts[k] >= self.updates_per_snapshot:
                self.update_counts[k] = 0
            return
        if v is None:
            return  # Kafka writes no ShareUpdate tombstones
        self._raise_epoch(self.leader_epochs, k, v.leader_epoch)
        current = self.states.get(k)
        if current is None:
            # An update without a snapshot before it (the snapshot was pruned or never
            # written): it is the whole state known, without a state epoch.
            self.states[k] = ShareState(v.snapshot_epoch, 0, v.leader_epoch, v.start_offset,
                                        v.delivery_complete_count, rec.batches_of(v))
        else:
            start = current.start_offset if v.start_offset == -1 else v.start_offset
            self.states[k] = ShareState(
                current.snapshot_epoch, current.state_epoch,
                current.leader_epoch if v.leader_epoch == -1 else v.leader_epoch,
                start, v.delivery_complete_count,
                tuple(combine(current.batches, rec.batches_of(v), start)),
                current.create_timestamp, current.write_timestamp)
        self.update_counts[k] = self.update_counts.get(k, 0) + 1

    def _snapshot_at(self, key, offset: int, deleted: bool) -> None:
        """A snapshot (or a deletion) of ``key`` at ``offset``: records before the oldest latest
        snapshot of all share partitions here are redundant. A deleted partition counts once,
        then no longer holds the others back."""
        self.snapshot_offsets[key] = offset
        self._redundant_offset.set(min(self.snapshot_offsets.values()))
        if deleted:
            del self.snapshot_offsets[key]

    def last_redundant_offset(self) -> int | None:
        """The offset below which the partition may be pruned, or None (nothing to prune)."""
        value = self._redundant_offset.get()
        return None if value <= 0 or value == _NONE else value

    @staticmethod
    def _raise_epoch(epochs: dict, key, epoch: int) -> None:
        if epochs.get(key, epoch) <= epoch:
            epochs[key] = epoch

    def durable_state(self):
        return (dict(self.states), dict(self.leader_epochs), dict(self.state_epochs),
                dict(self.update_counts), dict(self.snapshot_offsets),
                self._redundant_offset.get())
