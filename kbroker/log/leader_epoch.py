"""Leader epoch cache: which leader epoch started at which offset (Kafka's LeaderEpochFileCache).

Entries ``(epoch, start_offset)`` are kept ascending in both fields and persisted to the partition's
``leader-epoch-checkpoint`` (format in :mod:`kbroker.log.checkpoint`) on every change, with an
fsync, except the epoch a new leadership starts at the log end (thousands at once when a large
topic is created or a broker's partitions fail over), which is written through without one:
no data of that epoch exists yet, :meth:`LeaderEpochCache.sync` makes it durable before any is
flushed (``PartitionLog.flush``), and recovery re-reads the epochs of unflushed data from its
batches. They answer
OffsetsForLeaderEpoch (:meth:`end_offset_for`), ListOffsets' leader epochs, and tell a truncating
follower where its history diverges.
"""

from __future__ import annotations

import bisect
import os

from kbroker.log.checkpoint import (LEADER_EPOCH_CHECKPOINT, read_leader_epoch_checkpoint,
                                    write_leader_epoch_checkpoint)

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, dir_path: str | None, entries: list[tuple[int, int]] | None = None):
        self.path = os.path.join(dir_path, LEADER_EPOCH_CHECKPOINT) if dir_path else None
        self._epochs: list[int] = []
        self._starts: list[int] = []
        self._unsynced = False  # written without an fsync since the last durable write
        for epoch, start in entries or ():
            self._epochs.append(epoch)
            self._starts.append(start)

    @classmethod
    def load(cls, dir_path: str) -> "LeaderEpochCache":
        return cls(dir_path, read_leader_epoch_checkpoint(os.path.join(dir_path,
                                                                       LEADER_EPOCH_CHECKPOINT)))

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts))

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    @property
    def earliest_entry(self) -> tuple[int, int] | None:
        return (self._epochs[0], self._starts[0]) if self._epochs else None

    def assign(self, epoch: int, start_offset: int, durable: bool = True) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (a batch of a new epoch was appended).

        Entries that the new one contradicts (an epoch >= it, or a start offset >= it) are dropped,
        as Kafka does, so the cache stays ascending in both fields. ``durable=False`` (only for
        an epoch starting at the log end) leaves the fsync to :meth:`sync`."""
        if epoch < 0:
            return
        if self._epochs and self._epochs[-1] == epoch and self._starts[-1] <= start_offset:
            return
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            self._epochs.pop()
            self._starts.pop()
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        self.flush(durable)

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch of the leader that wrote ``offset`` (the entry starting at or below it)."""
        i = bisect.bisect_right(self._starts, offset)
        return self._epochs[i - 1] if i else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """``(epoch, end offset)`` for OffsetsForLeaderEpoch: the start offset of the first epoch
        above ``requested_epoch``, paired with the largest known epoch <= it (Kafka's
        ``endOffsetFor``)."""
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._epochs[-1]:
            return requested_epoch, log_end_offset
        higher = bisect.bisect_right(self._epochs, requested_epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._starts[0]
        return self._epochs[higher - 1], self._starts[higher]

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or above ``end_offset`` (the log was truncated to it)."""
        n = bisect.bisect_left(self._starts, end_offset)
        if n < len(self._starts):
            del self._epochs[n:], self._starts[n:]
            self.flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: drop entries wholly below it and move the
        epoch that covers it to start there."""
        i = bisect.bisect_right(self._starts, start_offset)
        if i == 0 or (i == 1 and self._starts[0] == start_offset):
            return
        epoch = self._epochs[i - 1]
        del self._epochs[:i], self._starts[:i]
        self._epochs.insert(0, epoch)
        self._starts.insert(0, start_offset)
        self.flush()

    def clear(self) -> None:
        self._epochs.clear()
        self._starts.clear()
        self.flush()

    def flush(self, durable: bool = True) -> None:
        if self.path is not None:
            write_leader_epoch_checkpoint(self.path, self.entries(), durable)
            self._unsynced = not durable

    def sync(self) -> None:
        """Make a write left without an fsync durable (before the log's data is)."""
        if self._unsynced:
            self.flush()
