"""Record-batch compression codecs: gzip, snappy (xerial framing), lz4 (frame), zstd.

The codec id is the low three bits of a RecordBatch's ``attributes`` (Kafka's ``CompressionType``).
Everything goes through ``cramjam``; this module only adds the Kafka-specific framing and the
bounds a broker needs against hostile input.

Formats, as Kafka clients write them:

- **gzip**: an RFC 1952 stream (possibly several concatenated members).
- **snappy**: the xerial ``snappy-java`` stream that Java writes (and kafka-python, aiokafka)::

      header  = b"\\x82SNAPPY\\x00" + int32 version (1) + int32 compatible (1)   (16 bytes, big-endian)
      chunk*  = int32 length (big-endian) + raw snappy block of ``length`` bytes

  librdkafka sends one plain raw snappy block instead; both are accepted on read.
- **lz4**: the LZ4 *frame* format with independent blocks (KIP-57; the pre-0.10 broken header
  checksum only applies to magic 0/1 and is not handled here). A frame Kafka's reader refuses
  (linked blocks, reserved bits, another version or block size code) is refused here too.
- **zstd**: a standard zstd frame (KIP-110), possibly several frames.

Decompression is bounded: ``decompress(codec, data, max_size)`` raises
:class:`DecompressedSizeError` as soon as the output would pass ``max_size``, and never allocates
much more than ``max_size``. Raw snappy declares its length up front (checked before anything is
allocated); the streaming codecs decompress into a bytearray that starts from a size hint (the
zstd/lz4 declared content size, the gzip trailer, or a multiple of the input) and grows by 4x up to
``max_size``, so a decompression bomb costs at most about ``max_size`` bytes and the time to fill
them. Any malformed input raises :class:`CompressionError`.
"""

from __future__ import annotations

import struct

import cramjam

from kbroker.protocol.primitives import DecodeError

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODEC_NAMES: dict[int, str] = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
CODEC_IDS: dict[str, int] = {name: codec for codec, name in CODEC_NAMES.items()}

# Kafka's defaults (KIP-390): gzip uses Deflater's default 6, zstd 3. For lz4 Kafka defaults to 9
# and cramjam to an HC level too (~50-250 MB/s measured); level 1 is LZ4's fast compressor at
# ~1.3 GB/s for ~30% less ratio on JSON-like records. Decompression speed does not depend on it.
DEFAULT_LEVELS: dict[int, int] = {GZIP: 6, LZ4: 1, ZSTD: 3}

# KIP-390's levels as topics and brokers set them (compression.gzip.level, compression.lz4.level,
# compression.zstd.level), with Kafka's defaults. See :func:`level_for`.
KAFKA_DEFAULT_LEVELS: dict[int, int] = {GZIP: -1, LZ4: 9, ZSTD: 3}
_FAST_LZ4 = 1


def level_for(codec: int, kafka_level: int | None) -> int | None:
    """The level to give :func:`compress` for a KIP-390 ``kafka_level``, as Kafka's codecs read it:
    gzip's -1 is Deflater's default (6); lz4's default 9 means lz4-java's *fast* compressor (Kafka's
    ``Lz4BlockOutputStream`` uses the high-compression one only for the other levels, which liblz4
    caps at 12); zstd levels are zstd's."""
    if kafka_level is None:
        return None
    if codec == GZIP:
        return DEFAULT_LEVELS[GZIP] if kafka_level == -1 else kafka_level
    if codec == LZ4:
        return _FAST_LZ4 if kafka_level == KAFKA_DEFAULT_LEVELS[LZ4] else kafka_level
    if codec == ZSTD:
        return kafka_level
    return None


XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_HEADER_SIZE = 16
# snappy-java's default block size, which kafka-python and Java also use.
XERIAL_BLOCK_SIZE = 32 * 1024

_LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"
_ZSTD_FRAME_MAGIC = b"\x28\xb5\x2f\xfd"

# First output buffer when no size is declared; grown by _GROWTH up to max_size.
_MIN_GUESS = 16 * 1024
_INPUT_RATIO_GUESS = 6
_GROWTH = 4
# The message cramjam's *_into functions raise when the output buffer is full (Rust's
# io::ErrorKind::WriteZero). tests/protocol/test_compression.py pins it.
_BUFFER_FULL = "failed to write whole buffer"

_unpack_i32 = struct.Struct(">i").unpack_from
_unpack_le32 = struct.Struct("<I").unpack_from
_unpack_le64 = struct.Struct("<Q").unpack_from
_pack_i32 = struct.Struct(">i").pack


class CompressionError(DecodeError):
    """Compressed data is corrupt, or its codec is unknown."""


class UnsupportedCodecError(CompressionError):
    """The attributes name a codec id other than 0-4."""


class DecompressedSizeError(CompressionError):
    """Decompressed output would exceed the caller's ``max_size``."""


def codec_name(codec: int) -> str:
    try:
        return CODEC_NAMES[codec]
    except KeyError:
        raise UnsupportedCodecError(f"unknown compression codec id {codec}") from None


def codec_id(name: str) -> int:
    """Codec id for a Kafka ``compression.type`` name (case-insensitive)."""
    try:
        return CODEC_IDS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown compression type {name!r}") from None


# --- compress --------------------------------------------------------------------------------------

def compress(codec: int, data, level: int | None = None) -> bytes:
    """Compress ``data`` (any bytes-like object) the way Kafka producers do."""
    if codec == NONE:
        return bytes(data)
    if level is None:
        level = DEFAULT_LEVELS.get(codec)
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data, level=level))
    if codec == SNAPPY:
        return _snappy_xerial_compress(data)
    if codec == LZ4:
        # Independent blocks (KIP-57: Java's KafkaLZ4BlockInputStream decodes each block on its
        # own) and no content checksum, as Java writes. cramjam's streaming encoder also always
        # sets block checksums, which Java verifies and librdkafka accepts: these are exactly the
        # frames aiokafka produces (see tests/golden/batches/aiokafka-lz4.bin).
        compressor = cramjam.lz4.Compressor(level=level, content_checksum=False, block_linked=False)
        compressor.compress(data if type(data) is bytes else bytes(data))  # it takes only bytes
        return bytes(compressor.finish())
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=level))
    raise UnsupportedCodecError(f"unknown compression codec id {codec}")


def _snappy_xerial_compress(data) -> bytes:
    view = memoryview(data).cast("B")
    parts = [XERIAL_HEADER]
    compress_raw = cramjam.snappy.compress_raw
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = compress_raw(view[start:start + XERIAL_BLOCK_SIZE])
        parts.append(_pack_i32(len(block)))
        parts.append(bytes(block))
    return b"".join(parts)


# --- decompress ------------------------------------------------------------------------------------

def decompress(codec: int, data, max_size: int) -> bytes:
    """Decompress ``data``; raise :class:`CompressionError` if it is corrupt and
    :class:`DecompressedSizeError` if the output would be larger than ``max_size`` bytes."""
    if codec == NONE:
        if len(data) > max_size:
            raise DecompressedSizeError(f"{len(data)} bytes exceed the limit of {max_size}")
        return bytes(data)
    if codec == SNAPPY:
        return _snappy_decompress(data, max_size)
    if codec == GZIP:
        return _decompress_bounded(cramjam.gzip.decompress_into, "gzip", data, max_size,
                                   _gzip_size_hint(data, max_size))
    if codec == LZ4:
        _check_kafka_lz4_frame(data)
        return _decompress_bounded(cramjam.lz4.decompress_into, "lz4", data, max_size,
                                   _lz4_size_hint(data))
    if codec == ZSTD:
        return _decompress_bounded(cramjam.zstd.decompress_into, "zstd", data, max_size,
                                   _zstd_size_hint(data))
    raise UnsupportedCodecError(f"unknown compression codec id {codec}")


def _decompress_bounded(decompress_into, name, data, max_size, hint):
    if hint is not None and hint > max_size:
        raise DecompressedSizeError(f"{name} data declares {hint} bytes, over the limit of {max_size}")
    if hint is None:
        hint = max(len(data) * _INPUT_RATIO_GUESS, _MIN_GUESS)
    cap = min(max(hint, 1), max_size)
    while True:
        out = bytearray(cap)
        try:
            n = decompress_into(data, out)
        except cramjam.DecompressionError as exc:
            if str(exc) != _BUFFER_FULL:
                raise CompressionError(f"corrupt {name} data: {exc}") from None
            if cap >= max_size:
                raise DecompressedSizeError(
                    f"{name} data decompresses to more than the limit of {max_size} bytes") from None
            del out
            cap = min(max(cap * _GROWTH, _MIN_GUESS), max_size)
            continue
        except (TypeError, ValueError, BufferError) as exc:
            raise CompressionError(f"cannot decompress {name} data: {exc}") from None
        if n == cap:
            return bytes(out)
        return bytes(memoryview(out)[:n])


def _gzip_size_hint(data, max_size):
    # ISIZE, the last four bytes, is the uncompressed size mod 2**32 of the last member. Only a
    # hint for the first buffer (clipped to max_size): a lie costs a retry, never more memory.
    if len(data) >= 18:
        isize = _unpack_le32(data, len(data) - 4)[0]
        if isize:
            return min(isize, max_size)
    return None


def _check_kafka_lz4_frame(data):
    """Refuse what Kafka's ``Lz4BlockInputStream`` cannot read, though liblz4 can: a frame
    descriptor with reserved bits set, a version other than 01, dependent (linked) blocks, or a
    block size code outside 4-7 (64 KiB-4 MiB). Such a batch stored as it came would fail every
    Java consumer."""
    if len(data) < 6 or data[:4] != _LZ4_FRAME_MAGIC:
        return  # cramjam says what is wrong
    flg, bd = data[4], data[5]
    if flg & 0x03:
        raise CompressionError("lz4 frame: reserved bits must be 0")
    if not flg & 0x20:
        raise CompressionError("lz4 frame: dependent block stream is unsupported")
    if flg >> 6 != 1:
        raise CompressionError(f"lz4 frame: version {flg >> 6} is unsupported")
    if bd & 0x8F or not 4 <= (bd >> 4) & 7 <= 7:
        raise CompressionError("lz4 frame: invalid block descriptor")


def _lz4_size_hint(data):
    # Frame header: magic(4) FLG(1) BD(1) [content size(8, little-endian) if FLG bit 3].
    if len(data) >= 14 and data[:4] == _LZ4_FRAME_MAGIC and data[4] & 0x08:
        return _unpack_le64(data, 6)[0]
    return None


def _zstd_size_hint(data):
    # Frame header (RFC 8878 3.1.1.1): magic(4) FHD(1) [window(1)] [dict id(0/1/2/4)] [FCS(0/1/2/4/8)]
    if len(data) < 6 or data[:4] != _ZSTD_FRAME_MAGIC:
        return None
    fhd = data[4]
    fcs_flag = fhd >> 6
    single_segment = (fhd >> 5) & 1
    pos = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[fhd & 3]
    size = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
    if size == 0 or pos + size > len(data):
        return None
    value = int.from_bytes(data[pos:pos + size], "little")
    return value + 256 if size == 2 else value


def _snappy_raw_length(data, pos, end):
    """The uncompressed length a raw snappy block declares: a little-endian base-128 uint32."""
    result = 0
    for shift in range(0, 35, 7):
        if pos >= end:
            raise CompressionError("truncated snappy block length")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if result > 0xFFFFFFFF:
                break
            return result
    raise CompressionError("invalid snappy block length")


def _snappy_decompress(data, max_size):
    view = memoryview(data).cast("B")
    end = len(view)
    if end >= XERIAL_HEADER_SIZE and view[:8] == XERIAL_MAGIC:
        # Walk the chunk lengths first so nothing is allocated before the total is known.
        chunks = []
        total = 0
        pos = XERIAL_HEADER_SIZE
        while pos < end:
            if pos + 4 > end:
                raise CompressionError("truncated xerial snappy chunk length")
            length = _unpack_i32(view, pos)[0]
            pos += 4
            if length <= 0 or length > end - pos:
                raise CompressionError(
                    f"xerial snappy chunk length {length} is invalid ({end - pos} bytes remain)")
            ulen = _snappy_raw_length(view, pos, pos + length)
            total += ulen
            if total > max_size:
                raise DecompressedSizeError(
                    f"snappy data decompresses to more than the limit of {max_size} bytes")
            chunks.append((pos, pos + length, ulen))
            pos += length
    else:
        ulen = _snappy_raw_length(view, 0, end)
        if ulen > max_size:
            raise DecompressedSizeError(
                f"snappy block declares {ulen} bytes, over the limit of {max_size}")
        chunks = [(0, end, ulen)]
        total = ulen
    out = bytearray(total)
    out_view = memoryview(out)
    decompress_raw_into = cramjam.snappy.decompress_raw_into
    at = 0
    for start, stop, ulen in chunks:
        try:
            n = decompress_raw_into(view[start:stop], out_view[at:at + ulen])
        except (cramjam.DecompressionError, TypeError, ValueError, BufferError) as exc:
            raise CompressionError(f"corrupt snappy data: {exc}") from None
        if n != ulen:
            raise CompressionError(f"snappy block declared {ulen} bytes but held {n}")
        at += ulen
    out_view.release()
    return bytes(out)
