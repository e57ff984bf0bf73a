"""One partition led by this broker."""

from __future__ import annotations

import asyncio
import uuid

from kbroker.protocol.errors import Errors, KafkaError


class Partition:
    __slots__ = ("topic", "index", "topic_id", "log", "leader_epoch", "_waiters")

    def __init__(self, topic: str, index: int, topic_id: uuid.UUID, log, leader_epoch: int = 0):
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.leader_epoch = leader_epoch
        self._waiters: set[asyncio.Future] = set()

    # --- offsets -------------------------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        # No transactions yet: every record below the high watermark is decided.
        return self.log.high_watermark

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

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

    # --- writes and reads ----------------------------------------------------------------------

    def append(self, records, now_ms: int):
        """Append one batch as leader; a writable ``records`` buffer is stamped in place.

        Returns ``(result, committed)``: the append result once the batch is on the log, and a
        future that completes when the high watermark passes the batch's last offset."""
        result = self.log.append_as_leader(records, self.leader_epoch, now_ms, in_place=True)
        # The ISR is this broker alone: an appended batch is committed at once.
        self.log.high_watermark = self.log.log_end_offset
        self.log.flush_if_needed(now_ms)
        self.wake_waiters()
        committed = asyncio.get_running_loop().create_future()
        committed.set_result(None)
        return result, committed

    def read(self, fetch_offset: int, max_bytes: int, read_committed: bool, min_one_message: bool):
        bound = self.last_stable_offset if read_committed else self.high_watermark
        return self.log.read(fetch_offset, max_bytes, bound, min_one_message)

    # --- long-poll support ---------------------------------------------------------------------

    def add_waiter(self, future: asyncio.Future) -> None:
        self._waiters.add(future)

    def remove_waiter(self, future: asyncio.Future) -> None:
        self._waiters.discard(future)

    def wake_waiters(self) -> None:
        if self._waiters:
            for future in self._waiters:
                if not future.done():
                    future.set_result(None)
            self._waiters.clear()
