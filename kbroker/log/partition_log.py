"""One partition's log: segments, appends as leader, reads, recovery, retention, truncation.

A :class:`PartitionLog` owns the directory ``<log.dir>/<topic>-<partition>/``::

    00000000000000000000.log          segments (formats in kbroker.log.segment / .index)
    00000000000000000000.index
    00000000000000000000.timeindex
    00000000000000000000.txnindex     aborted transactions (kbroker.log.txn_index)
    00000000000000001234.snapshot     producer state (kbroker.log.producer_state)
    leader-epoch-checkpoint           kbroker.log.leader_epoch
    partition.metadata                topic id (:func:`write_topic_id`, called by the LogManager)

State machine of offsets: ``log_start_offset <= high_watermark <= log_end_offset``, and
``recovery_point <= log_end_offset`` (everything below the recovery point is fsynced). The leader
moves the log end offset by appending; the replica layer owns and sets ``high_watermark`` (it is a
plain attribute, set to the log end offset when the log is opened); DeleteRecords and retention
move the log start offset; ``flush`` moves the recovery point.

Concurrency rule: a log is owned by the event loop thread and has no locks. Every method is
synchronous; the I/O is a few ``pwrite``/``pread`` calls per request (and ``fsync`` in ``flush``).

Appends validate the single produced batch from its header (:mod:`kbroker.log.validation`),
check the idempotent producer's sequence (:mod:`kbroker.log.producer_state`), copy the batch once
into a ``bytearray``, stamp its base offset and leader epoch (and LogAppendTime), and write it.
A batch whose codec is not the topic's ``compression.type`` is rebuilt instead
(:mod:`kbroker.log.recompression`).
Reads return :class:`~kbroker.log.file_region.FileRegion` slices of whole batches from one
segment (as Kafka does: at most one segment per partition per fetch).
"""

from __future__ import annotations

import bisect
import errno
import logging
import os
import shutil
import time
import uuid
from dataclasses import dataclass, field

from kbroker.log.checkpoint import (PARTITION_METADATA, CheckpointError, fsync_dir,
                                    read_partition_metadata, write_partition_metadata)
from kbroker.log.cleaner_swap import complete_interrupted_swaps, swap_in
from kbroker.log.file_region import FileRegion
from kbroker.log.leader_epoch import LeaderEpochCache
from kbroker.log.producer_state import VERIFICATION_OFF, ProducerStateManager
from kbroker.log.txn_index import AbortedTxn, TransactionIndexes
from kbroker.log.segment import (INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment,
                                 TornBatch)
from kbroker.log.recompression import rebuild_batch
from kbroker.log.validation import MAX_UNCOMPRESSED_BATCH_BYTES, check_batch
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.protocol.records import (CONTROL_ABORT, LOG_APPEND_TIME, BatchHeader,
                                      CorruptRecordError,
                                      decode_records, iter_batches, parse_control_record, set_base_offset,
                                      set_max_timestamp_and_log_append_time,
                                      set_partition_leader_epoch)

LONG_MAX = 2**63 - 1

# ListOffsets special timestamps (Kafka's ListOffsetsRequest).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5

DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"  # a copy being moved to another log dir (LogManager)

log = logging.getLogger("kbroker.log")


@dataclass
class LogConfig:
    """The per-topic settings the log needs (Kafka names and defaults, Kafka 4). Built from the
    config tables by ``kbroker.replica.log_settings``; a test checks each field has a table key."""

    segment_bytes: int = 1024 * 1024 * 1024           # segment.bytes
    segment_ms: int = 7 * 24 * 3600 * 1000            # segment.ms
    segment_jitter_ms: int = 0                        # segment.jitter.ms
    segment_index_bytes: int = 10 * 1024 * 1024       # segment.index.bytes
    index_interval_bytes: int = 4096                  # index.interval.bytes
    retention_bytes: int = -1                         # retention.bytes
    retention_ms: int = 7 * 24 * 3600 * 1000          # retention.ms
    max_message_bytes: int = 1048588                  # max.message.bytes
    message_timestamp_type: str = "CreateTime"        # message.timestamp.type
    message_timestamp_before_max_ms: int = LONG_MAX   # message.timestamp.before.max.ms
    message_timestamp_after_max_ms: int = 3600 * 1000  # message.timestamp.after.max.ms (4.0)
    cleanup_policy: list[str] = field(default_factory=lambda: ["delete"])
    flush_messages: int = LONG_MAX                    # flush.messages
    flush_ms: int = LONG_MAX                          # flush.ms
    producer_id_expiration_ms: int = 24 * 3600 * 1000  # producer.id.expiration.ms (broker)
    min_cleanable_dirty_ratio: float = 0.5            # min.cleanable.dirty.ratio
    delete_retention_ms: int = 24 * 3600 * 1000       # delete.retention.ms
    min_compaction_lag_ms: int = 0                    # min.compaction.lag.ms
    max_compaction_lag_ms: int = LONG_MAX             # max.compaction.lag.ms
    min_insync_replicas: int = 1                      # min.insync.replicas (acks=all, replica layer)
    compression_type: str = "producer"                # compression.type (kbroker.log.recompression)
    compression_gzip_level: int = -1                  # compression.gzip.level (KIP-390)
    compression_lz4_level: int = 9                    # compression.lz4.level
    compression_zstd_level: int = 3                   # compression.zstd.level
    preallocate: bool = False                         # preallocate (segment files)


@dataclass(slots=True)
class AppendResult:
    first_offset: int
    last_offset: int
    log_append_time: int = -1
    log_start_offset: int = 0
    record_errors: list = field(default_factory=list)
    duplicate: bool = False


@dataclass(slots=True)
class ReadResult:
    regions: list[FileRegion]
    size: int
    log_start_offset: int
    log_end_offset: int
    high_watermark: int


def _now_ms() -> int:
    return int(time.time() * 1000)


def _preallocation(config: "LogConfig") -> int:
    """Bytes a new segment's .log file starts with: segment.bytes with preallocate=true."""
    return config.segment_bytes if config.preallocate else 0


class PartitionLog:
    def __init__(self, dir_path: str, topic: str, partition: int, config: LogConfig):
        self.dir_path = dir_path
        self.topic = topic
        self.partition = partition
        self.config = config
        self.topic_id: uuid.UUID | None = None
        self.segments: list[LogSegment] = []
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.high_watermark = 0
        self.recovery_point = 0
        self.leader_epoch_cache = LeaderEpochCache(None)
        self.producer_state = ProducerStateManager(dir_path, self.name)
        self.txn_indexes = TransactionIndexes(dir_path)
        self._last_flush_ms = 0
        self._closed = False
        self.recovery_stats = (0, 0)  # (segments scanned, bytes truncated) at open

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self.segments)

    def __repr__(self) -> str:
        return (f"PartitionLog({self.name}, start={self.log_start_offset}, "
                f"end={self.log_end_offset}, hw={self.high_watermark}, "
                f"segments={len(self.segments)})")

    # --- opening and recovery ----------------------------------------------------------------

    @classmethod
    def open(cls, dir_path: str, topic: str, partition: int, config: LogConfig,
             recovery_point: int = 0, log_start_offset: int = 0, now_ms: int | None = None,
             clean_shutdown: bool = False) -> "PartitionLog":
        """Open (or create) the log in ``dir_path`` and recover it.

        Without ``clean_shutdown`` every segment from the one holding ``recovery_point`` on is
        validated batch by batch (length, magic, CRC32C, offsets) and its indexes rebuilt; the
        first invalid byte truncates the log there (later segments are deleted). Segments below
        the recovery point, or all of them after a clean shutdown, only get their index files
        sanity-checked (and are rebuilt when that fails). Producer state is rebuilt from the
        newest snapshot plus the batch headers after it."""
        now_ms = _now_ms() if now_ms is None else now_ms
        self = cls(dir_path, topic, partition, config)
        os.makedirs(dir_path, exist_ok=True)
        self.topic_id = _read_topic_id(dir_path, self.name)
        try:
            self.leader_epoch_cache = LeaderEpochCache.load(dir_path)
            rebuild_epochs = False
        except CheckpointError as exc:
            # Kafka would take the whole log dir offline; the epochs are in every batch header,
            # so they are rebuilt from the log instead.
            log.warning("%s: %s; rebuilding the leader epoch cache from the log's batches",
                        self.name, exc)
            self.leader_epoch_cache = LeaderEpochCache(dir_path)
            rebuild_epochs = True
        self._load_segments(recovery_point, log_start_offset, clean_shutdown, now_ms)
        if rebuild_epochs:
            self._rebuild_leader_epochs()
        self.txn_indexes.load([s.base_offset for s in self.segments], self.log_end_offset)
        self._load_producer_state(now_ms)
        self.high_watermark = self.log_end_offset
        self._last_flush_ms = now_ms
        return self

    def _rebuild_leader_epochs(self) -> None:
        cache = self.leader_epoch_cache
        cache.clear()
        for segment in self.segments:
            for _, header in segment.batches(0):
                self._recovered_batch(header)
        cache.truncate_from_start(self.log_start_offset)
        cache.flush()

    def _load_segments(self, recovery_point: int, log_start_offset: int, clean_shutdown: bool,
                       now_ms: int) -> None:
        config = self.config
        bases = []
        complete_interrupted_swaps(self.dir_path)  # a log cleaner's swap cut short by a crash
        names = set(os.listdir(self.dir_path))
        for name in names:
            if name.endswith((".tmp", ".deleted", ".cleaned", ".swap")):
                os.unlink(os.path.join(self.dir_path, name))
            elif name.endswith(LOG_SUFFIX) and name[:-len(LOG_SUFFIX)].isdigit():
                bases.append(int(name[:-len(LOG_SUFFIX)]))
        for name in names:
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                stem = name[:-len(suffix)]
                if name.endswith(suffix) and stem.isdigit() and int(stem) not in bases:
                    os.unlink(os.path.join(self.dir_path, name))
        bases.sort()
        segments = [LogSegment.open(self.dir_path, base, config.index_interval_bytes,
                                    config.segment_index_bytes) for base in bases]
        first_to_recover = len(segments)
        if not clean_shutdown:
            first_to_recover = max(0, bisect.bisect_right(bases, recovery_point) - 1)
        recovered = False
        started = time.monotonic()
        scanned = truncated_bytes = 0
        for i, segment in enumerate(segments):
            must_recover = segment.needs_recovery or i >= first_to_recover
            if not must_recover:
                try:
                    segment.load_tail()
                except TornBatch:
                    must_recover = True
            if must_recover:
                recovered = True
                scanned += 1
                truncated = segment.recover(self._recovered_batch)
                truncated_bytes += truncated
                if truncated:
                    log.warning("%s: corruption found in segment %d, truncated %d bytes: the log "
                                "now ends at offset %d", self.name, segment.base_offset,
                                truncated, segment.next_offset)
                if truncated and i + 1 < len(segments):
                    later = segments[i + 1:]
                    log.warning("%s: deleting %d segment(s) after the corruption, offsets %d..%d",
                                self.name, len(later), later[0].base_offset,
                                later[-1].next_offset - 1)
                    for segment in later:
                        segment.delete()
                    del segments[i + 1:]
                    break
        if scanned:
            log.info("%s: recovered %d segment(s) from offset %d, %d bytes truncated, in %.3f s",
                     self.name, scanned, segments[first_to_recover].base_offset
                     if first_to_recover < len(segments) else recovery_point,
                     truncated_bytes, time.monotonic() - started)
        self.recovery_stats = (scanned, truncated_bytes)
        if segments and log_start_offset > segments[-1].next_offset:
            # Kafka's LogLoader does the same (the segments were deleted behind its back, or
            # DeleteRecords reached the end): nothing below the log start offset may be served.
            log.warning("%s: deleting all segments (offsets %d..%d) because the log end offset %d "
                        "is below the checkpointed log start offset %d (log-start-offset-"
                        "checkpoint); this happens when segment files were deleted from the "
                        "file system", self.name, segments[0].base_offset,
                        segments[-1].next_offset - 1, segments[-1].next_offset, log_start_offset)
            for segment in segments:
                segment.delete()
            segments = []
            self.leader_epoch_cache.clear()
        if not segments:
            base = max(log_start_offset, 0)
            segments = [LogSegment.create(self.dir_path, base, config.index_interval_bytes,
                                          config.segment_index_bytes, now_ms,
                                          _preallocation(config))]
        self.segments = segments
        self.log_end_offset = segments[-1].next_offset
        self.log_start_offset = max(log_start_offset, segments[0].base_offset)
        if recovered:
            for segment in segments:
                if segment.size:  # an empty one has nothing to make durable (100k partitions)
                    segment.flush()
        self.recovery_point = self.log_end_offset
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
        self.leader_epoch_cache.truncate_from_start(self.log_start_offset)

    def _recovered_batch(self, header) -> None:
        epoch = header.partition_leader_epoch
        latest = self.leader_epoch_cache.latest_epoch
        if epoch >= 0 and (latest is None or epoch > latest):
            self.leader_epoch_cache.assign(epoch, header.base_offset)

    def _load_producer_state(self, now_ms: int) -> None:
        self._reload_producer_state()
        self.producer_state.remove_expired(now_ms, self.config.producer_id_expiration_ms)

    def _reload_producer_state(self) -> None:
        """The producer state from the newest snapshot in range and the batches after it
        (Kafka's truncateAndReload). A snapshot at or below the log start offset is dropped and
        nothing below the log start is replayed, so a producer whose batches are all gone
        (DeleteRecords, retention) is forgotten, as on Kafka: its next batch is accepted as the
        first of a producer this partition does not know."""
        state = self.producer_state
        state.delete_snapshots_above(self.log_end_offset)
        state.delete_snapshots_at_or_below(self.log_start_offset)
        snapshot = state.load_latest_snapshot(self.log_end_offset)
        start = max(self.segments[0].base_offset, self.log_start_offset,
                    snapshot if snapshot is not None else 0)
        self._replay_producer_state(start)

    def _replay_producer_state(self, start: int) -> None:
        state = self.producer_state
        for segment in self.segments:
            if segment.next_offset <= start:
                continue
            found = segment.find_batch(start)
            if found is None:
                continue
            for position, header in segment.batches(found[0]):
                if header.last_offset < start:
                    continue
                if header.is_control and header.producer_id >= 0:
                    self._replay_marker(segment, position, header)
                else:
                    state.replay(header)
        state.map_end_offset = self.log_end_offset

    # --- transactions (markers, aborted-transaction index) -----------------------------------

    def _replay_marker(self, segment, position: int, header) -> None:
        """Recovery: a marker closes its producer's transaction again; an abort the index lost
        (its entry was not written before a crash) is indexed again."""
        marker = _marker_of(segment.read_batch(position), self.name)
        completed = self.producer_state.replay(header, marker)
        if (completed is not None and completed.is_aborted
                and completed.last_offset > self.txn_indexes.last_indexed_offset):
            self._index_aborted(segment.base_offset, completed)

    def _index_aborted(self, segment_base: int, completed) -> None:
        lso = self.producer_state.last_stable_offset_after(completed)
        self.txn_indexes.append(segment_base, AbortedTxn(
            completed.producer_id, completed.first_offset, completed.last_offset, lso))

    @property
    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest open transaction (the LSO stops there), or None."""
        return self.producer_state.first_unstable_offset

    def collect_aborted_txns(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        return self.txn_indexes.collect(fetch_offset, upper_bound)

    # --- appends -----------------------------------------------------------------------------

    def append_as_leader(self, records, leader_epoch: int, now_ms: int | None = None, *,
                         from_client: bool = True, in_place: bool = False,
                         verification=VERIFICATION_OFF,
                         transaction_version: int = 0) -> AppendResult:
        """Validate and append one produced batch; raise :class:`KafkaError` (nothing written)
        on any failure. A retried idempotent batch returns its original offsets with
        ``duplicate=True``. ``from_client=False`` (coordinators) allows control batches.
        ``in_place``: the caller gives ``records`` up, so a writable buffer (a large request
        frame) is stamped where it is instead of being copied first. ``verification``: the guard
        a transactional batch was confirmed under (:mod:`kbroker.log.producer_state`);
        ``transaction_version``: the transaction version of a marker's transaction."""
        now_ms = _now_ms() if now_ms is None else now_ms
        valid = check_batch(records, self.config, now_ms, self.name, from_client)
        header = valid.header
        log_append_time = self.config.message_timestamp_type == "LogAppendTime"
        producer_id = header.producer_id
        marker = None
        if producer_id >= 0 and header.is_control:
            marker = _marker_of(header, self.name)
            if marker is not None:
                self.producer_state.check_marker(producer_id, header.producer_epoch, marker[1],
                                                 transaction_version)
        elif producer_id >= 0 and from_client:
            duplicate = self.producer_state.check(
                producer_id, header.producer_epoch, header.base_sequence, header.last_sequence,
                self.log_end_offset, header.is_transactional, verification)
            if duplicate is not None:
                return AppendResult(duplicate.first_offset, duplicate.last_offset,
                                    duplicate.timestamp if log_append_time else -1,
                                    self.log_start_offset, [], True)
        first_offset = self.log_end_offset
        last_offset = first_offset + header.last_offset_delta
        if valid.target_codec is not None:
            # compression.type names another codec: one new batch, same producer fields.
            batch, max_timestamp = rebuild_batch(valid, self.config, first_offset, leader_epoch,
                                                 now_ms, self.name)
        else:
            batch = header.view()
            if not in_place or batch.readonly:
                batch = bytearray(batch)
            set_base_offset(batch, 0, first_offset)
            set_partition_leader_epoch(batch, 0, leader_epoch)
            if log_append_time:
                set_max_timestamp_and_log_append_time(batch, 0, now_ms)
                max_timestamp = now_ms
            else:
                max_timestamp = header.max_timestamp
        size_before = None
        try:
            self._maybe_roll(len(batch), max_timestamp, last_offset, now_ms)
            size_before = self.active_segment.size
            self.active_segment.append(batch, last_offset, max_timestamp, last_offset)
        except OSError as exc:
            self._undo_failed_append(exc, first_offset, last_offset, size_before)
        self.log_end_offset = last_offset + 1
        latest_epoch = self.leader_epoch_cache.latest_epoch
        if leader_epoch >= 0 and (latest_epoch is None or leader_epoch > latest_epoch):
            self.leader_epoch_cache.assign(leader_epoch, first_offset)
        if producer_id >= 0:
            if header.is_control:
                completed = self.producer_state.replay(BatchHeader(batch, 0), marker)
                if completed is not None and completed.is_aborted:
                    self._index_aborted(self.active_segment.base_offset, completed)
            else:
                self.producer_state.update(producer_id, header.producer_epoch,
                                           header.last_sequence, first_offset, last_offset,
                                           max_timestamp, header.is_transactional)
        self.producer_state.map_end_offset = self.log_end_offset
        return AppendResult(first_offset, last_offset, now_ms if log_append_time else -1,
                            self.log_start_offset, [], False)

    def append_as_follower(self, records) -> int:
        """Append the batches a leader sent (a follower's fetch), keeping their offsets and
        leader epochs; returns the number of bytes appended. Nothing is re-stamped (Kafka's
        ``appendAsFollower``): each batch must start at or past the log end offset and pass its
        CRC, else CORRUPT_MESSAGE and nothing more of the response is written.
        A partial batch at the end (a size-limited fetch) is left for the next fetch."""
        appended = 0
        for header in iter_batches(records, allow_partial_tail=True):
            # Offsets may jump forward (the leader compacted batches away), never back.
            if header.base_offset < self.log_end_offset or not header.is_valid_crc():
                why = ("its CRC does not match" if header.base_offset >= self.log_end_offset
                       else f"it starts at {header.base_offset}, below the log end offset "
                            f"{self.log_end_offset}")
                raise KafkaError(Errors.CORRUPT_MESSAGE,
                                 f"{self.name}: a replicated batch is refused because {why}")
            batch = header.view()
            first_offset, last_offset = header.base_offset, header.last_offset
            max_timestamp = header.max_timestamp
            size_before = None
            try:
                self._maybe_roll(len(batch), max_timestamp, last_offset, _now_ms())
                size_before = self.active_segment.size
                self.active_segment.append(batch, last_offset, max_timestamp, last_offset)
            except OSError as exc:
                self._undo_failed_append(exc, first_offset, last_offset, size_before)
            self.log_end_offset = last_offset + 1
            epoch = header.partition_leader_epoch
            latest_epoch = self.leader_epoch_cache.latest_epoch
            if epoch >= 0 and (latest_epoch is None or epoch > latest_epoch):
                self.leader_epoch_cache.assign(epoch, first_offset)
            if header.producer_id >= 0:
                marker = _marker_of(header, self.name) if header.is_control else None
                completed = self.producer_state.replay(header, marker)
                if completed is not None and completed.is_aborted:
                    self._index_aborted(self.active_segment.base_offset, completed)
            appended += len(batch)
        self.producer_state.map_end_offset = self.log_end_offset
        return appended

    def _undo_failed_append(self, exc: OSError, first_offset: int, last_offset: int,
                            size_before: int | None):
        """A write failed (disk full, I/O error): drop whatever part of the batch reached the
        segment, so the log is as before the append, and answer KAFKA_STORAGE_ERROR. Later
        appends try again: writes resume when space returns."""
        segment = self.active_segment
        if size_before is not None and segment.size > size_before:
            # The batch is in the file but an index write failed: cut the batch off again.
            segment.next_offset = max(segment.next_offset, last_offset + 1)
            segment.truncate_to(first_offset)
        reason = "the disk is full" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else exc.strerror
        raise KafkaError(Errors.KAFKA_STORAGE_ERROR,
                         f"cannot append to {self.name}: {reason}") from None

    def _maybe_roll(self, batch_size: int, max_timestamp: int, last_offset: int,
                    now_ms: int) -> None:
        """Kafka's ``LogSegment.shouldRoll``: size, time since the segment's first batch
        timestamp (else its creation), full indexes, or an offset the index cannot hold."""
        segment = self.active_segment
        if segment.size == 0:
            return
        config = self.config
        first_ts = segment.first_batch_timestamp
        waited = (max_timestamp - first_ts if first_ts >= 0 and max_timestamp >= 0
                  else now_ms - segment.created_ms)
        if (segment.size > config.segment_bytes - batch_size
                or waited > config.segment_ms - config.segment_jitter_ms
                or not segment.can_index or not segment.can_hold(last_offset)):
            self.roll(now_ms)

    def roll(self, now_ms: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset (a no-op when the active one is
        empty). The producer state is snapshotted at the new base offset, as Kafka does."""
        now_ms = _now_ms() if now_ms is None else now_ms
        active = self.active_segment
        if active.size == 0:
            return active
        active.on_become_inactive()
        base = self.log_end_offset
        self.producer_state.take_snapshot(base)
        segment = LogSegment.create(self.dir_path, base, self.config.index_interval_bytes,
                                    self.config.segment_index_bytes, now_ms,
                                    _preallocation(self.config))
        self.segments.append(segment)
        return segment

    def replace_segments(self, cleaned: LogSegment, old_segments: list[LogSegment]) -> None:
        """Swap in the log cleaner's segment (``.cleaned`` files, flushed) for the consecutive,
        inactive ``old_segments`` it was written from, crash-safely
        (:mod:`kbroker.log.cleaner_swap`). Offsets are unchanged; old files are unlinked, so
        regions already handed out keep reading the old data."""
        first = self.segments.index(old_segments[0])
        if (self.segments[first:first + len(old_segments)] != old_segments
                or first + len(old_segments) >= len(self.segments)):
            raise ValueError("only consecutive inactive segments can be replaced")
        swap_in(self.dir_path, cleaned, old_segments)
        self.segments[first:first + len(old_segments)] = [cleaned]
        self.txn_indexes.merge_into(cleaned.base_offset, [s.base_offset for s in old_segments])

    # --- reads -------------------------------------------------------------------------------

    def _check_offset(self, offset: int) -> None:
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise KafkaError(Errors.OFFSET_OUT_OF_RANGE,
                             f"Received request for offset {offset} for partition {self.name}, "
                             f"but we only have log segments in the range "
                             f"{self.log_start_offset} to {self.log_end_offset}.")

    def _segment_index(self, offset: int) -> int:
        return max(0, bisect.bisect_right(self.segments, offset,
                                          key=lambda s: s.base_offset) - 1)

    def read(self, fetch_offset: int, max_bytes: int, max_offset_exclusive: int | None = None,
             min_one_message: bool = True) -> ReadResult:
        """Whole batches from the one containing ``fetch_offset``, up to ``max_bytes`` (but at
        least one batch with ``min_one_message``), never including a batch that reaches
        ``max_offset_exclusive`` (the high watermark or last stable offset)."""
        self._check_offset(fetch_offset)
        bound = self.log_end_offset
        if max_offset_exclusive is not None and max_offset_exclusive < bound:
            bound = max_offset_exclusive
        result = ReadResult([], 0, self.log_start_offset, self.log_end_offset,
                            self.high_watermark)
        if fetch_offset >= bound:
            return result
        try:
            for segment in self.segments[self._segment_index(fetch_offset):]:
                found = segment.find_batch(fetch_offset)
                if found is None:
                    continue
                start, header = found
                if header.last_offset >= bound:
                    return result
                limit = segment.size
                if bound < segment.next_offset:
                    upper = segment.find_batch(bound, start)
                    if upper is not None:
                        limit = upper[0]
                end = segment.batch_boundary_at_or_below(min(limit, start + max_bytes), start)
                if end == start:
                    if not min_one_message:
                        return result
                    end = start + header.size
                result.regions.append(segment.region(start, end))
                result.size = end - start
                return result
        except TornBatch as e:
            raise KafkaError(Errors.KAFKA_STORAGE_ERROR, f"{self.name}: {e}") from None
        return result

    # --- offsets by timestamp ----------------------------------------------------------------

    def fetch_offset_by_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        """ListOffsets: ``(offset, timestamp, leader_epoch)`` for a timestamp or one of
        the special values (-1 latest = log end offset, -2 earliest, -3 max timestamp, -4
        earliest local, -5 latest tiered). The handler substitutes the high watermark / last
        stable offset for "latest" as its isolation level requires."""
        cache = self.leader_epoch_cache
        if timestamp == EARLIEST_TIMESTAMP:
            earliest = cache.earliest_entry
            epoch = earliest[0] if earliest and earliest[1] <= self.log_start_offset else -1
            return self.log_start_offset, -1, epoch
        if timestamp == EARLIEST_LOCAL_TIMESTAMP:
            epoch = cache.epoch_for_offset(self.log_start_offset)
            return self.log_start_offset, -1, -1 if epoch is None else epoch
        if timestamp == LATEST_TIMESTAMP:
            latest = cache.latest_epoch
            return self.log_end_offset, -1, -1 if latest is None else latest
        if timestamp == LATEST_TIERED_TIMESTAMP:
            return -1, -1, -1
        if timestamp == MAX_TIMESTAMP:
            return self.max_timestamp_offset()
        if timestamp < 0:
            raise KafkaError(Errors.INVALID_REQUEST, f"unknown ListOffsets timestamp {timestamp}")
        return self.offset_for_timestamp(timestamp)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        """``(offset, timestamp, leader_epoch)`` of the first record whose timestamp is >=
        ``timestamp`` (Kafka's semantics), or None. The time index narrows the search to a
        position, batch headers to a batch, and only that batch's records are decoded. The
        leader epoch is the batch's (-1 when it has none)."""
        start_offset = self.log_start_offset
        for segment in self.segments:
            if segment.max_timestamp < timestamp:
                continue
            _, indexed_offset = segment.time_index.lookup(timestamp)
            position = segment.index.lookup(max(indexed_offset, start_offset))[1]
            for pos, header in segment.batches(position):
                if header.max_timestamp < timestamp or header.last_offset < start_offset:
                    continue
                found = self._first_record_at_or_after(segment, pos, header, timestamp,
                                                       start_offset)
                if found is not None:
                    return found
        return None

    def _first_record_at_or_after(self, segment, position, header, timestamp, start_offset):
        epoch = max(header.partition_leader_epoch, -1)
        if header.timestamp_type == LOG_APPEND_TIME:
            return max(header.base_offset, start_offset), header.max_timestamp, epoch
        batch = segment.read_batch(position)
        for record in decode_records(batch, MAX_UNCOMPRESSED_BATCH_BYTES):
            ts = record.timestamp(batch)
            offset = record.offset(batch)
            if ts >= timestamp and offset >= start_offset:
                return offset, ts, epoch
        return None

    def max_timestamp_offset(self) -> tuple[int, int, int] | None:
        """ListOffsets MAX_TIMESTAMP (KIP-734): the first record carrying the largest timestamp."""
        best = None
        for segment in self.segments:
            if segment.max_timestamp >= 0 and (best is None
                                               or segment.max_timestamp > best.max_timestamp):
                best = segment
        if best is None:
            return None
        target = best.max_timestamp
        position = best.index.lookup(best.offset_of_max_timestamp)[1]
        for pos, header in best.batches(position):
            if header.max_timestamp == target:
                return self._first_record_at_or_after(best, pos, header, target, 0)
        return None

    # --- retention and DeleteRecords ---------------------------------------------------------

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Retention: delete whole segments wholly below the log start offset, and with
        ``cleanup.policy`` delete, those past ``retention.ms`` (by their largest timestamp) or
        beyond ``retention.bytes``. Never deletes data above the high watermark; deleting the
        active segment rolls first. Returns the number of segments deleted."""
        now_ms = _now_ms() if now_ms is None else now_ms
        segments = self.segments
        if len(segments) == 1 and segments[0].size == 0:
            # An empty log has nothing to delete: a broker's worth of idle partitions is
            # checked every log.retention.check.interval.ms (1 s in the dev profile).
            self.producer_state.remove_expired(now_ms, self.config.producer_id_expiration_ms)
            return 0
        deleted = self._delete_segments_while(
            lambda segment, following: following is not None
            and following.base_offset <= self.log_start_offset, now_ms)
        config = self.config
        if "delete" in config.cleanup_policy:
            if config.retention_ms >= 0:
                deleted += self._delete_segments_while(
                    lambda segment, following: now_ms - segment.largest_timestamp
                    > config.retention_ms, now_ms)
            if config.retention_bytes >= 0:
                excess = self.size_in_bytes - config.retention_bytes

                def over_size(segment, following):
                    nonlocal excess
                    if excess - segment.size >= 0:
                        excess -= segment.size
                        return True
                    return False

                deleted += self._delete_segments_while(over_size, now_ms)
        self.producer_state.remove_expired(now_ms, config.producer_id_expiration_ms)
        return deleted

    def _delete_segments_while(self, predicate, now_ms: int) -> int:
        deletable = []
        segments = self.segments
        for i, segment in enumerate(segments):
            following = segments[i + 1] if i + 1 < len(segments) else None
            upper = following.base_offset if following is not None else self.log_end_offset
            if upper > self.high_watermark:
                break
            if following is None and segment.size == 0:
                break
            if not predicate(segment, following):
                break
            deletable.append(segment)
        if not deletable:
            return 0
        if len(deletable) == len(segments):
            self.roll(now_ms)
        for segment in deletable:
            segment.delete()
        self.txn_indexes.delete_segments(s.base_offset for s in deletable)
        del self.segments[:len(deletable)]
        self._log_start_moved(max(self.log_start_offset, self.segments[0].base_offset))
        return len(deletable)

    def _log_start_moved(self, new_start: int) -> None:
        self.log_start_offset = new_start
        self.leader_epoch_cache.truncate_from_start(new_start)
        self.producer_state.delete_snapshots_below(self.segments[0].base_offset)

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: raise the log start offset to ``offset`` (-1: the high watermark) and
        delete the segments wholly below it. Returns the new log start offset (low watermark)."""
        if offset == -1:
            offset = self.high_watermark
        if offset < 0 or offset > self.high_watermark:
            raise KafkaError(Errors.OFFSET_OUT_OF_RANGE,
                             f"Cannot increment the log start offset to {offset} of partition "
                             f"{self.name} since it is larger than the high watermark "
                             f"{self.high_watermark}")
        if offset > self.log_start_offset:
            self._log_start_moved(offset)
            self._delete_segments_while(
                lambda segment, following: following is not None
                and following.base_offset <= self.log_start_offset, _now_ms())
        return self.log_start_offset

    # --- flushing ----------------------------------------------------------------------------

    def flush(self, now_ms: int | None = None) -> None:
        """fsync every segment with data past the recovery point; move the recovery point."""
        end = self.log_end_offset
        self.leader_epoch_cache.sync()  # never data whose epoch could be lost in a crash
        for segment in self.segments:
            if segment.next_offset > self.recovery_point or segment is self.active_segment:
                segment.flush()
        self.txn_indexes.flush()
        self.recovery_point = end
        self._last_flush_ms = _now_ms() if now_ms is None else now_ms

    def flush_if_needed(self, now_ms: int | None = None) -> bool:
        """Kafka's ``flush.messages`` / ``flush.ms`` policy (both off by default)."""
        unflushed = self.log_end_offset - self.recovery_point
        if unflushed <= 0:
            return False
        now_ms = _now_ms() if now_ms is None else now_ms
        if (unflushed >= self.config.flush_messages
                or now_ms - self._last_flush_ms >= self.config.flush_ms):
            self.flush(now_ms)
            return True
        return False

    # --- truncation (followers) --------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Remove every batch at or above ``offset`` (a follower diverged from its leader)."""
        if offset >= self.log_end_offset:
            # Nothing to cut, but an epoch that starts at the log end goes all the same, as
            # Kafka's truncateTo does: this replica led that epoch and lost it before appending
            # anything. Kept, it stays this replica's latest epoch, so every fetch names it and
            # every answer is the same divergence at our own end: the follower never catches up
            # and never rejoins the ISR (a fault schedule found exactly that).
            self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            return
        if offset < self.segments[0].base_offset or offset < self.log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        while len(self.segments) > 1 and self.active_segment.base_offset > offset:
            removed = self.segments.pop()
            removed.delete()
            self.txn_indexes.delete_segments([removed.base_offset])
        self.txn_indexes.truncate_from(offset)
        self.active_segment.truncate_to(offset)
        self.log_end_offset = max(offset, self.active_segment.next_offset)
        self._after_truncation()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        for segment in self.segments:
            segment.delete()
        self.txn_indexes.delete_segments([s.base_offset for s in self.segments])
        self.segments = [LogSegment.create(self.dir_path, offset,
                                           self.config.index_interval_bytes,
                                           self.config.segment_index_bytes, _now_ms(),
                                           _preallocation(self.config))]
        self.log_start_offset = offset
        self.log_end_offset = offset
        self.leader_epoch_cache.clear()
        self.producer_state.delete_snapshots_above(-1)
        self.producer_state.truncate()
        self._after_truncation()

    def _after_truncation(self) -> None:
        end = self.log_end_offset
        self.high_watermark = min(self.high_watermark, end)
        self.recovery_point = min(self.recovery_point, end)
        self.leader_epoch_cache.truncate_from_end(end)
        self._reload_producer_state()

    # --- shutdown and deletion ---------------------------------------------------------------

    def close(self, flush: bool = True) -> None:
        """Clean shutdown: final time index entry, fsync, producer snapshot, close files.
        ``flush=False`` (a future log about to be renamed and opened again) skips the fsync and
        the snapshot: the recovery point stays where the data was last synced."""
        if self._closed:
            return
        self.active_segment.on_become_inactive()
        if not flush:
            for segment in self.segments:
                segment.close()
            self._closed = True
            return
        # An empty or already flushed log has nothing to sync and no producer state to snapshot
        # (Kafka skips a snapshot at an offset it already has); with 100,000 partitions the
        # five fsyncs each made a clean stop take minutes.
        if self.active_segment.size or self.log_end_offset > self.recovery_point:
            self.flush()
        # An empty log is decided before listing its dir: 100,000 listdirs were half a stop.
        if self.log_end_offset > self.segments[0].base_offset:
            snapshots = self.producer_state.snapshot_offsets()
            if not snapshots or snapshots[-1] != self.log_end_offset:
                self.producer_state.take_snapshot(self.log_end_offset)
        for segment in self.segments:
            segment.close()
        self._closed = True

    def delete(self) -> None:
        """Delete the partition: rename the dir to ``<topic>-<partition>.<uuid hex>-delete`` (so
        a crash midway leaves a dir the LogManager finishes deleting) and remove it. Segment
        files are not closed: regions in flight keep them readable."""
        for segment in self.segments:
            segment.index.close()
            segment.time_index.close()
            segment._file = None
        self.segments = []
        self._closed = True
        parent = os.path.dirname(self.dir_path.rstrip(os.sep))
        doomed = os.path.join(parent, f"{self.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        os.replace(self.dir_path, doomed)
        fsync_dir(parent)
        shutil.rmtree(doomed, ignore_errors=True)


def write_topic_id(dir_path: str, topic_id: uuid.UUID) -> None:
    """Write ``partition.metadata`` at creation without an fsync of its own.

    Kafka's PartitionMetadataFile only records the id at creation and writes the file later
    (``maybeFlush``), with no fsync of the partition dir. Here the file is written through a
    temp file and a rename (a reader never sees half of it); a kill -9 keeps it (page cache);
    the LogManager makes new partitions durable in one batch (``sync_created``). A file torn by
    a power loss before that (an empty file) is ignored at open (:func:`_read_topic_id`): the id is in the
    metadata image, and start-up repair re-creates a lost partition dir."""
    write_partition_metadata(dir_path, topic_id, durable=False)


def _read_topic_id(dir_path: str, name: str) -> uuid.UUID | None:
    path = os.path.join(dir_path, PARTITION_METADATA)
    try:
        empty = os.path.getsize(path) == 0
    except FileNotFoundError:
        return None
    if empty:
        # What a power loss can leave of the file written without fsync (write_topic_id): only
        # a creation-time record, so the partition stays online. Any other damage is an error.
        log.warning("%s: ignoring the empty %s; the topic id comes from the metadata image",
                    name, PARTITION_METADATA)
        return None
    return read_partition_metadata(dir_path)


def _marker_of(header, topic_partition: str):
    """``(aborted, coordinator epoch)`` of a transaction marker batch (whole batch in
    ``header``), or None for another control batch."""
    try:
        records = decode_records(header, MAX_UNCOMPRESSED_BATCH_BYTES)
        control_type, coordinator_epoch = parse_control_record(records[0])
    except (CorruptRecordError, IndexError) as exc:
        raise KafkaError(Errors.CORRUPT_MESSAGE,
                         f"bad control batch for {topic_partition}: {exc}") from None
    if coordinator_epoch is None:
        return None
    return control_type == CONTROL_ABORT, coordinator_epoch


__all__ = ["AppendResult", "LogConfig", "PartitionLog", "ReadResult", "EARLIEST_TIMESTAMP",
           "EARLIEST_LOCAL_TIMESTAMP", "LATEST_TIMESTAMP", "LATEST_TIERED_TIMESTAMP",
           "MAX_TIMESTAMP"]
