"""The registry's state on a broker that holds a follower replica of ``_schemas-0``: read-only,
replayed from the local replica up to its high watermark, so reads are served where they arrive
(as Confluent's followers serve them from their own copy of the topic).

The view catches up lazily, on the read that needs it: it replays what the replica committed
since the last read (nothing, usually: a comparison of two offsets). It reads below the high
watermark only, so it never shows a write that is later undone. The service reads it only while
the replica is in the ISR and its log end equals its high watermark (it then holds every
acknowledged write), and forwards a read whose answer is "not found" to the leader
(kbroker.schema_registry.service).
"""

from __future__ import annotations

from kbroker.coordinator.runtime import replay_chunk
from kbroker.schema_registry.store import RegistryShard


class ReplicaView:
    def __init__(self, runtime, partition_index: int, defaults):
        self.runtime = runtime
        self.partition_index = partition_index
        self.defaults = defaults
        self.shard: RegistryShard | None = None
        self.next_offset = 0
        self._partition = None

    def current(self, partition) -> RegistryShard:
        """The view, caught up with ``partition`` (this broker's follower replica)."""
        if self.shard is None or partition is not self._partition or \
                self.next_offset < partition.log_start_offset:
            self._reset(partition)  # a new replica object (it became a follower again), or
            # records below what we read were deleted: replay from the start
        while self.next_offset < partition.high_watermark:
            next_offset, _ = replay_chunk(self.shard, partition, self.next_offset,
                                          follower_may_serve=True)
            if next_offset is None:
                break
            self.next_offset = next_offset
        return self.shard

    def _reset(self, partition) -> None:
        self.shard = RegistryShard(self.runtime, self.partition_index, self.defaults)
        self.shard.loading = False
        self._partition = partition
        self.next_offset = partition.log_start_offset

    def drop(self) -> None:
        self.shard = None
        self._partition = None
