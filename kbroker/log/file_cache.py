"""A bounded number of open segment and index files, so descriptors do not grow with partitions.

Kafka keeps every segment's ``.log``, ``.index`` and ``.timeindex`` open (three descriptors per
segment) and asks operators to raise ``ulimit -n``. Here each :class:`~kbroker.log.segment.
LogSegment` log file and each index writer opens its file on first use and registers with the
process-wide :data:`open_files` cache; past ``log.open.files.max`` registered files the least
recently used owner is told to let go (``release_file``). A released log file object is not
closed: :class:`~kbroker.log.file_region.FileRegion` objects in flight keep it, and with it the
descriptor, until they are sent (the file-region lifetime rule); with no region it closes at
once. The next use reopens the file by its path.

Invariant: a caller that keeps using a descriptor across calls that may open other files (a
header scan that yields, the cleaner) holds the file object itself, never just ``fileno()``.

Concurrency: owned by the event loop thread (like the logs); no locks.
"""

from __future__ import annotations

import collections
import logging
import resource

log = logging.getLogger("kbroker.log")

DEFAULT_MAX_OPEN_FILES = 4096     # log.open.files.max
MIN_MAX_OPEN_FILES = 16           # below this a cleaning round would evict its own files


class OpenFileCache:
    def __init__(self, max_open: int = DEFAULT_MAX_OPEN_FILES):
        self.max_open = max_open
        self._owners: collections.OrderedDict[int, object] = collections.OrderedDict()

    def __len__(self) -> int:
        return len(self._owners)

    def touch(self, owner) -> None:
        """``owner`` holds an open file and has just used it; evict the least recently used
        owners beyond the limit (never ``owner`` itself)."""
        key = id(owner)
        owners = self._owners
        if key in owners:
            owners.move_to_end(key)
            return
        owners[key] = owner
        while len(owners) > self.max_open:
            _, victim = owners.popitem(last=False)
            victim.release_file()

    def forget(self, owner) -> None:
        """``owner`` closed or dropped its file itself."""
        self._owners.pop(id(owner), None)


open_files = OpenFileCache()


def configure(max_open: int) -> int:
    """Set the limit (``log.open.files.max``) and raise the soft ``RLIMIT_NOFILE`` to the hard
    limit; the limit is capped at half the descriptors the process may open, so sockets always
    have room. Returns the limit in effect."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open files limit from %d to %d: %s", soft, hard, exc)
    effective = max(MIN_MAX_OPEN_FILES, max_open)
    if soft != resource.RLIM_INFINITY and effective > soft // 2:
        log.warning("log.open.files.max %d is more than half the open files limit (%d); using %d",
                    max_open, soft, max(MIN_MAX_OPEN_FILES, soft // 2))
        effective = max(MIN_MAX_OPEN_FILES, soft // 2)
    open_files.max_open = effective
    return effective
