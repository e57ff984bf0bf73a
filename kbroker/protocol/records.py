"""RecordBatch v2 (magic 2): a zero-copy header view, a builder, record decoding, control records.

The layout is Kafka's ``DefaultRecordBatch``; all integers are big-endian::

    offset  size  field
         0     8  baseOffset              patched by the broker (outside the CRC)
         8     4  batchLength             bytes after this field
        12     4  partitionLeaderEpoch    patched by the broker (outside the CRC)
        16     1  magic                   2
        17     4  crc                     CRC32C of bytes 21..end, unsigned
        21     2  attributes              bits 0-2 codec, 3 timestamp type, 4 transactional,
                                          5 control, 6 has delete horizon (KIP-534)
        23     4  lastOffsetDelta
        27     8  baseTimestamp           the delete horizon when bit 6 is set
        35     8  maxTimestamp
        43     8  producerId
        51     2  producerEpoch
        53     4  baseSequence
        57     4  records count
        61        records (compressed as one block when the codec is not none)

A record is ``length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
key (varint length, -1 = null), value (same), header count varint, headers (key: varint length +
UTF-8, value: varint length or -1)``; varints are zig-zag (protobuf ``sint32``/``sint64``).

The broker handles batches through :class:`BatchHeader` (``struct.unpack_from`` at fixed offsets,
nothing copied) and decodes records only where semantics need them (compaction, coordinator
state). Every malformed input raises :class:`CorruptRecordError` or, from the codecs,
:class:`~kbroker.protocol.compression.CompressionError`; both are ``DecodeError``.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from kbroker.protocol.crc import crc32c

from kbroker.protocol import compression as _codecs
from kbroker.protocol.compression import NONE
from kbroker.protocol.primitives import DecodeError

# --- layout ----------------------------------------------------------------------------------------

BASE_OFFSET_OFFSET = 0
BATCH_LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = 61

BATCH_HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength
# Bytes the magic byte needs to be readable (Kafka's HEADER_SIZE_UP_TO_MAGIC).
HEADER_SIZE_UP_TO_MAGIC = MAGIC_OFFSET + 1
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD  # 49
MAGIC = 2

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

CREATE_TIME = 0
LOG_APPEND_TIME = 1

CONTROL_ABORT = 0
CONTROL_COMMIT = 1
# Control keys and EndTransactionMarker values carry a version; we write 0.
CONTROL_RECORD_VERSION = 0
END_TXN_MARKER_VERSION = 0

_INT32_MAX = 0x7FFFFFFF

# Everything from attributes to the records count: the part the CRC covers.
HEADER_TAIL = struct.Struct(">hiqqqhii")
HEADER = struct.Struct(">qiibI")  # the part before attributes

_unpack_i8 = struct.Struct(">b").unpack_from
_unpack_i16 = struct.Struct(">h").unpack_from
_unpack_i32 = struct.Struct(">i").unpack_from
_unpack_u32 = struct.Struct(">I").unpack_from
_unpack_i64 = struct.Struct(">q").unpack_from
_pack_into_i16 = struct.Struct(">h").pack_into
_pack_into_i32 = struct.Struct(">i").pack_into
_pack_into_u32 = struct.Struct(">I").pack_into
_pack_into_i64 = struct.Struct(">q").pack_into
_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_VALUE = struct.Struct(">hi")


class CorruptRecordError(DecodeError):
    """A record batch or record is malformed (Kafka's CorruptRecordException/InvalidRecordException)."""


# --- batch header view ---------------------------------------------------------------------------

class BatchHeader:
    """A lazy view of the batch header at ``buf[pos:]``; each property reads its field on access.

    ``buf`` is bytes, a bytearray or a memoryview and is not copied. The caller guarantees the
    whole batch is in ``buf`` (:func:`iter_batches` does).
    """

    __slots__ = ("buf", "pos")

    def __init__(self, buf, pos: int = 0):
        self.buf = buf
        self.pos = pos

    @property
    def base_offset(self) -> int:
        return _unpack_i64(self.buf, self.pos)[0]

    @property
    def batch_length(self) -> int:
        return _unpack_i32(self.buf, self.pos + BATCH_LENGTH_OFFSET)[0]

    @property
    def partition_leader_epoch(self) -> int:
        return _unpack_i32(self.buf, self.pos + PARTITION_LEADER_EPOCH_OFFSET)[0]

    @property
    def magic(self) -> int:
        return _unpack_i8(self.buf, self.pos + MAGIC_OFFSET)[0]

    @property
    def crc(self) -> int:
        return _unpack_u32(self.buf, self.pos + CRC_OFFSET)[0]

    @property
    def attributes(self) -> int:
        return _unpack_i16(self.buf, self.pos + ATTRIBUTES_OFFSET)[0]

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def last_offset_delta(self) -> int:
        return _unpack_i32(self.buf, self.pos + LAST_OFFSET_DELTA_OFFSET)[0]

    @property
    def base_timestamp(self) -> int:
        return _unpack_i64(self.buf, self.pos + BASE_TIMESTAMP_OFFSET)[0]

    @property
    def max_timestamp(self) -> int:
        return _unpack_i64(self.buf, self.pos + MAX_TIMESTAMP_OFFSET)[0]

    @property
    def producer_id(self) -> int:
        return _unpack_i64(self.buf, self.pos + PRODUCER_ID_OFFSET)[0]

    @property
    def producer_epoch(self) -> int:
        return _unpack_i16(self.buf, self.pos + PRODUCER_EPOCH_OFFSET)[0]

    @property
    def base_sequence(self) -> int:
        return _unpack_i32(self.buf, self.pos + BASE_SEQUENCE_OFFSET)[0]

    @property
    def record_count(self) -> int:
        return _unpack_i32(self.buf, self.pos + RECORDS_COUNT_OFFSET)[0]

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, log overhead included."""
        return _unpack_i32(self.buf, self.pos + BATCH_LENGTH_OFFSET)[0] + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record; sequences wrap from INT32_MAX to 0 (DefaultRecordBatch)."""
        base = self.base_sequence
        if base == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(base, self.last_offset_delta)

    @property
    def delete_horizon_ms(self) -> int | None:
        return self.base_timestamp if self.has_delete_horizon else None

    def fields(self) -> tuple:
        """All 13 header fields in layout order (baseOffset .. records count), in two unpacks."""
        return HEADER.unpack_from(self.buf, self.pos) + HEADER_TAIL.unpack_from(
            self.buf, self.pos + ATTRIBUTES_OFFSET)

    def view(self) -> memoryview:
        """The whole batch, without copying."""
        return memoryview(self.buf)[self.pos:self.pos + self.size]

    def records_view(self) -> memoryview:
        """The (possibly compressed) record bytes after the header, without copying."""
        return memoryview(self.buf)[self.pos + RECORDS_OFFSET:self.pos + self.size]

    def compute_crc(self) -> int:
        return crc32c(memoryview(self.buf)[self.pos + ATTRIBUTES_OFFSET:self.pos + self.size])

    def is_valid_crc(self) -> bool:
        return self.crc == self.compute_crc()

    def __repr__(self) -> str:
        return (f"BatchHeader(base_offset={self.base_offset}, last_offset_delta={self.last_offset_delta},"
                f" size={self.size}, magic={self.magic}, attributes={self.attributes:#x},"
                f" records={self.record_count}, producer_id={self.producer_id},"
                f" producer_epoch={self.producer_epoch}, base_sequence={self.base_sequence})")


def increment_sequence(sequence: int, increment: int) -> int:
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


def iter_batches(buf, allow_partial_tail: bool = False) -> Iterator[BatchHeader]:
    """Walk consecutive batches in ``buf``. The CRC is not checked (call ``is_valid_crc()``).

    A batch that runs past the end of ``buf`` raises :class:`CorruptRecordError`, or ends the
    iteration when ``allow_partial_tail`` (a fetch response may end in a partial batch).
    """
    end = len(buf)
    pos = 0
    while pos < end:
        remaining = end - pos
        if remaining < LOG_OVERHEAD:
            if allow_partial_tail:
                return
            raise CorruptRecordError(
                f"truncated batch at position {pos}: {remaining} bytes, need {LOG_OVERHEAD} for its length")
        batch_length = _unpack_i32(buf, pos + BATCH_LENGTH_OFFSET)[0]
        if batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(
                f"batch at position {pos} has length {batch_length}, below the minimum {MIN_BATCH_LENGTH}")
        if remaining >= HEADER_SIZE_UP_TO_MAGIC:
            magic = _unpack_i8(buf, pos + MAGIC_OFFSET)[0]
            if magic != MAGIC:
                raise CorruptRecordError(f"batch at position {pos} has magic {magic}, only {MAGIC} is supported")
        size = batch_length + LOG_OVERHEAD
        if size > remaining:
            if allow_partial_tail:
                return
            raise CorruptRecordError(
                f"batch at position {pos} has size {size} but only {remaining} bytes remain")
        yield BatchHeader(buf, pos)
        pos += size


def zstd_batch(buf) -> bool:
    """Whether ``buf`` starts with a v2 batch compressed with ZStandard, which produce requests
    before v7 may not carry (Kafka's ``ProduceRequest.validateRecords``, KIP-110)."""
    return (len(buf) > ATTRIBUTES_OFFSET + 1 and buf[MAGIC_OFFSET] == MAGIC
            and buf[ATTRIBUTES_OFFSET + 1] & COMPRESSION_CODEC_MASK == _codecs.ZSTD)


def set_base_offset(buf, pos: int, offset: int) -> None:
    """Assign the batch's base offset in place (outside the CRC)."""
    _pack_into_i64(buf, pos + BASE_OFFSET_OFFSET, offset)


def set_partition_leader_epoch(buf, pos: int, epoch: int) -> None:
    """Stamp the leader epoch in place (outside the CRC)."""
    _pack_into_i32(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_max_timestamp_and_log_append_time(buf, pos: int, timestamp_ms: int) -> None:
    """Mark the batch LOG_APPEND_TIME with ``timestamp_ms`` as its max timestamp, in place.

    Both fields are covered by the CRC, so it is recomputed (Kafka's
    ``DefaultRecordBatch.setMaxTimestamp``); a no-op when the batch already says so.
    """
    header = BatchHeader(buf, pos)
    attributes = header.attributes
    if attributes & TIMESTAMP_TYPE_MASK and header.max_timestamp == timestamp_ms:
        return
    _pack_into_i16(buf, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _pack_into_i64(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp_ms)
    _pack_into_u32(buf, pos + CRC_OFFSET, header.compute_crc())


# --- varints ---------------------------------------------------------------------------------------
# Readers take a bytes-like ``data`` and raise IndexError past its end; callers turn that into
# CorruptRecordError once per batch rather than checking every byte.

def read_varint(data, pos: int) -> tuple[int, int]:
    """Zig-zag varint of at most 5 bytes, as Kafka's ByteUtils.readVarint (32-bit wrap)."""
    b = data[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    raw = b & 0x7F
    shift = 7
    pos += 1
    while True:
        b = data[pos]
        pos += 1
        if b < 0x80:
            raw = (raw | (b << shift)) & 0xFFFFFFFF
            return (raw >> 1) ^ -(raw & 1), pos
        raw |= (b & 0x7F) << shift
        shift += 7
        if shift > 28:
            raise CorruptRecordError("varint is longer than 5 bytes")


def read_varlong(data, pos: int) -> tuple[int, int]:
    """Zig-zag varint of at most 10 bytes (ByteUtils.readVarlong, 64-bit wrap)."""
    b = data[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    raw = b & 0x7F
    shift = 7
    pos += 1
    while True:
        b = data[pos]
        pos += 1
        if b < 0x80:
            raw = (raw | (b << shift)) & 0xFFFFFFFFFFFFFFFF
            return (raw >> 1) ^ -(raw & 1), pos
        raw |= (b & 0x7F) << shift
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varlong is longer than 10 bytes")


def write_varint(out: bytearray, value: int) -> None:
    """Append ``value`` (a signed 32- or 64-bit int) as a zig-zag varint."""
    raw = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


write_varlong = write_varint


def size_of_varint(value: int) -> int:
    raw = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    return max(1, (raw.bit_length() + 6) // 7)


# --- records ---------------------------------------------------------------------------------------

@dataclass(slots=True)
class Record:
    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    attributes: int = 0

    def offset(self, header: BatchHeader) -> int:
        return header.base_offset + self.offset_delta

    def timestamp(self, header: BatchHeader) -> int:
        """The record's timestamp; every record of a LOG_APPEND_TIME batch has the batch's max."""
        if header.timestamp_type == LOG_APPEND_TIME:
            return header.max_timestamp
        return header.base_timestamp + self.timestamp_delta


def _batch_records_data(header: BatchHeader, max_uncompressed_size: int):
    codec = header.compression
    if codec == NONE:
        return bytes(header.records_view())
    return _codecs.decompress(codec, header.records_view(), max_uncompressed_size)


def decode_records(header: BatchHeader, max_uncompressed_size: int) -> list[Record]:
    """Decode every record of a batch, decompressing at most ``max_uncompressed_size`` bytes.

    Header keys are decoded as UTF-8 with ``surrogateescape`` so that invalid bytes round-trip
    unchanged through :class:`RecordBatchBuilder` (Java would silently replace them).
    """
    count = header.record_count
    if count < 0:
        raise CorruptRecordError(f"negative record count {count}")
    data = _batch_records_data(header, max_uncompressed_size)
    end = len(data)
    records: list[Record] = []
    append = records.append
    pos = 0
    try:
        for _ in range(count):
            size, pos = read_varint(data, pos)
            record_end = pos + size
            if size < 0 or record_end > end:
                raise CorruptRecordError(f"record {len(records)} has length {size}, {end - pos} bytes remain")
            attributes = data[pos]
            timestamp_delta, pos = read_varlong(data, pos + 1)
            offset_delta, pos = read_varint(data, pos)
            length, pos = read_varint(data, pos)
            if length >= 0:
                if pos + length > record_end:
                    raise CorruptRecordError(f"record {len(records)}: key runs past the record")
                key = data[pos:pos + length]
                pos += length
            else:
                key = None
            length, pos = read_varint(data, pos)
            if length >= 0:
                if pos + length > record_end:
                    raise CorruptRecordError(f"record {len(records)}: value runs past the record")
                value = data[pos:pos + length]
                pos += length
            else:
                value = None
            header_count, pos = read_varint(data, pos)
            if header_count < 0:
                raise CorruptRecordError(f"record {len(records)} has {header_count} headers")
            headers = []
            for _ in range(header_count):
                length, pos = read_varint(data, pos)
                if length < 0 or pos + length > record_end:
                    raise CorruptRecordError(f"record {len(records)}: invalid header key length {length}")
                header_key = data[pos:pos + length].decode("utf-8", "surrogateescape")
                pos += length
                length, pos = read_varint(data, pos)
                if length >= 0:
                    if pos + length > record_end:
                        raise CorruptRecordError(f"record {len(records)}: header value runs past the record")
                    header_value = data[pos:pos + length]
                    pos += length
                else:
                    header_value = None
                headers.append((header_key, header_value))
            if pos != record_end:
                raise CorruptRecordError(
                    f"record {len(records)} declares {size} bytes but its fields end {pos - record_end:+d} bytes off")
            append(Record(offset_delta, timestamp_delta, key, value, headers, attributes))
    except IndexError:
        raise CorruptRecordError(f"record {len(records)} is truncated") from None
    if pos != end:
        raise CorruptRecordError(
            f"batch declares {count} records but {end - pos} bytes remain after them")
    return records


def count_records(header: BatchHeader, max_uncompressed_size: int) -> int:
    """Count the records by their length prefixes only (to catch a lying records count)."""
    data = _batch_records_data(header, max_uncompressed_size)
    end = len(data)
    pos = 0
    count = 0
    try:
        while pos < end:
            size, pos = read_varint(data, pos)
            if size < 0 or pos + size > end:
                raise CorruptRecordError(f"record {count} has length {size}, {end - pos} bytes remain")
            pos += size
            count += 1
    except IndexError:
        raise CorruptRecordError(f"record {count} is truncated") from None
    return count


# --- building --------------------------------------------------------------------------------------

class RecordBatchBuilder:
    """Accumulate records, then :meth:`build` one v2 batch (compressed, CRC'd)."""

    __slots__ = ("compression", "compression_level", "timestamp_type", "producer_id",
                 "producer_epoch", "base_sequence", "is_transactional", "is_control",
                 "partition_leader_epoch", "base_offset", "_records", "_count",
                 "_base_timestamp", "_max_timestamp", "_next_offset_delta")

    def __init__(self, compression: int = NONE, timestamp_type: int = CREATE_TIME,
                 producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                 base_sequence: int = NO_SEQUENCE, is_transactional: bool = False,
                 is_control: bool = False, partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                 base_offset: int = 0, compression_level: int | None = None):
        if compression not in _codecs.CODEC_NAMES:
            raise ValueError(f"unknown compression codec id {compression}")
        self.compression = compression
        self.compression_level = compression_level
        self.timestamp_type = timestamp_type
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        self.is_control = is_control
        self.partition_leader_epoch = partition_leader_epoch
        self.base_offset = base_offset
        self._records = bytearray()
        self._count = 0
        self._base_timestamp: int | None = None
        self._max_timestamp: int | None = None
        self._next_offset_delta = 0

    def __len__(self) -> int:
        return self._count

    def append(self, timestamp_ms: int, key: bytes | None, value: bytes | None,
               headers: Iterable[tuple[str, bytes | None]] = (), *,
               offset_delta: int | None = None, attributes: int = 0) -> int:
        """Add a record and return its offset delta. ``offset_delta`` may skip ahead (a compacted
        batch keeps its records' original offsets) but never go back."""
        if offset_delta is None:
            offset_delta = self._next_offset_delta
        elif offset_delta < self._next_offset_delta:
            raise ValueError(f"offset delta {offset_delta} is not after {self._next_offset_delta - 1}")
        if self._base_timestamp is None:
            self._base_timestamp = self._max_timestamp = timestamp_ms
        elif timestamp_ms > self._max_timestamp:
            self._max_timestamp = timestamp_ms
        body = bytearray((attributes & 0xFF,))
        write_varint(body, timestamp_ms - self._base_timestamp)
        write_varint(body, offset_delta)
        _write_bytes(body, key)
        _write_bytes(body, value)
        headers = list(headers)
        write_varint(body, len(headers))
        for header_key, header_value in headers:
            _write_bytes(body, header_key.encode("utf-8", "surrogateescape"))
            _write_bytes(body, header_value)
        write_varint(self._records, len(body))
        self._records += body
        self._count += 1
        self._next_offset_delta = offset_delta + 1
        return offset_delta

    def build(self, last_offset_delta: int | None = None,
              log_append_time: int | None = None) -> bytes:
        """The finished batch. ``last_offset_delta`` overrides the last record's delta (an empty
        batch kept for its producer state still spans the offsets it had). ``log_append_time``
        is the max timestamp of a LOG_APPEND_TIME batch (Kafka's builder: the records keep their
        own timestamps, the batch says when the broker appended it)."""
        if last_offset_delta is None:
            last_offset_delta = max(self._next_offset_delta - 1, 0)
        elif last_offset_delta < self._next_offset_delta - 1:
            raise ValueError("last offset delta is before the last record")
        if self._base_timestamp is None:
            base_timestamp = max_timestamp = NO_TIMESTAMP
        else:
            base_timestamp, max_timestamp = self._base_timestamp, self._max_timestamp
        if log_append_time is not None and self.timestamp_type == LOG_APPEND_TIME:
            max_timestamp = log_append_time
        return assemble_batch(
            self._records, self._count, compression=self.compression,
            compression_level=self.compression_level, timestamp_type=self.timestamp_type,
            last_offset_delta=last_offset_delta, base_timestamp=base_timestamp,
            max_timestamp=max_timestamp, producer_id=self.producer_id,
            producer_epoch=self.producer_epoch, base_sequence=self.base_sequence,
            is_transactional=self.is_transactional, is_control=self.is_control,
            partition_leader_epoch=self.partition_leader_epoch, base_offset=self.base_offset)


def assemble_batch(records, count: int, *, compression: int = NONE,
                   compression_level: int | None = None, timestamp_type: int = CREATE_TIME,
                   last_offset_delta: int, base_timestamp: int, max_timestamp: int,
                   producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                   base_sequence: int = NO_SEQUENCE, is_transactional: bool = False,
                   is_control: bool = False,
                   partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                   base_offset: int = 0) -> bytes:
    """A v2 batch around ``records`` (``count`` encoded records, uncompressed): compressed with
    ``compression`` at ``compression_level`` (None: the codec's default), header written, CRC
    computed."""
    body = records
    if compression != NONE:
        body = _codecs.compress(compression, body, compression_level)
    attributes = compression
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    if is_control:
        attributes |= CONTROL_FLAG_MASK
    tail = HEADER_TAIL.pack(attributes, last_offset_delta, base_timestamp, max_timestamp,
                            producer_id, producer_epoch, base_sequence, count)
    crc = crc32c(body, crc32c(tail))
    batch_length = BATCH_HEADER_SIZE - LOG_OVERHEAD + len(body)
    head = HEADER.pack(base_offset, batch_length, partition_leader_epoch, MAGIC, crc)
    return b"".join((head, tail, body))


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out.append(1)  # zig-zag -1
    else:
        write_varint(out, len(data))
        out += data


# --- control records -------------------------------------------------------------------------------

def build_control_batch(control_type: int, producer_id: int, producer_epoch: int,
                        coordinator_epoch: int, base_offset: int = 0,
                        timestamp_ms: int | None = None,
                        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH) -> bytes:
    """A transaction marker batch: one control record, ABORT or COMMIT (Kafka's EndTransactionMarker)."""
    if control_type not in (CONTROL_ABORT, CONTROL_COMMIT):
        raise ValueError(f"not a transaction marker type: {control_type}")
    if timestamp_ms is None:
        timestamp_ms = int(time.time() * 1000)
    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=producer_epoch,
                                 is_transactional=True, is_control=True,
                                 partition_leader_epoch=partition_leader_epoch, base_offset=base_offset)
    builder.append(timestamp_ms, _CONTROL_KEY.pack(CONTROL_RECORD_VERSION, control_type),
                   _END_TXN_VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch))
    return builder.build()


def parse_control_record(record: Record) -> tuple[int, int | None]:
    """``(control_type, coordinator_epoch)`` of a control record; the epoch is None unless the type
    is ABORT or COMMIT (other types, e.g. KRaft's, have other values)."""
    key = record.key
    if key is None or len(key) < _CONTROL_KEY.size:
        raise CorruptRecordError("control record key is shorter than 4 bytes")
    version, control_type = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"invalid control record version {version}")
    if control_type not in (CONTROL_ABORT, CONTROL_COMMIT):
        return control_type, None
    value = record.value
    if value is None or len(value) < _END_TXN_VALUE.size:
        raise CorruptRecordError("end transaction marker value is shorter than 6 bytes")
    marker_version, coordinator_epoch = _END_TXN_VALUE.unpack_from(value)
    if marker_version < 0:
        raise CorruptRecordError(f"invalid end transaction marker version {marker_version}")
    return control_type, coordinator_epoch
