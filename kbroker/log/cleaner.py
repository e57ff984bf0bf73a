"""The log cleaner: compaction of every ``cleanup.policy=compact`` log (Kafka's LogCleaner).

Which log, and how far (Kafka's ``LogCleanerManager``):

* Each log has a *first dirty offset*: where the previous round ended, kept per log dir in
  ``cleaner-offset-checkpoint`` (same text format as the other offset checkpoints, see
  :mod:`kbroker.log.checkpoint`). Below it the log is *clean* (holds at most one record per key).
  A checkpoint below the log start offset or above the log end offset is reset to the log start.
* The *first uncleanable offset* is the smallest of: the active segment's base offset, the high
  watermark and the last stable offset (an open transaction is never cleaned), and with
  ``min.compaction.lag.ms`` the base offset of the first dirty segment holding a record newer
  than ``now - min.compaction.lag.ms``.
* The dirty ratio is ``cleanable bytes / (clean bytes + cleanable bytes)`` over whole segments.
  A log is cleaned when the ratio is above ``min.cleanable.dirty.ratio`` (strictly, as Kafka),
  or when ``max.compaction.lag.ms`` has passed for the first batch of a dirty segment and there
  is something cleanable. The filthiest log goes first.

A round (:mod:`kbroker.log.cleaner_rewrite`) maps keys to their latest offsets over the dirty
section, rewrites every segment below the mapped end in groups, and swaps each group's cleaned
segment in crash-safely (:mod:`kbroker.log.cleaner_swap`, completed or rolled back by
``PartitionLog.open``). The checkpoint then moves to the mapped end. Tombstones and their delete
horizon: see :mod:`kbroker.log.cleaner_rewrite` (as in Kafka, a tombstone past its horizon goes
away at the next round, which the dirty ratio or the max lag triggers).

Concurrency rule: the cleaner runs on the event loop thread like everything touching logs.
:meth:`LogCleaner.run` cleans cooperatively: the round is a generator, and the loop gets control
back every few milliseconds of work. The log may change meanwhile (appends, retention, deletion,
truncation); each group's swap first checks that its segments are still the log's, inactive and
unchanged, and abandons the round otherwise. Segment files read by the round are held open so
that a concurrent deletion cannot pull them away mid-read.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass

from kbroker.log.checkpoint import CheckpointError, read_offset_checkpoint, write_offset_checkpoint
from kbroker.log.cleaner_rewrite import (CleanerStats, CleaningAborted, OffsetMap, RoundContext,
                                         build_offset_map, clean_group, create_cleaned_segment,
                                         discard_cleaned_segment, finish_cleaned_segment,
                                         group_segments_by_size)
from kbroker.log.segment import TornBatch
from kbroker.protocol.primitives import DecodeError

log = logging.getLogger("kbroker.log.cleaner")

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
DEFAULT_DEDUPE_BUFFER_BYTES = 128 * 1024 * 1024   # log.cleaner.dedupe.buffer.size
# How long the cooperative round may hold the event loop before it yields.
TIME_SLICE_S = 0.01


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class LogToClean:
    log: object
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def should_clean(self) -> bool:
        return ((self.need_compaction_now and self.cleanable_bytes > 0)
                or self.cleanable_ratio > self.log.config.min_cleanable_dirty_ratio)


def is_compacted(partition_log) -> bool:
    return "compact" in partition_log.config.cleanup_policy


def cleanable_offsets(partition_log, first_dirty: int, now_ms: int) -> tuple[int, int]:
    """``(first dirty offset, first uncleanable offset)`` (Kafka's ``cleanableOffsets``)."""
    if first_dirty < partition_log.log_start_offset or first_dirty > partition_log.log_end_offset:
        first_dirty = partition_log.log_start_offset
    active = partition_log.active_segment
    candidates = [partition_log.high_watermark, active.base_offset]
    first_unstable = partition_log.first_unstable_offset
    if first_unstable is not None:  # never clean an open transaction (Kafka: the LSO bound)
        candidates.append(first_unstable)
    lag = max(partition_log.config.min_compaction_lag_ms, 0)
    if lag > 0:
        for segment in _non_active_segments_from(partition_log, first_dirty):
            if segment.largest_timestamp > now_ms - lag:
                candidates.append(segment.base_offset)
                break
    return first_dirty, max(first_dirty, min(candidates))


def _non_active_segments_from(partition_log, offset: int):
    segments = partition_log.segments
    return [segment for i, segment in enumerate(segments[:-1])
            if segments[i + 1].base_offset > offset]


def _max_compaction_delay(partition_log, first_dirty: int, now_ms: int) -> int:
    timestamps = [segment.first_batch_timestamp
                  for segment in _non_active_segments_from(partition_log, first_dirty)]
    timestamps = [ts for ts in timestamps if ts > 0]
    if not timestamps:
        return 0
    clean_until = now_ms - max(partition_log.config.max_compaction_lag_ms, 0)
    earliest = min(timestamps)
    return clean_until - earliest if earliest < clean_until else 0


def log_to_clean(partition_log, first_dirty: int, now_ms: int) -> LogToClean:
    first_dirty, first_uncleanable = cleanable_offsets(partition_log, first_dirty, now_ms)
    segments = partition_log.segments
    # Kafka counts whole segments: clean ones start below the first dirty offset, cleanable ones
    # overlap [first dirty, base of the segment holding the first uncleanable offset).
    uncleanable_base = segments[partition_log._segment_index(first_uncleanable)].base_offset
    clean_bytes = cleanable_bytes = 0
    for i, segment in enumerate(segments):
        end = segments[i + 1].base_offset if i + 1 < len(segments) else partition_log.log_end_offset
        if segment.base_offset < first_dirty:
            clean_bytes += segment.size
        if segment.base_offset < uncleanable_base and end > first_dirty:
            cleanable_bytes += segment.size
    delay = _max_compaction_delay(partition_log, first_dirty, now_ms)
    return LogToClean(partition_log, first_dirty, first_uncleanable, clean_bytes,
                      cleanable_bytes, delay > 0)


class LogCleaner:
    """Chooses the filthiest compacted log and cleans it; owns ``cleaner-offset-checkpoint``."""

    def __init__(self, log_manager, *, backoff_ms: int = 15000,
                 dedupe_buffer_bytes: int = DEFAULT_DEDUPE_BUFFER_BYTES):
        self.log_manager = log_manager
        self.backoff_ms = backoff_ms
        self.dedupe_buffer_bytes = dedupe_buffer_bytes
        # (topic, partition) -> (the PartitionLog it was measured on, or None when read from a
        # checkpoint file, first dirty offset): a re-created partition does not inherit it.
        self._first_dirty: dict[tuple[str, int], tuple[object, int]] = {}
        self._loaded = False
        self.last_stats: CleanerStats | None = None

    # --- checkpoints ---------------------------------------------------------------------------

    def _load_checkpoints(self) -> None:
        if self._loaded:
            return
        for log_dir in self.log_manager.log_dirs:
            try:
                entries = read_offset_checkpoint(os.path.join(log_dir, CLEANER_OFFSET_CHECKPOINT))
            except CheckpointError as e:
                log.warning("ignoring unreadable cleaner checkpoint: %s", e)
                entries = {}
            for key, offset in entries.items():
                self._first_dirty[key] = (None, offset)
        self._loaded = True

    def first_dirty_offset(self, partition_log) -> int:
        self._load_checkpoints()
        owner, offset = self._first_dirty.get((partition_log.topic, partition_log.partition),
                                              (None, None))
        if offset is None or (owner is not None and owner is not partition_log):
            return partition_log.log_start_offset
        return offset

    def _write_checkpoints(self) -> None:
        by_dir: dict[str, dict[tuple[str, int], int]] = {d: {} for d in self.log_manager.log_dirs}
        for key, (owner, offset) in list(self._first_dirty.items()):
            current = self.log_manager.get(*key)
            if current is None or (owner is not None and owner is not current):
                del self._first_dirty[key]
                continue
            log_dir = self.log_manager.log_dir_of(*key)
            if log_dir in by_dir:
                by_dir[log_dir][key] = offset
        for log_dir, entries in by_dir.items():
            write_offset_checkpoint(os.path.join(log_dir, CLEANER_OFFSET_CHECKPOINT), entries)

    def maybe_truncate_checkpoint(self, partition_log, offset: int) -> None:
        """A follower truncated its log to ``offset``: what it appends from there is dirty
        (Kafka's ``maybeTruncateCheckpoint``, for the replica layer to call)."""
        if self.first_dirty_offset(partition_log) > offset:
            self._first_dirty[(partition_log.topic, partition_log.partition)] = (
                partition_log, offset)
            self._write_checkpoints()

    # --- choosing ------------------------------------------------------------------------------

    def grab_filthiest(self, now_ms: int | None = None) -> LogToClean | None:
        now_ms = _now_ms() if now_ms is None else now_ms
        best = None
        for partition_log in self.log_manager.all_logs():
            if not is_compacted(partition_log) or partition_log._closed:
                continue
            ltc = log_to_clean(partition_log, self.first_dirty_offset(partition_log), now_ms)
            if ltc.total_bytes > 0 and ltc.should_clean and (
                    best is None or ltc.cleanable_ratio > best.cleanable_ratio):
                best = ltc
        return best

    # --- cleaning ------------------------------------------------------------------------------

    def clean_once(self, now_ms: int | None = None) -> bool:
        """Clean the filthiest log, synchronously. True when a log was cleaned."""
        for _ in self._clean_filthiest(now_ms):
            pass
        return self._cleaned

    async def clean_once_async(self, now_ms: int | None = None) -> bool:
        """Like :meth:`clean_once`, giving the event loop back every few milliseconds."""
        started = time.monotonic()
        for _ in self._clean_filthiest(now_ms):
            if time.monotonic() - started > TIME_SLICE_S:
                await asyncio.sleep(0)
                started = time.monotonic()
        return self._cleaned

    async def run(self) -> None:
        """The background job: clean while something is cleanable, else back off."""
        while True:
            try:
                cleaned = await self.clean_once_async()
            except Exception:
                log.exception("log cleaner failed")
                cleaned = False
            if not cleaned:
                await asyncio.sleep(max(self.backoff_ms, 10) / 1000)

    def _clean_filthiest(self, now_ms):
        self._cleaned = False
        now_ms = _now_ms() if now_ms is None else now_ms
        ltc = self.grab_filthiest(now_ms)
        if ltc is None:
            return
        partition_log = ltc.log
        key = (partition_log.topic, partition_log.partition)
        try:
            end_offset = yield from self.clean(ltc, now_ms)
        except CleaningAborted as e:
            corrupt = isinstance(e.__cause__, (TornBatch, DecodeError))
            log.log(logging.WARNING if corrupt else logging.INFO,
                    "cleaning of %s abandoned: %s", partition_log.name, e)
            return
        self._first_dirty[key] = (partition_log, end_offset)
        self._write_checkpoints()
        self._cleaned = True

    def clean(self, ltc: LogToClean, now_ms: int):
        """Generator: one round over ``ltc.log``; returns the offset the next round starts at."""
        partition_log = ltc.log
        config = partition_log.config
        stats = CleanerStats()
        offset_map = OffsetMap(self.dedupe_buffer_bytes)
        producers = {pid: entry.batches[-1].last_offset
                     for pid, entry in partition_log.producer_state.producers.items()
                     if entry.batches}
        ctx = RoundContext(offset_map, now_ms, config.delete_retention_ms, producers,
                           stats=stats)
        # Hold every file the round reads: a concurrent deletion only unlinks them.
        held = [segment.file for segment in partition_log.segments[:-1]]
        try:
            yield from build_offset_map(partition_log, ltc.first_dirty_offset,
                                        ltc.first_uncleanable_offset, offset_map, stats)
            end_offset = max(offset_map.latest_offset + 1, ltc.first_dirty_offset)
            # Kafka keeps the batch ending at the round's upper bound, even emptied.
            ctx.end_offset = ltc.first_uncleanable_offset
            candidates = [s for s in partition_log.segments[:-1] if s.base_offset < end_offset]
            groups = group_segments_by_size(candidates, config.segment_bytes,
                                            config.segment_index_bytes,
                                            ltc.first_uncleanable_offset)
            for group in groups:
                yield from self._clean_group(partition_log, group, ctx, now_ms)
                stats.groups += 1
        except (OSError, TornBatch, DecodeError) as e:
            raise CleaningAborted(f"{type(e).__name__}: {e}") from e
        finally:
            del held
        self.last_stats = stats
        log.info("cleaned %s up to offset %d: %d groups, %d of %d records kept, %d -> %d bytes",
                 partition_log.name, end_offset, stats.groups, stats.records_retained,
                 stats.records_read, stats.bytes_read, stats.bytes_written)
        return end_offset

    def _clean_group(self, partition_log, group, ctx: RoundContext, now_ms: int):
        sizes = [segment.size for segment in group]
        cleaned = create_cleaned_segment(partition_log.dir_path, group[0].base_offset,
                                         partition_log.config, now_ms)
        try:
            yield from clean_group(partition_log, group, ctx, cleaned)
            finish_cleaned_segment(cleaned, group)
            self._check_unchanged(partition_log, group, sizes)
            partition_log.replace_segments(cleaned, group)
            # The aborts whose data is gone leave the cleaned segment's index (Kafka's cleaned
            # txn index holds only the kept ones). A crash before this leaves extra entries,
            # which only make fetches report an abort with no data left.
            partition_log.txn_indexes.merge_into(cleaned.base_offset, [cleaned.base_offset],
                                                 keep=set(ctx.txns.kept_aborted))
        except BaseException:
            discard_cleaned_segment(cleaned)
            raise

    @staticmethod
    def _check_unchanged(partition_log, group, sizes) -> None:
        segments = partition_log.segments
        if partition_log._closed:
            raise CleaningAborted("the log was closed")
        try:
            first = next(i for i, s in enumerate(segments) if s is group[0])
        except StopIteration:
            raise CleaningAborted("a segment was deleted") from None
        if (segments[first:first + len(group)] != group or first + len(group) >= len(segments)
                or [s.size for s in group] != sizes):
            raise CleaningAborted("the segments changed")


__all__ = ["CLEANER_OFFSET_CHECKPOINT", "LogCleaner", "LogToClean", "cleanable_offsets"]
