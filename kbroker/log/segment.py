"""One log segment: ``<baseOffset>.log`` plus its ``.index`` and ``.timeindex``.

``<baseOffset, 20 digits zero-padded>.log`` is Kafka's segment file: record batches (v2) back to
back, exactly as produced except for the base offset and partition leader epoch the leader
stamped in, so Kafka's DumpLogSegments reads it. ``baseOffset`` is the first offset the segment
may hold. Index formats are in :mod:`kbroker.log.index`.

The segment uses one unbuffered file object (``r+b``) for both writing (``os.pwrite`` at the
segment's size) and reading (``os.pread`` of batch headers, ``sendfile`` of regions), opened on
demand through the bounded cache of open files (:mod:`kbroker.log.file_cache`). Regions
returned by reads carry that file object; see :mod:`kbroker.log.file_region` for the lifetime
rule (deletion and eviction drop it, never close it under a region).

Batch headers are scanned through a read-ahead buffer (one ``pread`` of a few KiB covers many
small batches; after a batch at least that large only the next header is read); a header that
does not describe a whole v2 batch inside the segment raises :class:`TornBatch`, which recovery
turns into a truncation point.
"""

from __future__ import annotations

import os
import struct

from kbroker.log.file_cache import open_files
from kbroker.log.file_region import FileRegion
from kbroker.log.index import CorruptIndexError, OffsetIndex, TimeIndex
from kbroker.protocol.records import (BATCH_HEADER_SIZE, LOG_OVERHEAD, MAGIC,
                                      MIN_BATCH_LENGTH, BatchHeader)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"

_READ_AHEAD = 16 * 1024
_LENGTH_AND_EPOCH_MAGIC = struct.Struct(">ixxxxb")  # batchLength .. magic, from offset 8


class TornBatch(Exception):
    """The bytes at ``position`` are not a whole, well-formed batch."""

    def __init__(self, position: int, reason: str):
        super().__init__(f"invalid batch at position {position}: {reason}")
        self.position = position
        self.reason = reason


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


def _pwrite_all(fd: int, data, position: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, position)
        view = view[written:]
        position += written


class LogSegment:
    def __init__(self, dir_path: str, base_offset: int, index_interval_bytes: int,
                 max_index_size: int, created_ms: int):
        self.dir_path = dir_path
        self.base_offset = base_offset
        self.log_path = os.path.join(dir_path, segment_file_name(base_offset, LOG_SUFFIX))
        self.index = OffsetIndex(os.path.join(dir_path, segment_file_name(base_offset,
                                                                          INDEX_SUFFIX)),
                                 base_offset, max_index_size)
        self.time_index = TimeIndex(os.path.join(dir_path, segment_file_name(base_offset,
                                                                             TIME_INDEX_SUFFIX)),
                                    base_offset, max_index_size)
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = created_ms
        self.size = 0
        self.next_offset = base_offset        # last offset in the segment + 1
        self.max_timestamp = -1               # largest batch max timestamp seen
        self.offset_of_max_timestamp = base_offset
        self._first_batch_timestamp: int | None = None
        self._bytes_since_index = 0
        self._file = None
        self._dirty = False
        self.needs_recovery = False
        self.preallocated = False  # the .log file is longer than its data until trim()

    # --- opening -----------------------------------------------------------------------------

    @classmethod
    def create(cls, dir_path: str, base_offset: int, index_interval_bytes: int,
               max_index_size: int, now_ms: int, preallocate: int = 0) -> "LogSegment":
        """A new, empty segment. ``preallocate`` (``preallocate=true``: the topic's
        ``segment.bytes``) sets the .log file's length up front, as Kafka's
        ``FileRecords.openChannel`` does; :meth:`trim` cuts it back to the data when the segment
        is rolled or closed, and recovery truncates the zeros a crash leaves."""
        segment = cls(dir_path, base_offset, index_interval_bytes, max_index_size, now_ms)
        segment._file = open(segment.log_path, "w+b", buffering=0)
        if preallocate > 0:
            os.ftruncate(segment._file.fileno(), preallocate)
            segment.preallocated = True
        open_files.touch(segment)
        segment.index.reset()
        segment.time_index.reset()
        segment._dirty = True
        return segment

    @classmethod
    def open(cls, dir_path: str, base_offset: int, index_interval_bytes: int,
             max_index_size: int) -> "LogSegment":
        """Open an existing segment. Indexes are loaded and checked; a failed check (or a missing
        index) sets ``needs_recovery``. :meth:`load_tail` or :meth:`recover` must follow."""
        path = os.path.join(dir_path, segment_file_name(base_offset, LOG_SUFFIX))
        stat = os.stat(path)
        segment = cls(dir_path, base_offset, index_interval_bytes, max_index_size,
                      int(stat.st_mtime * 1000))
        segment.size = stat.st_size
        try:
            if not os.path.exists(segment.index.path) or not os.path.exists(
                    segment.time_index.path):
                raise CorruptIndexError("missing index file")
            segment.index.load(segment.size)
            segment.time_index.load()
            last_ts_offset = segment.time_index.last_entry()[1]
            if len(segment.time_index) and last_ts_offset < base_offset:
                raise CorruptIndexError("time index below base offset")
        except CorruptIndexError:
            segment.needs_recovery = True
        return segment

    @property
    def file(self):
        """The log file object, opened on demand through the bounded cache of open files
        (:mod:`kbroker.log.file_cache`); hold the object, not its descriptor, across calls."""
        if self._file is None:
            self._file = open(self.log_path, "r+b", buffering=0)
        open_files.touch(self)
        return self._file

    def release_file(self) -> None:
        """Evicted from the open files cache: drop the file object (regions in flight keep it
        open until they are sent; otherwise it closes now)."""
        self._file = None

    # --- scanning ----------------------------------------------------------------------------

    def batches(self, start: int = 0, end: int | None = None, full: bool = False):
        """Yield ``(position, BatchHeader)`` for the batches in ``[start, end)``.

        With ``full`` the header's buffer holds the whole batch (for CRC checks and record
        decoding); otherwise only the 61 header bytes are guaranteed. Raises :class:`TornBatch`
        at the first malformed or incomplete batch."""
        end = self.size if end is None else end
        file = self.file  # keeps the descriptor valid while the caller pauses between batches
        fd = file.fileno()
        buf = b""
        buf_pos = start
        pos = start
        read_ahead = _READ_AHEAD
        while pos < end:
            off = pos - buf_pos
            if off + BATCH_HEADER_SIZE > len(buf):
                buf = os.pread(fd, read_ahead, pos)
                buf_pos, off = pos, 0
                if len(buf) < BATCH_HEADER_SIZE:
                    raise TornBatch(pos, f"only {len(buf)} bytes left for a batch header")
            length, magic = _LENGTH_AND_EPOCH_MAGIC.unpack_from(buf, off + 8)
            if length < MIN_BATCH_LENGTH:
                raise TornBatch(pos, f"batch length {length} is below {MIN_BATCH_LENGTH}")
            if magic != MAGIC:
                raise TornBatch(pos, f"magic {magic}")
            size = length + LOG_OVERHEAD
            if pos + size > end:
                raise TornBatch(pos, f"batch of {size} bytes runs past the end ({end})")
            if full and off + size > len(buf):
                buf = os.pread(fd, max(_READ_AHEAD, size), pos)
                buf_pos, off = pos, 0
                if len(buf) < size:
                    raise TornBatch(pos, f"batch of {size} bytes, only {len(buf)} readable")
            yield pos, BatchHeader(buf, off)
            pos += size
            # Batches as large as the read-ahead would waste it: read just the next header.
            read_ahead = BATCH_HEADER_SIZE if size >= _READ_AHEAD else _READ_AHEAD

    def read_batch(self, position: int) -> BatchHeader:
        """The whole batch at ``position`` (for record decoding)."""
        for _, header in self.batches(position, full=True):
            return header
        raise TornBatch(position, "no batch")

    def find_batch(self, offset: int, start: int = 0) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >= ``offset``."""
        position = max(self.index.lookup(offset)[1], start)
        for pos, header in self.batches(position):
            if header.last_offset >= offset:
                return pos, header
        return None

    def batch_boundary_at_or_below(self, limit: int, start: int) -> int:
        """The largest end of a batch that is <= ``limit``, counting batches from the one at
        ``start`` (``start`` itself when even that batch does not fit).

        The fetch end (Kafka's ``LogSegment.read``): the offset index gives the last indexed
        batch starting at or below ``limit``, which is itself a batch boundary, and only the
        headers between it and ``limit`` are read (at most ``index.interval.bytes`` plus one
        batch); no record data is read."""
        if limit >= self.size:
            return self.size
        boundary = max(self.index.floor_position(limit), start)
        for pos, header in self.batches(boundary):
            if pos + header.size > limit:
                break
            boundary = pos + header.size
        return boundary

    def region(self, start: int, end: int) -> FileRegion:
        return FileRegion(self.file, start, end - start)

    @property
    def first_batch_timestamp(self) -> int:
        """Max timestamp of the segment's first batch (Kafka's rolling-based timestamp), or -1."""
        if self._first_batch_timestamp is None:
            self._first_batch_timestamp = -1
            if self.size:
                for _, header in self.batches(0):
                    self._first_batch_timestamp = header.max_timestamp
                    break
        return self._first_batch_timestamp

    @property
    def largest_timestamp(self) -> int:
        """What time retention compares: the largest record timestamp, else the file's mtime."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        try:
            return int(os.stat(self.log_path).st_mtime * 1000)
        except FileNotFoundError:
            return self.created_ms

    # --- loading and recovery ----------------------------------------------------------------

    def load_tail(self) -> None:
        """After a clean open: find the next offset and max timestamp from the indexes plus the
        batches after the last index entry. Raises :class:`TornBatch` on a malformed tail."""
        last_offset, position = self.index.last_entry()
        self.max_timestamp, self.offset_of_max_timestamp = self.time_index.last_entry()
        self.next_offset = last_offset + 1 if len(self.index) else self.base_offset
        for _, header in self.batches(position):
            self.next_offset = header.next_offset
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset
        self._bytes_since_index = self.size - position

    def recover(self, on_batch=None) -> int:
        """Rebuild the indexes by validating every batch (length, magic, CRC32C, offsets);
        truncate the file at the first invalid byte. Returns the number of bytes truncated.
        ``on_batch(header)`` sees each valid batch."""
        self.index.reset()
        self.time_index.reset()
        self.max_timestamp = -1
        self.offset_of_max_timestamp = self.base_offset
        self.next_offset = self.base_offset
        self._first_batch_timestamp = None
        valid = 0
        last_index_position = 0
        try:
            for pos, header in self.batches(0, full=True):
                if not header.is_valid_crc():
                    raise TornBatch(pos, "CRC mismatch")
                if header.base_offset < self.next_offset or header.last_offset_delta < 0:
                    raise TornBatch(pos, f"offsets {header.base_offset}..{header.last_offset} "
                                         f"do not follow {self.next_offset - 1}")
                if header.last_offset - self.base_offset > 2**31 - 1:
                    raise TornBatch(pos, "offset does not fit the segment's index")
                if header.max_timestamp > self.max_timestamp:
                    self.max_timestamp = header.max_timestamp
                    self.offset_of_max_timestamp = header.last_offset
                if pos - last_index_position > self.index_interval_bytes:
                    self.index.append(header.last_offset, pos)
                    self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
                    last_index_position = pos
                self.next_offset = header.next_offset
                valid = pos + header.size
                if on_batch is not None:
                    on_batch(header)
        except TornBatch:
            pass
        truncated = self.size - valid
        if truncated:
            os.ftruncate(self.file.fileno(), valid)
            self.size = valid
            self._dirty = True
        self._bytes_since_index = valid - last_index_position
        self.needs_recovery = False
        return truncated

    # --- writing -----------------------------------------------------------------------------

    def append(self, data, last_offset: int, max_timestamp: int, offset_of_max_timestamp: int,
               ) -> int:
        """Append whole batches; returns the position they start at."""
        position = self.size
        _pwrite_all(self.file.fileno(), data, position)
        self.size += len(data)
        self._dirty = True
        if position == 0:
            self._first_batch_timestamp = None
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = offset_of_max_timestamp
        if self._bytes_since_index > self.index_interval_bytes:
            self.index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index = 0
        self._bytes_since_index += len(data)
        self.next_offset = last_offset + 1
        return position

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset``; returns bytes removed."""
        if offset >= self.next_offset:
            return 0
        found = self.find_batch(offset)
        position = found[0] if found else self.size
        self.index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        removed = self.size - position
        if removed:
            os.ftruncate(self.file.fileno(), position)
            self.size = position
            self._dirty = True
            self.preallocated = False
        if position == 0:
            self._first_batch_timestamp = None
        self.load_tail()
        return removed

    def on_become_inactive(self) -> None:
        """Rolled: make the time index end with the segment's max timestamp (Kafka does too),
        and cut a preallocated file back to its data."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp,
                                         skip_full_check=True)
        self.trim()

    def trim(self) -> None:
        """A preallocated .log file is cut back to the bytes written (Kafka's ``trim``)."""
        if self.preallocated:
            os.ftruncate(self.file.fileno(), self.size)
            self.preallocated = False
            self._dirty = True

    @property
    def can_index(self) -> bool:
        return not (self.index.is_full or self.time_index.is_full)

    def can_hold(self, last_offset: int) -> bool:
        return 0 <= last_offset - self.base_offset <= 2**31 - 1

    def flush(self) -> None:
        if self._dirty:
            # fsync flushes the file, whichever descriptor: a released file is reopened for it.
            os.fsync(self.file.fileno())
            self._dirty = False
        self.index.flush()
        self.time_index.flush()

    def close(self) -> None:
        self.index.close()
        self.time_index.close()
        open_files.forget(self)
        if self._file is not None:
            self._file.close()
            self._file = None

    def delete(self) -> None:
        """Unlink the segment's files. The log file object is dropped, not closed: regions in
        flight keep it (and the data) alive until they are garbage collected."""
        self.index.delete()
        self.time_index.delete()
        try:
            os.unlink(self.log_path)
        except FileNotFoundError:
            pass
        open_files.forget(self)
        self._file = None
        self._dirty = False

    def __repr__(self) -> str:
        return (f"LogSegment(base_offset={self.base_offset}, size={self.size}, "
                f"next_offset={self.next_offset})")
