"""Crash-safe replacement of segments by a cleaned one, and its completion at start-up.

The log cleaner writes a group's cleaned data beside the old segments and swaps it in with
renames only, in Kafka's order (``LocalLog.replaceSegments``); ``B`` is the group's first base
offset, ``*`` each of ``.log``, ``.index``, ``.timeindex``::

    1. B*.cleaned             written and fsynced (a crash: deleted at start, old data intact)
    2. B*.cleaned -> B*.swap  the log file last; from here the swap is committed
    3. old*       -> old*.deleted, for every replaced segment (B's own files included)
    4. B*.swap    -> B*       then the ``.deleted`` files are unlinked

Each step ends with an fsync of the directory. At start-up :func:`complete_interrupted_swaps`
deletes ``.deleted`` and ``.cleaned`` files (and, as Kafka does, any ``.swap`` at or above the
smallest ``.cleaned`` base offset: a swap of that cleaning round was not finished), deletes index
``.swap`` files (the segment's indexes are rebuilt from its log), and completes each log ``.swap``:
the segments whose base offset lies in ``[B, next offset of the swap)`` are removed and the swap
is renamed into place (Kafka's ``LogLoader``). A replaced segment left in place because it
lies past the swap's last batch held only records the cleaning dropped (superseded, or expired
tombstones): keeping it is harmless, the next round drops them again.

Old segment files are unlinked, never closed: readers holding a :class:`FileRegion` of them keep
reading the old data (see :mod:`kbroker.log.file_region`).
"""

from __future__ import annotations

import os

from kbroker.log.checkpoint import fsync_dir
from kbroker.log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment
from kbroker.protocol.records import LOG_OVERHEAD, iter_batches

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)

_SCAN_CHUNK = 1 << 20


def rename_segment_files(segment: LogSegment, old_suffix: str, new_suffix: str) -> None:
    """Rename the segment's index files, then its log file, from ``*<old>`` to ``*<new>``
    (suffixes are added after ``.log``/``.index``/``.timeindex``). The open log file object is
    kept: a rename does not disturb readers."""
    for index in (segment.index, segment.time_index):
        index.rename(index.path[:len(index.path) - len(old_suffix)] + new_suffix)
    new_log_path = segment.log_path[:len(segment.log_path) - len(old_suffix)] + new_suffix
    os.replace(segment.log_path, new_log_path)
    segment.log_path = new_log_path


def _strip(path: str, suffix: str) -> str:
    return path[:len(path) - len(suffix)] if suffix else path


def swap_in(dir_path: str, cleaned: LogSegment, old_segments: list[LogSegment]) -> None:
    """Steps 2-4 above. ``cleaned`` has ``.cleaned`` paths and is flushed; afterwards it has
    its final paths and the old segments' files are gone."""
    rename_segment_files(cleaned, CLEANED_SUFFIX, SWAP_SUFFIX)
    fsync_dir(dir_path)
    for segment in old_segments:
        rename_segment_files(segment, "", DELETED_SUFFIX)
    fsync_dir(dir_path)
    rename_segment_files(cleaned, SWAP_SUFFIX, "")
    fsync_dir(dir_path)
    for segment in old_segments:
        segment.delete()


def _base_offset(name: str, suffix: str) -> int | None:
    stem = name[:-len(suffix)]
    for segment_suffix in SEGMENT_SUFFIXES:
        if stem.endswith(segment_suffix):
            stem = stem[:-len(segment_suffix)]
            return int(stem) if stem.isdigit() else None
    return None


def _next_offset_of(path: str) -> int | None:
    """The offset after the last whole batch of a log file (None when it has no batch)."""
    next_offset = None
    with open(path, "rb", buffering=0) as f:
        position = 0
        while True:
            chunk = os.pread(f.fileno(), _SCAN_CHUNK, position)
            if not chunk:
                return next_offset
            consumed = 0
            for header in iter_batches(chunk, allow_partial_tail=True):
                next_offset = header.next_offset
                consumed = header.pos + header.size
            if consumed == 0:
                if len(chunk) < LOG_OVERHEAD:
                    return next_offset
                size = int.from_bytes(chunk[8:12], "big", signed=True) + LOG_OVERHEAD
                if len(chunk) >= size or size <= 0:
                    return next_offset
                chunk = os.pread(f.fileno(), size, position)  # one batch bigger than a chunk
                if len(chunk) < size:
                    return next_offset
                header = next(iter_batches(chunk))
                next_offset, consumed = header.next_offset, size
            position += consumed


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def complete_interrupted_swaps(dir_path: str) -> None:
    """Roll back unfinished cleanings and finish committed swaps (see the module docstring).
    Runs before the segments of ``dir_path`` are loaded."""
    names = os.listdir(dir_path)
    min_cleaned = None
    swaps = []
    for name in names:
        path = os.path.join(dir_path, name)
        if name.endswith(DELETED_SUFFIX):
            _unlink(path)
        elif name.endswith(CLEANED_SUFFIX):
            base = _base_offset(name, CLEANED_SUFFIX)
            if base is not None:
                min_cleaned = base if min_cleaned is None else min(min_cleaned, base)
            _unlink(path)
        elif name.endswith(SWAP_SUFFIX):
            base = _base_offset(name, SWAP_SUFFIX)
            if base is not None and name == f"{base:020d}{LOG_SUFFIX}{SWAP_SUFFIX}":
                swaps.append((base, path))
            else:
                _unlink(path)  # an index: rebuilt from the log
    changed = bool(swaps) or min_cleaned is not None
    for base, swap_path in sorted(swaps):
        if min_cleaned is not None and base >= min_cleaned:
            _unlink(swap_path)
            continue
        next_offset = _next_offset_of(swap_path)
        end = base + 1 if next_offset is None else next_offset
        for name in os.listdir(dir_path):
            if not name.endswith(SEGMENT_SUFFIXES):
                continue
            stem = name.rsplit(".", 1)[0]
            if stem.isdigit() and base <= int(stem) < end:
                _unlink(os.path.join(dir_path, name))
        os.replace(swap_path, _strip(swap_path, SWAP_SUFFIX))
    if changed:
        fsync_dir(dir_path)
