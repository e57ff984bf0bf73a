"""Sparse offset and time indexes of one segment, in Kafka's file formats.

Offset index, ``<baseOffset>.index`` (Kafka's ``OffsetIndex``): a sequence of 8-byte entries::

    relative offset  int32 big-endian   last offset of an indexed batch - segment base offset
    position         int32 big-endian   byte position of that batch in the segment's .log file

Entries are strictly increasing in both fields. A lookup of offset ``o`` finds the largest entry
with offset <= ``o``; the batch holding ``o`` starts at or after its position (the entry names the
*last* offset of the batch at that position, as Kafka writes it, which DumpLogSegments checks).

Time index, ``<baseOffset>.timeindex`` (Kafka's ``TimeIndex``): 12-byte entries::

    timestamp        int64 big-endian   largest batch max-timestamp seen so far in the segment
    relative offset  int32 big-endian   last offset of the batch that carried that timestamp

Timestamps strictly increase (an entry is added only when the maximum grows). A lookup of
timestamp ``t`` finds the largest entry with timestamp <= ``t``: messages with timestamp >= ``t``
lie at or after its offset.

An entry is added every ``index.interval.bytes`` of appended log data (both indexes together).
Files are never preallocated: each entry is appended with one ``write`` and the file is always
exactly ``entries * entry size`` long. Trailing all-zero entries (a preallocated file left by an
unclean shutdown of a Kafka broker) are dropped on load. The entries are also held in memory as
``array`` columns and searched with ``bisect``.
"""

from __future__ import annotations

import bisect
import os
import struct
import sys
from array import array

from kbroker.log.file_cache import open_files

OFFSET_ENTRY = struct.Struct(">ii")
TIME_ENTRY = struct.Struct(">qi")


class CorruptIndexError(Exception):
    """An index file failed its sanity check; the segment must be rebuilt from its log."""


class _IndexFile:
    """Append-only file of fixed-size entries; its writer is opened on demand through the
    bounded cache of open files (:mod:`kbroker.log.file_cache`)."""

    entry_size = 0

    def __init__(self, path: str, base_offset: int, max_index_size: int):
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size // self.entry_size)
        self._fd: int | None = None
        self._dirty = False

    def _writer(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        open_files.touch(self)
        return self._fd

    def release_file(self) -> None:
        """Evicted from the open files cache (unflushed entries are fsynced by a later
        :meth:`flush` through a new descriptor)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _write(self, data: bytes) -> None:
        os.write(self._writer(), data)
        self._dirty = True

    def _truncate_file(self, entries: int) -> None:
        os.ftruncate(self._writer(), entries * self.entry_size)
        self._dirty = True

    def _read_file(self) -> bytes:
        try:
            with open(self.path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return b""

    def flush(self) -> None:
        if self._dirty:
            os.fsync(self._writer())
            self._dirty = False

    def close(self) -> None:
        open_files.forget(self)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def delete(self) -> None:
        self.close()
        self._dirty = False
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def rename(self, path: str) -> None:
        self.close()
        if os.path.exists(self.path):
            os.replace(self.path, path)
        self.path = path


class OffsetIndex(_IndexFile):
    entry_size = OFFSET_ENTRY.size

    def __init__(self, path: str, base_offset: int, max_index_size: int):
        super().__init__(path, base_offset, max_index_size)
        self._offsets = array("i")     # relative offsets
        self._positions = array("i")

    def load(self, log_size: int) -> None:
        """Read the file and check it (Kafka's sanity check plus positions within the log)."""
        data = self._read_file()
        if len(data) % self.entry_size:
            raise CorruptIndexError(f"{self.path}: size {len(data)} is not a multiple of "
                                    f"{self.entry_size}")
        columns = array("i", data)
        if sys.byteorder == "little":
            columns.byteswap()
        offsets, positions = columns[0::2], columns[1::2]
        n = len(offsets)
        while n and offsets[n - 1] == 0 and positions[n - 1] == 0:
            n -= 1
        if n < len(offsets):
            del offsets[n:], positions[n:]
            self._truncate_file(n)
        for i in range(n):
            if (offsets[i] < 0 or positions[i] < 0 or positions[i] >= max(log_size, 1)
                    or (i and (offsets[i] <= offsets[i - 1] or positions[i] <= positions[i - 1]))):
                raise CorruptIndexError(f"{self.path}: entry {i} ({offsets[i]}, {positions[i]}) "
                                        f"is out of order or beyond the log ({log_size} bytes)")
        self._offsets, self._positions = offsets, positions

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def is_full(self) -> bool:
        return len(self._offsets) >= self.max_entries

    def entry(self, i: int) -> tuple[int, int]:
        return self.base_offset + self._offsets[i], self._positions[i]

    def last_entry(self) -> tuple[int, int]:
        if not self._offsets:
            return self.base_offset, 0
        return self.entry(len(self._offsets) - 1)

    def append(self, offset: int, position: int) -> None:
        relative = offset - self.base_offset
        if self._offsets and (relative <= self._offsets[-1] or position <= self._positions[-1]):
            raise ValueError(f"index entry ({offset}, {position}) is not above the last entry "
                             f"{self.last_entry()} in {self.path}")
        self._offsets.append(relative)
        self._positions.append(position)
        self._write(OFFSET_ENTRY.pack(relative, position))

    def lookup(self, offset: int) -> tuple[int, int]:
        """``(offset, position)`` of the largest entry with offset <= ``offset``, else
        ``(base_offset, 0)``."""
        i = bisect.bisect_right(self._offsets, offset - self.base_offset)
        if i == 0:
            return self.base_offset, 0
        return self.base_offset + self._offsets[i - 1], self._positions[i - 1]

    def floor_position(self, position: int) -> int:
        """The largest indexed batch position <= ``position`` (0 when there is none)."""
        i = bisect.bisect_right(self._positions, position)
        return self._positions[i - 1] if i else 0

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose offset is >= ``offset``."""
        n = bisect.bisect_left(self._offsets, offset - self.base_offset)
        self.truncate_entries(n)

    def truncate_entries(self, n: int) -> None:
        if n < len(self._offsets):
            del self._offsets[n:], self._positions[n:]
            self._truncate_file(n)

    def reset(self) -> None:
        self._offsets = array("i")
        self._positions = array("i")
        self._truncate_file(0)


class TimeIndex(_IndexFile):
    entry_size = TIME_ENTRY.size

    def __init__(self, path: str, base_offset: int, max_index_size: int):
        super().__init__(path, base_offset, max_index_size)
        self._timestamps = array("q")
        self._offsets = array("i")

    def load(self) -> None:
        data = self._read_file()
        if len(data) % self.entry_size:
            raise CorruptIndexError(f"{self.path}: size {len(data)} is not a multiple of "
                                    f"{self.entry_size}")
        entries = list(TIME_ENTRY.iter_unpack(data))
        while entries and entries[-1] == (0, 0):
            entries.pop()
        if len(entries) * self.entry_size < len(data):
            self._truncate_file(len(entries))
        timestamps = array("q", (e[0] for e in entries))
        offsets = array("i", (e[1] for e in entries))
        for i in range(len(entries)):
            if offsets[i] < 0 or (i and (timestamps[i] <= timestamps[i - 1]
                                         or offsets[i] < offsets[i - 1])):
                raise CorruptIndexError(f"{self.path}: entry {i} {entries[i]} is out of order")
        self._timestamps, self._offsets = timestamps, offsets

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def is_full(self) -> bool:
        return len(self._offsets) >= self.max_entries

    def entry(self, i: int) -> tuple[int, int]:
        return self._timestamps[i], self.base_offset + self._offsets[i]

    def last_entry(self) -> tuple[int, int]:
        """``(timestamp, offset)`` of the last entry, ``(-1, base_offset)`` when empty."""
        if not self._offsets:
            return -1, self.base_offset
        return self.entry(len(self._offsets) - 1)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Add an entry if ``timestamp`` exceeds the last one (Kafka's ``maybeAppend``)."""
        if not skip_full_check and self.is_full:
            return
        if self._timestamps and timestamp <= self._timestamps[-1]:
            return
        if timestamp < 0:
            return
        relative = offset - self.base_offset
        if self._offsets and relative < self._offsets[-1]:
            raise ValueError(f"time index entry ({timestamp}, {offset}) goes back in offset in "
                             f"{self.path}")
        self._timestamps.append(timestamp)
        self._offsets.append(relative)
        self._write(TIME_ENTRY.pack(timestamp, relative))

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """``(timestamp, offset)`` of the largest entry with timestamp <= ``timestamp``, else
        ``(-1, base_offset)``."""
        i = bisect.bisect_right(self._timestamps, timestamp)
        if i == 0:
            return -1, self.base_offset
        return self._timestamps[i - 1], self.base_offset + self._offsets[i - 1]

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose offset is >= ``offset``."""
        n = bisect.bisect_left(self._offsets, offset - self.base_offset)
        if n < len(self._offsets):
            del self._timestamps[n:], self._offsets[n:]
            self._truncate_file(n)

    def reset(self) -> None:
        self._timestamps = array("q")
        self._offsets = array("i")
        self._truncate_file(0)
