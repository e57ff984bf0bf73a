"""A slice of a segment file that the network layer sends with ``sendfile``.

A :class:`FileRegion` is ``(file, position, length)``: ``file`` is the segment's open binary file
object (``fileno()`` gives the descriptor for ``os.sendfile`` / ``loop.sendfile``), ``position`` the
byte offset of the first batch in the ``.log`` file, ``length`` the number of bytes (always whole
record batches). ``len(region)`` is ``length``, so the codecs size a ``records`` field without
reading it.

Lifetime rule: a region keeps its file object alive, and the log never closes a segment's file
object while the segment may still have regions in flight. Deleting a segment (retention,
DeleteRecords, topic deletion) only *unlinks* its files and drops the log's reference; on POSIX an
open descriptor keeps the data readable, and the file object is closed by the garbage collector
when the last region referring to it goes away. Only :meth:`PartitionLog.close` (broker shutdown)
closes files eagerly. Truncation (a follower's ``truncate_to``) may shorten the file under a
region: a short send then means the data is gone, which the sender reports as an I/O error.

The file object is shared by every region of that segment, so senders must not rely on its file
position: use ``os.sendfile(sock, region.fileno(), region.position, region.length)`` or
:meth:`read` (``os.pread``), never ``seek`` + ``read`` from several tasks or threads at once.
"""

from __future__ import annotations

import os


class FileRegion:
    __slots__ = ("file", "position", "length")

    def __init__(self, file, position: int, length: int):
        self.file = file
        self.position = position
        self.length = length

    def __len__(self) -> int:
        return self.length

    def fileno(self) -> int:
        return self.file.fileno()

    def slice(self, start: int, length: int) -> "FileRegion":
        """``length`` bytes from ``start`` (relative to this region) of the same file: a share
        fetch answers the batches it acquired records from, a subset of what the log read."""
        return FileRegion(self.file, self.position + start, length)

    def read(self) -> bytes:
        """The region's bytes, read with ``os.pread`` (for TLS connections and tests)."""
        fd = self.file.fileno()
        data = os.pread(fd, self.length, self.position)
        if len(data) == self.length:
            return data
        parts = [data]
        got = len(data)
        while got < self.length:
            chunk = os.pread(fd, self.length - got, self.position + got)
            if not chunk:
                raise OSError(f"short read: region of {self.length} bytes at {self.position} "
                              f"has only {got} bytes left (file truncated)")
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts)

    def __repr__(self) -> str:
        name = getattr(self.file, "name", self.file)
        return f"FileRegion({name!r}, position={self.position}, length={self.length})"
