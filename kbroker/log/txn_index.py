"""The aborted-transaction index of a partition (Kafka's ``TransactionIndex``, ``.txnindex``).

One file per segment, ``<segment base offset, 20 digits>.txnindex``, holding an entry for every
transaction aborted by a marker written into that segment. The file is a sequence of fixed-size
entries (34 bytes, big-endian), exactly Kafka's ``AbortedTxn``::

    version             int16   0
    producer_id         int64
    first_offset        int64   the transaction's first data offset in this partition
    last_offset         int64   the offset of its ABORT marker
    last_stable_offset  int64   the partition's last stable offset once it was aborted

A read_committed fetch gets the aborted transactions overlapping what it reads (Fetch's
``aborted_transactions``), so the consumer can drop their records.

:class:`TransactionIndexes` keeps every entry of the partition in memory too (a handful per
aborted transaction; small next to the log) so a fetch never reads these files. Files are written
with the marker and not fsynced on their own: after a crash, entries past the recovered log end
are dropped and the producer-state replay of the markers after the last snapshot writes back any
entry that was lost (:meth:`PartitionLog._replay_producer_state`).
"""

from __future__ import annotations

import bisect
import os
import struct
from dataclasses import dataclass

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(VERSION, self.producer_id, self.first_offset, self.last_offset,
                           self.last_stable_offset)


def decode_entries(data: bytes) -> list[AbortedTxn]:
    """The whole entries of a file; a torn tail entry (crash mid-write) is ignored."""
    entries = []
    for offset in range(0, len(data) - len(data) % ENTRY_SIZE, ENTRY_SIZE):
        version, pid, first, last, lso = _ENTRY.unpack_from(data, offset)
        if version != VERSION:
            break
        entries.append(AbortedTxn(pid, first, last, lso))
    return entries


class TransactionIndexes:
    """The ``.txnindex`` files of one partition directory, and their entries in memory."""

    def __init__(self, dir_path: str):
        self.dir_path = dir_path
        self._entries: list[tuple[int, AbortedTxn]] = []  # (segment base, entry), by last offset

    def path(self, segment_base: int) -> str:
        return os.path.join(self.dir_path, f"{segment_base:020d}{TXN_INDEX_SUFFIX}")

    @property
    def entries(self) -> list[AbortedTxn]:
        return [entry for _, entry in self._entries]

    @property
    def last_indexed_offset(self) -> int:
        """The marker offset of the newest entry, or -1."""
        return self._entries[-1][1].last_offset if self._entries else -1

    def load(self, segment_bases: list[int], log_end_offset: int) -> None:
        """Read the files of the segments that exist; delete the others' files, and drop (and
        cut from the files) entries at or past the log end offset, which a crash left behind."""
        bases = set(segment_bases)
        self._entries = []
        for name in os.listdir(self.dir_path):
            stem = name[:-len(TXN_INDEX_SUFFIX)]
            if not name.endswith(TXN_INDEX_SUFFIX) or not stem.isdigit():
                continue
            base = int(stem)
            path = os.path.join(self.dir_path, name)
            if base not in bases:
                os.unlink(path)
                continue
            with open(path, "rb") as f:
                entries = decode_entries(f.read())
            kept = [e for e in entries if e.last_offset < log_end_offset]
            if len(kept) != len(entries) or os.path.getsize(path) != len(kept) * ENTRY_SIZE:
                with open(path, "r+b") as f:
                    f.truncate(len(kept) * ENTRY_SIZE)
            self._entries += [(base, e) for e in kept]
        self._entries.sort(key=lambda item: item[1].last_offset)

    def append(self, segment_base: int, entry: AbortedTxn) -> None:
        with open(self.path(segment_base), "ab") as f:
            f.write(entry.encode())
        self._entries.append((segment_base, entry))

    def flush(self) -> None:
        for base in {base for base, _ in self._entries}:
            try:
                fd = os.open(self.path(base), os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def collect(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions that overlap ``[fetch_offset, upper_bound)`` (Kafka's
        ``collectAbortedTxns``: last offset >= fetch offset and first offset < upper bound)."""
        keys = [e.last_offset for _, e in self._entries]
        start = bisect.bisect_left(keys, fetch_offset)
        return [e for _, e in self._entries[start:] if e.first_offset < upper_bound]

    def truncate_from(self, offset: int) -> None:
        """Drop entries whose marker sits at or past ``offset`` (log truncation)."""
        keep = [(b, e) for b, e in self._entries if e.last_offset < offset]
        if len(keep) == len(self._entries):
            return
        self._entries = keep
        counts: dict[int, int] = {}
        for base, _ in keep:
            counts[base] = counts.get(base, 0) + 1
        for name in os.listdir(self.dir_path):
            stem = name[:-len(TXN_INDEX_SUFFIX)]
            if name.endswith(TXN_INDEX_SUFFIX) and stem.isdigit():
                size = counts.get(int(stem), 0) * ENTRY_SIZE
                with open(os.path.join(self.dir_path, name), "r+b") as f:
                    f.truncate(size)

    def merge_into(self, segment_base: int, old_bases, keep=None) -> None:
        """The cleaner replaced segments ``old_bases`` by one at ``segment_base``: their entries
        move into its file (written whole, then the old files are removed). With ``keep``, only
        those entries move (the cleaner removed the others' aborted data)."""
        old = set(old_bases)
        moved = [e for b, e in self._entries if b in old and (keep is None or e in keep)]
        if not moved and not any(os.path.exists(self.path(b)) for b in old):
            return
        tmp = self.path(segment_base) + ".tmp"
        with open(tmp, "wb") as f:
            f.write(b"".join(e.encode() for e in moved))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path(segment_base))
        for base in old - {segment_base}:
            try:
                os.unlink(self.path(base))
            except FileNotFoundError:
                pass
        self._entries = sorted([(b, e) for b, e in self._entries if b not in old]
                               + [(segment_base, e) for e in moved],
                               key=lambda item: item[1].last_offset)

    def delete_segments(self, segment_bases) -> None:
        """The segments were deleted (retention, DeleteRecords, truncation): drop their files."""
        bases = set(segment_bases)
        if not bases:
            return
        self._entries = [(b, e) for b, e in self._entries if b not in bases]
        for base in bases:
            try:
                os.unlink(self.path(base))
            except FileNotFoundError:
                pass
