"""One cleaning round of one log: the offset map, the segment groups, the rewritten batches.

This is Kafka's ``Cleaner`` (``doClean``, ``buildOffsetMap``, ``groupSegmentsBySize``,
``cleanSegments``, ``cleanInto`` with ``MemoryRecords.filterTo``), for RecordBatch v2 only:

* **Offset map.** Every keyed record of the dirty section ``[first dirty, first uncleanable)``
  maps its key to its offset (the last one wins). When the map is full the round stops there:
  ``end offset = latest mapped offset + 1`` and the rest stays dirty for the next round.
* **Groups.** The segments below the end offset (clean and dirty alike) are grouped so that a
  group's log and index sizes fit ``segment.bytes`` / ``segment.index.bytes`` and its offsets fit
  an index; each group is rewritten into one segment with the first one's base offset.
* **Records kept.** A record is kept when its offset is past the map, or it is the latest for its
  key and is not a tombstone whose delete horizon has passed. Keyless records are dropped (they
  cannot exist in a compacted topic).
* **Transactions** (:mod:`kbroker.log.cleaner_txn`): aborted data is dropped and stays out of
  the offset map; a marker left with no data of its transaction gets a delete horizon and goes
  once it has passed; the cleaned segment's ``.txnindex`` keeps the aborts whose marker stayed.
* **Delete horizon (KIP-534).** The first round that keeps a tombstone stamps its batch with
  ``delete horizon = now + delete.retention.ms`` (attribute bit 6, carried as the base timestamp);
  a later round drops the tombstone once ``now >= horizon``.
* **Batches.** A batch whose records are all kept is copied byte for byte. Otherwise it is
  rebuilt with the kept records at their original offsets, the same base offset *and last offset
  delta* (so the last sequence of an idempotent producer survives), producer id, epoch, base
  sequence, leader epoch, flags, timestamp type and codec. A batch left empty is dropped, except
  an active producer's last batch (it carries the sequence needed to dedupe) and the last batch
  of the round (so the last offset is not lost), which keep their header with no records, as in
  Kafka. A cleaned segment may end up empty, like Kafka's; reads skip it.

All of it runs on the event loop thread, as a generator that yields between batches so that the
caller can give the loop back (see :class:`kbroker.log.cleaner.LogCleaner`). The log may change
between yields; the swap of each group checks that the group's segments are still there and
unchanged, else the round is abandoned (:class:`CleaningAborted`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from kbroker.protocol.crc import crc32c

from kbroker.log.cleaner_swap import CLEANED_SUFFIX
from kbroker.log.cleaner_txn import TransactionTracker
from kbroker.log.index import OffsetIndex, TimeIndex
from kbroker.log.segment import LogSegment
from kbroker.log.validation import MAX_UNCOMPRESSED_BATCH_BYTES
from kbroker.protocol import compression as codecs
from kbroker.protocol.records import (BATCH_HEADER_SIZE, COMPRESSION_CODEC_MASK,
                                      DELETE_HORIZON_FLAG_MASK, HEADER, HEADER_TAIL,
                                      LOG_APPEND_TIME, LOG_OVERHEAD, MAGIC, BatchHeader,
                                      decode_records, write_varint)

INT32_MAX = 2**31 - 1
# Kafka's map holds a 16-byte hash and an 8-byte offset per key, filled to 90%; a Python dict
# entry costs more, so the budget counts key bytes plus an estimate of the per-entry overhead.
MAP_ENTRY_OVERHEAD = 100


class CleaningAborted(Exception):
    """The log changed under the cleaner; the round is abandoned and its files deleted."""


@dataclass
class CleanerStats:
    batches_read: int = 0
    records_read: int = 0
    records_retained: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    groups: int = 0


class OffsetMap:
    """key -> latest offset over the dirty section, bounded by a memory budget in bytes."""

    def __init__(self, budget_bytes: int):
        self.budget_bytes = budget_bytes
        self.offsets: dict[bytes, int] = {}
        self.used_bytes = 0
        self.latest_offset = -1

    def put(self, key: bytes, offset: int) -> bool:
        """Map ``key``; False (nothing changed) when a new key does not fit the budget."""
        if key not in self.offsets:
            cost = len(key) + MAP_ENTRY_OVERHEAD
            if self.used_bytes + cost > self.budget_bytes and self.offsets:
                return False
            self.used_bytes += cost
        self.offsets[key] = offset
        return True

    def get(self, key: bytes) -> int:
        return self.offsets.get(key, -1)


@dataclass
class RoundContext:
    offset_map: OffsetMap
    now_ms: int
    delete_retention_ms: int
    last_offsets_of_producers: dict[int, int]   # producer id -> last data offset
    end_offset: int = -1                         # the round's upper bound: its last batch stays
    stats: CleanerStats = field(default_factory=CleanerStats)
    txns: TransactionTracker = field(default_factory=TransactionTracker)  # the current group's


def build_offset_map(log, start: int, end: int, offset_map: OffsetMap, stats: CleanerStats):
    """Generator: fill ``offset_map`` from the batches in ``[start, end)``; yields between
    batches. Stops early (at a record) when the map is full. Aborted data is not mapped."""
    txns = TransactionTracker(log.collect_aborted_txns(start, end))
    for i, segment in enumerate(log.segments):
        following = log.segments[i + 1].base_offset if i + 1 < len(log.segments) else None
        if segment.base_offset >= end or (following is not None and following <= start):
            continue
        position = segment.index.lookup(start)[1]
        for _, header in segment.batches(position, full=True):
            if header.base_offset >= end:
                break
            if header.is_control:
                txns.on_control_batch(header)
            elif not txns.on_data_batch(header):
                for record in decode_records(header, MAX_UNCOMPRESSED_BATCH_BYTES):
                    offset = header.base_offset + record.offset_delta
                    if record.key is not None and start <= offset < end:
                        if not offset_map.put(record.key, offset):
                            return
            if header.last_offset >= start:
                offset_map.latest_offset = max(offset_map.latest_offset,
                                               min(header.last_offset, end - 1))
            yield
        # A gap at the end of the segment (offsets removed by an earlier cleaning) is mapped too.
        if following is not None and following <= end:
            offset_map.latest_offset = max(offset_map.latest_offset, following - 1)


def group_segments_by_size(segments: list[LogSegment], max_size: int, max_index_size: int,
                           first_uncleanable_offset: int) -> list[list[LogSegment]]:
    """Kafka's ``groupSegmentsBySize``: consecutive segments whose total log and index sizes
    fit ``max_size`` / ``max_index_size`` and whose offsets fit one segment's index."""
    groups = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        log_size = segments[i].size
        index_size = len(segments[i].index) * OffsetIndex.entry_size
        time_index_size = len(segments[i].time_index) * TimeIndex.entry_size
        i += 1
        while i < len(segments):
            candidate = segments[i]
            last_offset = (segments[i + 1].base_offset - 1 if i + 1 < len(segments)
                           else first_uncleanable_offset - 1)
            if not (log_size + candidate.size <= max_size
                    and index_size + len(candidate.index) * OffsetIndex.entry_size
                    <= max_index_size
                    and time_index_size + len(candidate.time_index) * TimeIndex.entry_size
                    <= max_index_size
                    and (candidate.size == 0 or last_offset - group[0].base_offset <= INT32_MAX)):
                break
            group.append(candidate)
            log_size += candidate.size
            index_size += len(candidate.index) * OffsetIndex.entry_size
            time_index_size += len(candidate.time_index) * TimeIndex.entry_size
            i += 1
        groups.append(group)
    return groups


def create_cleaned_segment(dir_path: str, base_offset: int, config, now_ms: int) -> LogSegment:
    """An empty segment whose three files carry the ``.cleaned`` suffix."""
    segment = LogSegment(dir_path, base_offset, config.index_interval_bytes,
                         config.segment_index_bytes, now_ms)
    segment.log_path += CLEANED_SUFFIX
    segment.index = OffsetIndex(segment.index.path + CLEANED_SUFFIX, base_offset,
                                config.segment_index_bytes)
    segment.time_index = TimeIndex(segment.time_index.path + CLEANED_SUFFIX, base_offset,
                                   config.segment_index_bytes)
    segment._file = open(segment.log_path, "w+b", buffering=0)
    segment.index.reset()
    segment.time_index.reset()
    return segment


def clean_group(log, group: list[LogSegment], ctx: RoundContext, cleaned: LogSegment):
    """Generator: filter every batch of ``group`` into ``cleaned``; yields between batches.
    ``ctx.txns`` is the group's transaction tracker (Kafka: one per cleaned segment), fed with
    each segment's aborted transactions."""
    ctx.txns = TransactionTracker()
    segments = log.segments
    for segment in group:
        position = next(i for i, s in enumerate(segments) if s is segment)
        upper = (segments[position + 1].base_offset if position + 1 < len(segments)
                 else log.log_end_offset)
        ctx.txns.add_aborted(log.collect_aborted_txns(segment.base_offset, upper))
        for _, header in segment.batches(0, segment.size, full=True):
            data = filter_batch(header, ctx, header.next_offset == ctx.end_offset)
            ctx.stats.bytes_read += header.size
            if data is not None:
                out = BatchHeader(data)
                cleaned.append(data, out.last_offset, out.max_timestamp, out.last_offset)
                ctx.stats.bytes_written += len(data)
            yield


def filter_batch(header: BatchHeader, ctx: RoundContext, keep_empty: bool = False):
    """The bytes to write for one batch, or None to drop it (rules in the module docstring)."""
    ctx.stats.batches_read += 1
    if header.is_control:
        return filter_marker(header, ctx, keep_empty)
    if header.producer_id >= 0 and \
            ctx.last_offsets_of_producers.get(header.producer_id) == header.last_offset:
        keep_empty = True
    if ctx.txns.on_data_batch(header):  # aborted data
        ctx.stats.records_read += header.record_count
        return empty_batch(header) if keep_empty else None
    records = decode_records(header, MAX_UNCOMPRESSED_BATCH_BYTES)
    ctx.stats.records_read += len(records)
    offset_map = ctx.offset_map
    base_offset = header.base_offset
    horizon = header.delete_horizon_ms
    horizon_passed = horizon is not None and ctx.now_ms >= horizon
    kept = []
    has_tombstone = False
    for record in records:
        offset = base_offset + record.offset_delta
        if offset > offset_map.latest_offset:
            keep = True
        elif record.key is None:
            keep = False
        else:
            keep = offset >= offset_map.get(record.key) and (
                record.value is not None or not horizon_passed)
        if keep:
            kept.append(record)
            has_tombstone = has_tombstone or record.value is None
    ctx.stats.records_retained += len(kept)
    set_horizon = has_tombstone and horizon is None
    if len(kept) == len(records) and not set_horizon:
        return bytes(header.view())
    if kept:
        new_horizon = ctx.now_ms + ctx.delete_retention_ms if set_horizon else horizon
        return rebuild_batch(header, kept, new_horizon)
    if keep_empty:
        return empty_batch(header)
    return None


def filter_marker(header: BatchHeader, ctx: RoundContext, keep_empty: bool):
    """A control batch: kept while its transaction has data; once removable it gets a delete
    horizon, and goes when a round passes it (see :mod:`kbroker.log.cleaner_txn`)."""
    if not ctx.txns.on_control_batch(header):
        return bytes(header.view())
    horizon = header.delete_horizon_ms
    if horizon is None:
        records = decode_records(header, MAX_UNCOMPRESSED_BATCH_BYTES)
        if records:
            return rebuild_batch(header, records, ctx.now_ms + ctx.delete_retention_ms)
    elif ctx.now_ms < horizon:
        return bytes(header.view())
    return empty_batch(header) if keep_empty else None


def _write_bytes(out: bytearray, data) -> None:
    if data is None:
        out.append(1)  # zig-zag -1
    else:
        write_varint(out, len(data))
        out += data


def _seal(header: BatchHeader, attributes: int, base_timestamp: int, max_timestamp: int,
          count: int, body) -> bytes:
    tail = HEADER_TAIL.pack(attributes, header.last_offset_delta, base_timestamp, max_timestamp,
                            header.producer_id, header.producer_epoch, header.base_sequence,
                            count)
    crc = crc32c(body, crc32c(tail))
    head = HEADER.pack(header.base_offset, BATCH_HEADER_SIZE - LOG_OVERHEAD + len(body),
                       header.partition_leader_epoch, MAGIC, crc)
    return b"".join((head, tail, body))


def rebuild_batch(header: BatchHeader, records, delete_horizon_ms: int | None) -> bytes:
    """``header``'s batch with only ``records`` (Kafka's ``buildRetainedRecordsInto`` with
    ``overrideLastOffset``): same base offset, last offset delta, producer fields and codec.
    With a delete horizon the base timestamp is the horizon (KIP-534); a LogAppendTime batch
    keeps its append time as every record's timestamp."""
    timestamps = [record.timestamp(header) for record in records]
    base_timestamp = timestamps[0] if delete_horizon_ms is None else delete_horizon_ms
    if header.timestamp_type == LOG_APPEND_TIME:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = max(timestamps)
    body = bytearray()
    for record, timestamp in zip(records, timestamps):
        encoded = bytearray((record.attributes,))
        write_varint(encoded, timestamp - base_timestamp)
        write_varint(encoded, record.offset_delta)
        _write_bytes(encoded, record.key)
        _write_bytes(encoded, record.value)
        write_varint(encoded, len(record.headers))
        for key, value in record.headers:
            _write_bytes(encoded, key.encode("utf-8", "surrogateescape"))
            _write_bytes(encoded, value)
        write_varint(body, len(encoded))
        body += encoded
    codec = header.compression
    if codec != codecs.NONE:
        body = codecs.compress(codec, body)
    attributes = header.attributes & ~DELETE_HORIZON_FLAG_MASK
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_FLAG_MASK
    return _seal(header, attributes, base_timestamp, max_timestamp, len(records), body)


def empty_batch(header: BatchHeader) -> bytes:
    """The header alone, no records (Kafka's ``DefaultRecordBatch.writeEmptyHeader``): both
    timestamps are the batch's max timestamp, no codec, no delete horizon."""
    attributes = header.attributes & ~(COMPRESSION_CODEC_MASK | DELETE_HORIZON_FLAG_MASK)
    return _seal(header, attributes, header.max_timestamp, header.max_timestamp, 0, b"")


def finish_cleaned_segment(cleaned: LogSegment, group: list[LogSegment]) -> None:
    """Final time index entry, fsync, and the last group segment's modification time (Kafka
    keeps it, so time-based retention of compact,delete topics is not reset by cleaning)."""
    cleaned.on_become_inactive()
    cleaned.flush()
    mtime = os.stat(group[-1].log_path).st_mtime
    os.utime(cleaned.log_path, (mtime, mtime))


def discard_cleaned_segment(cleaned: LogSegment) -> None:
    cleaned.close()
    for path in (cleaned.log_path, cleaned.index.path, cleaned.time_index.path):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
