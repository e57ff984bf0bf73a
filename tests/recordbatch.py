"""An independent RecordBatch v2 encoder and decoder for tests.

Written from Kafka's format description, not with the broker's ``kbroker.protocol.records``, so
that tests check the broker against a second reading of the format: :func:`build_batch` encodes
a batch and can force any header field to a wrong value (a bad CRC, a lying record count, magic
3, ...); :func:`parse_batches` decodes the batches of a fetch response or a segment file and
:meth:`Batch.records` their records. The integration tests, the compatibility scenarios and
``tools/capture_goldens.py`` all use this one implementation.
"""

from __future__ import annotations

import gzip
import struct
import time
from dataclasses import dataclass
from pathlib import Path

import crc32c

from compat_tests.clients.records import Got, as_rec

CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def now_ms() -> int:
    return int(time.time() * 1000)


def _zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def _varint(n: int) -> bytes:
    z = _zigzag(n) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
    return (result >> 1) ^ -(result & 1), pos


def _bytes_field(value: bytes | None) -> bytes:
    if value is None:
        return _varint(-1)
    return _varint(len(value)) + value


def encode_record(offset_delta: int, timestamp_delta: int, key, value, headers=()) -> bytes:
    body = bytearray(b"\x00")  # record attributes (unused)
    body += _varint(timestamp_delta)
    body += _varint(offset_delta)
    body += _bytes_field(key)
    body += _bytes_field(value)
    body += _varint(len(headers))
    for name, header_value in headers:
        body += _bytes_field(name.encode())
        body += _bytes_field(header_value)
    return _varint(len(body)) + bytes(body)


_BATCH_HEAD = struct.Struct(">qiib")  # base offset, batch length, partition leader epoch, magic
_BATCH_BODY = struct.Struct(">hiqqqhii")  # attributes .. record count (after the CRC)
BATCH_OVERHEAD = 61  # bytes of a RecordBatch v2 header


def build_batch(records, *, base_timestamp: int | None = None, codec: str = "none",
                producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                transactional: bool = False, log_append_time: bool = False,
                base_offset: int = 0, partition_leader_epoch: int = -1, magic: int = 2,
                record_count: int | None = None, last_offset_delta: int | None = None,
                max_timestamp: int | None = None, attributes: int | None = None,
                payload: bytes | None = None, crc: int | None = None,
                length_delta: int = 0) -> bytes:
    """Encode a RecordBatch v2. ``records`` holds :class:`Rec` or (key, value) pairs or values.
    Every header field can be forced to a wrong value; ``payload`` replaces the (possibly
    compressed) records section; ``crc`` replaces the computed CRC; ``length_delta`` is added to
    the batchLength field."""
    recs = [as_rec(r) for r in records]
    if base_timestamp is None:
        base_timestamp = next((r.timestamp for r in recs if r.timestamp is not None), now_ms())
    encoded = b"".join(
        encode_record(i, (r.timestamp if r.timestamp is not None else base_timestamp)
                      - base_timestamp, r.key, r.value, r.headers)
        for i, r in enumerate(recs))
    if payload is None:
        payload = _compress(codec, encoded)
    timestamps = [r.timestamp if r.timestamp is not None else base_timestamp for r in recs]
    if attributes is None:
        attributes = CODEC_IDS[codec] | (0x08 if log_append_time else 0) | \
            (0x10 if transactional else 0)
    body = _BATCH_BODY.pack(
        attributes,
        len(recs) - 1 if last_offset_delta is None else last_offset_delta,
        base_timestamp,
        max(timestamps, default=base_timestamp) if max_timestamp is None else max_timestamp,
        producer_id, producer_epoch, base_sequence,
        len(recs) if record_count is None else record_count,
    ) + payload
    checksum = crc32c.crc32c(body) if crc is None else crc
    after_length = struct.pack(">ibI", partition_leader_epoch, magic, checksum) + body
    return struct.pack(">qi", base_offset, len(after_length) + length_delta) + after_length


def _compress(codec: str, data: bytes) -> bytes:
    if codec == "none":
        return data
    if codec == "gzip":
        return gzip.compress(data)
    import cramjam

    if codec == "zstd":
        return bytes(cramjam.zstd.compress(data))
    if codec == "lz4":
        # Independent blocks, as Kafka's clients write and its reader requires (KIP-57).
        compressor = cramjam.lz4.Compressor(block_linked=False)
        compressor.compress(data)
        return bytes(compressor.finish())
    if codec == "snappy":
        return bytes(cramjam.snappy.compress_raw(data))
    raise ValueError(codec)


@dataclass
class Batch:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    payload: bytes
    crc_ok: bool

    @property
    def codec(self) -> int:
        return self.attributes & 0x07

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & 0x08)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def transactional(self) -> bool:
        return bool(self.attributes & 0x10)

    @property
    def control(self) -> bool:
        return bool(self.attributes & 0x20)

    def raw_records(self) -> list["RawRecord"]:
        """The records as written: attributes, deltas, key, value, headers."""
        data = self.payload
        if self.codec:
            from kbroker.protocol.compression import decompress

            data = bytes(decompress(self.codec, data, 64 << 20))
        out, pos = [], 0
        for _ in range(self.record_count):
            length, pos = _read_varint(data, pos)
            end = pos + length
            (attributes,) = struct.unpack_from(">b", data, pos)
            ts_delta, pos = _read_varint(data, pos + 1)
            offset_delta, pos = _read_varint(data, pos)
            key, pos = _read_bytes(data, pos)
            value, pos = _read_bytes(data, pos)
            n_headers, pos = _read_varint(data, pos)
            headers = []
            for _ in range(n_headers):
                name, pos = _read_bytes(data, pos)
                header_value, pos = _read_bytes(data, pos)
                headers.append((name.decode(), header_value))
            assert pos == end, "record length does not match its fields"
            out.append(RawRecord(attributes, ts_delta, offset_delta, key, value, tuple(headers)))
        return out

    def records(self) -> list[Got]:
        """The records with their offsets and timestamps (partition unknown: -1)."""
        return [Got(-1, self.base_offset + r.offset_delta, r.key, r.value, r.headers,
                    self.max_timestamp if self.log_append_time
                    else self.base_timestamp + r.timestamp_delta,
                    "append" if self.log_append_time else "create")
                for r in self.raw_records()]


@dataclass(frozen=True)
class RawRecord:
    attributes: int
    timestamp_delta: int
    offset_delta: int
    key: bytes | None
    value: bytes | None
    headers: tuple


def _read_bytes(buf: bytes, pos: int):
    n, pos = _read_varint(buf, pos)
    if n < 0:
        return None, pos
    return bytes(buf[pos:pos + n]), pos + n


def parse_batches(data: bytes) -> list[Batch]:
    """The complete v2 batches in ``data`` (a trailing partial batch is ignored, as clients do)."""
    batches, pos = [], 0
    while pos + 17 <= len(data):
        base_offset, length, epoch, magic = _BATCH_HEAD.unpack_from(data, pos)
        end = pos + 12 + length
        if end > len(data):
            break
        (crc,) = struct.unpack_from(">I", data, pos + 17)
        fields = _BATCH_BODY.unpack_from(data, pos + 21)
        body_start = pos + 21
        payload = bytes(data[body_start + _BATCH_BODY.size:end])
        batches.append(Batch(base_offset, length, epoch, magic, crc, *fields, payload,
                             crc32c.crc32c(bytes(data[body_start:end])) == crc))
        pos = end
    return batches


def segment_batches(path: Path) -> list[Batch]:
    return parse_batches(path.read_bytes())
