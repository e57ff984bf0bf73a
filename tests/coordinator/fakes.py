"""Test doubles for unit tests of the coordinator runtime: an in-memory partition whose commits
the test controls, and the two broker lookups the runtime makes (metadata, replicas).

The integration tests run the real Partition; here the point is to hold or fail the committed
future at will, which a single-node Partition (committed at once) cannot do.
"""

from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass

from kbroker.coordinator.runtime import CoordinatorRuntime
from kbroker.protocol.records import decode_records, iter_batches

_MAX = 64 * 1024 * 1024


@dataclass
class Appended:
    first_offset: int
    last_offset: int


@dataclass
class Region:
    data: bytes

    def read(self) -> bytes:
        return self.data


@dataclass
class Read:
    regions: list


class FakePartition:
    """Batches kept in memory with their offsets stamped, as the log would store them.

    ``hold_commits``: committed futures stay pending until :meth:`commit` or :meth:`fail`.
    ``append_error``: the next append raises it."""

    def __init__(self):
        self.batches: list[tuple[int, int, bytes]] = []  # (first, last, stamped batch)
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.high_watermark = 0
        self.hold_commits = False
        self.append_error: Exception | None = None
        self.held: list[tuple[int, asyncio.Future]] = []

    def append(self, batch, now_ms: int):
        if self.append_error is not None:
            error, self.append_error = self.append_error, None
            raise error
        data = bytearray(batch)
        header = next(iter_batches(memoryview(data)))
        first = self.log_end_offset
        last = first + header.last_offset_delta
        struct.pack_into(">q", data, 0, first)  # base offset: outside the CRC
        self.batches.append((first, last, bytes(data)))
        self.log_end_offset = last + 1
        committed = asyncio.get_running_loop().create_future()
        if self.hold_commits:
            self.held.append((last, committed))
        else:
            self.high_watermark = self.log_end_offset
            committed.set_result(None)
        return Appended(first, last), committed

    def commit(self) -> None:
        """The high watermark reaches the log end: every held write is committed."""
        self.high_watermark = self.log_end_offset
        for _, future in self.held:
            future.set_result(None)
        self.held.clear()

    def fail(self, error: Exception) -> None:
        """Leadership lost: held writes are truncated away and their futures fail."""
        cut = self.held[0][0] if self.held else self.log_end_offset
        self.batches = [b for b in self.batches if b[1] < cut]
        self.log_end_offset = self.batches[-1][1] + 1 if self.batches else 0
        for _, future in self.held:
            future.set_exception(error)
        self.held.clear()

    def read(self, fetch_offset: int, max_bytes: int, min_one_message: bool = True, *,
             read_committed: bool = False, replica_id: int = -1) -> Read:
        data = b"".join(b for first, last, b in self.batches
                        if last >= fetch_offset and last < self.high_watermark)
        return Read([Region(data)] if data else [])

    def records(self) -> list[tuple[int, bytes, bytes | None]]:
        """(offset, key, value) of every record, in log order."""
        out = []
        for _, _, data in self.batches:
            for header in iter_batches(memoryview(data)):
                for record in decode_records(header, _MAX):
                    out.append((record.offset(header), record.key, record.value))
        return out


class _Topic:
    def __init__(self, num_partitions: int):
        self.num_partitions = num_partitions


class FakeBroker:
    """What CoordinatorRuntime asks of the broker: the controller's image of the internal topic
    (``controller.image.topic``) and its partitions (``partitions.get``)."""

    def __init__(self, topic: str, num_partitions: int = 1):
        self.partitions = {(topic, i): FakePartition() for i in range(num_partitions)}
        self.image = self
        self._topic = _Topic(num_partitions)

    def topic(self, name):
        return self._topic

    def get(self, topic, index):
        return self.partitions.get((topic, index))


def make_runtime(shard_factory, topic: str = "__test", num_partitions: int = 1):
    broker = FakeBroker(topic, num_partitions)
    runtime = CoordinatorRuntime(broker, broker, topic, num_partitions, {}, shard_factory)
    return runtime, broker
