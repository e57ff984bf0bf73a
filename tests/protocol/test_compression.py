"""kbroker.protocol.compression: round trips, framing interop, bounded decompression, corrupt input."""

from __future__ import annotations

import gzip
import resource
import struct
import time
import tracemalloc

import cramjam
import pytest
from hypothesis import given, settings, strategies as st

from kbroker.protocol import compression
from kbroker.protocol.compression import (
    GZIP, LZ4, NONE, SNAPPY, ZSTD, CompressionError, DecompressedSizeError, UnsupportedCodecError,
    compress, decompress,
)
from kbroker.protocol.primitives import DecodeError

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
COMPRESSED = [GZIP, SNAPPY, LZ4, ZSTD]
GIB = 1 << 30
MIB = 1 << 20


def test_codec_ids_and_names():
    assert (NONE, GZIP, SNAPPY, LZ4, ZSTD) == (0, 1, 2, 3, 4)
    assert compression.CODEC_NAMES == {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
    assert {v: k for k, v in compression.CODEC_IDS.items()} == compression.CODEC_NAMES
    assert compression.codec_id("LZ4") == LZ4
    assert compression.codec_name(ZSTD) == "zstd"
    with pytest.raises(UnsupportedCodecError):
        compression.codec_name(5)
    with pytest.raises(ValueError):
        compression.codec_id("brotli")


def test_error_hierarchy():
    assert issubclass(CompressionError, DecodeError)
    assert issubclass(DecompressedSizeError, CompressionError)
    assert issubclass(UnsupportedCodecError, CompressionError)


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codec_ids(codec):
    with pytest.raises(UnsupportedCodecError):
        decompress(codec, b"abc", 100)
    with pytest.raises(UnsupportedCodecError):
        compress(codec, b"abc")


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("payload", [b"", b"x", bytes(range(256)) * 300, b"\0" * (3 * MIB + 17)])
def test_round_trip(codec, payload):
    packed = compress(codec, payload)
    assert decompress(codec, packed, len(payload)) == payload
    assert decompress(codec, memoryview(packed), len(payload) + 10) == payload
    assert decompress(codec, bytearray(packed), len(payload)) == payload


@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=40, deadline=None)
@given(payload=st.binary(max_size=3000))
def test_round_trip_random(codec, payload):
    packed = compress(codec, memoryview(payload))
    assert decompress(codec, packed, len(payload)) == payload


@pytest.mark.parametrize("codec", CODECS)
def test_output_one_byte_over_the_limit(codec):
    payload = bytes(range(256)) * 1000
    packed = compress(codec, payload)
    assert decompress(codec, packed, len(payload)) == payload
    with pytest.raises(DecompressedSizeError):
        decompress(codec, packed, len(payload) - 1)


@pytest.mark.parametrize("codec", [GZIP, LZ4, ZSTD])
def test_output_grows_past_the_first_guess(codec):
    # A ratio far above the initial guess exercises the grow-and-retry path, which depends on the
    # exact message cramjam raises when an output buffer is full.
    payload = b"\0" * (20 * MIB)
    packed = compress(codec, payload)
    if codec == ZSTD:  # drop the declared content size so no hint sizes the buffer
        compressor = cramjam.zstd.Compressor(level=3)
        compressor.compress(payload)
        packed = bytes(compressor.finish())
        assert compression._zstd_size_hint(packed) is None
    assert len(packed) * 1000 < len(payload) or codec == LZ4
    assert decompress(codec, packed, 64 * MIB) == payload


def test_cramjam_buffer_full_message_is_pinned():
    with pytest.raises(cramjam.DecompressionError, match=compression._BUFFER_FULL):
        cramjam.gzip.decompress_into(gzip.compress(b"a" * 100), bytearray(10))


# --- snappy framing --------------------------------------------------------------------------------

def test_snappy_writes_xerial_framing():
    payload = bytes(range(256)) * 400  # 100 KiB -> 4 chunks of at most 32 KiB
    packed = compress(SNAPPY, payload)
    assert packed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, chunks = 16, []
    while pos < len(packed):
        (length,) = struct.unpack_from(">i", packed, pos)
        chunks.append(bytes(cramjam.snappy.decompress_raw(packed[pos + 4:pos + 4 + length])))
        pos += 4 + length
    assert pos == len(packed)
    assert [len(c) for c in chunks] == [32768, 32768, 32768, 4096]
    assert b"".join(chunks) == payload


def test_snappy_reads_a_plain_raw_block():
    payload = b"hello snappy " * 1000
    raw = bytes(cramjam.snappy.compress_raw(payload))
    assert decompress(SNAPPY, raw, len(payload)) == payload
    with pytest.raises(DecompressedSizeError):
        decompress(SNAPPY, raw, len(payload) - 1)


def test_snappy_reads_aiokafka_xerial():
    from aiokafka.codec import snappy_encode

    payload = b"0123456789abcdef" * 10000
    assert decompress(SNAPPY, snappy_encode(payload), len(payload)) == payload
    assert decompress(SNAPPY, snappy_encode(payload, xerial_compatible=False), len(payload)) == payload


def test_aiokafka_reads_our_snappy_and_lz4():
    from aiokafka.codec import lz4_decode, snappy_decode

    payload = b"0123456789abcdef" * 10000
    assert snappy_decode(compress(SNAPPY, payload)) == payload
    assert lz4_decode(compress(LZ4, payload)) == payload


def test_lz4_frame_has_independent_blocks():
    frame = compress(LZ4, b"abc" * 100000)
    assert frame[:4] == b"\x04\x22\x4d\x18"
    flg = frame[4]
    assert flg >> 6 == 1 and flg & 0x20  # version 1, block independence (KIP-57)


@pytest.mark.parametrize("bad", [
    b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x10\x00abc",  # chunk longer than input
    b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\xff\xff\xff\xff",  # negative chunk length
    b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00",  # truncated chunk length
    b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x01\x80",  # truncated varint
    b"\x05\x00",  # raw block shorter than declared
    b"",
    b"\xff\xff\xff\xff\xff\x01",  # varint longer than 5 bytes
])
def test_snappy_corrupt(bad):
    with pytest.raises(CompressionError):
        decompress(SNAPPY, bad, MIB)


# --- decompression bombs ---------------------------------------------------------------------------

def _zstd_rle_bomb(total: int) -> bytes:
    """One zstd frame of RLE blocks (4 bytes per 128 KiB), with no declared content size."""
    block = 128 * 1024
    count = total // block
    # FHD 0: no content size, not single segment; window descriptor 0x38 = 2**17 bytes.
    head = b"\x28\xb5\x2f\xfd\x00\x38"
    rle = ((block << 3) | (1 << 1)).to_bytes(3, "little") + b"\0"
    last = ((block << 3) | (1 << 1) | 1).to_bytes(3, "little") + b"\0"
    return head + rle * (count - 1) + last


def _lz4_bomb(total: int) -> bytes:
    block_size = 64 * 1024
    frame = compress(LZ4, b"\0" * block_size)
    header, block, end_mark = frame[:7], frame[7:-4], frame[-4:]
    assert end_mark == b"\0\0\0\0"
    return header + block * (total // block_size) + end_mark


def _bombs():
    gzip_member = gzip.compress(b"\0" * MIB)
    zstd_frame = bytes(cramjam.zstd.compress(b"\0" * MIB))
    xerial_chunk = bytes(cramjam.snappy.compress_raw(b"\0" * MIB))
    return {
        "gzip-members": (GZIP, gzip_member * 1024),
        "zstd-rle": (ZSTD, _zstd_rle_bomb(GIB)),
        "zstd-frames": (ZSTD, zstd_frame * 1024),
        "zstd-declared": (ZSTD, b"\x28\xb5\x2f\xfd\xe0" + struct.pack("<Q", 1 << 40) + b"\0" * 8),
        "lz4-blocks": (LZ4, _lz4_bomb(GIB)),
        "lz4-declared": (LZ4, b"\x04\x22\x4d\x18\x68\x40" + struct.pack("<Q", 1 << 40) + b"\0" * 9),
        "snappy-raw-claim": (SNAPPY, b"\xff\xff\xff\xff\x0f" + b"\0" * 1000),
        "snappy-xerial-chunks": (SNAPPY, compression.XERIAL_HEADER + (
            struct.pack(">i", len(xerial_chunk)) + xerial_chunk) * 1024),
        "snappy-xerial-claims": (SNAPPY, compression.XERIAL_HEADER + (
            struct.pack(">i", 6) + b"\xff\xff\xff\xff\x0f\0") * 200),
    }


@pytest.mark.parametrize("name", list(_bombs()))
def test_decompression_bomb_is_stopped(name):
    codec, bomb = _bombs()[name]
    limit = 4 * MIB
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(DecompressedSizeError):
            decompress(codec, bomb, limit)
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert elapsed < 1.0
    assert peak < len(bomb) + 2 * limit
    rss_growth_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
    assert rss_growth_kib < 100 * 1024


# --- corrupt input ---------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", COMPRESSED)
@settings(max_examples=150, deadline=None)
@given(data=st.binary(max_size=300))
def test_random_input_raises_only_compression_error(codec, data):
    try:
        out = decompress(codec, data, 64 * 1024)
    except CompressionError:
        return
    assert len(out) <= 64 * 1024


@pytest.mark.parametrize("codec", COMPRESSED)
@settings(max_examples=150, deadline=None)
@given(payload=st.binary(min_size=1, max_size=2000), edits=st.lists(
    st.tuples(st.integers(min_value=0), st.integers(min_value=0, max_value=255)), min_size=1, max_size=4),
    cut=st.integers(min_value=0))
def test_mutated_input_raises_only_compression_error(codec, payload, edits, cut):
    packed = bytearray(compress(codec, payload))
    for index, byte in edits:
        packed[index % len(packed)] = byte
    if cut % 3 == 0:
        del packed[cut % len(packed):]
    try:
        out = decompress(codec, bytes(packed), 4096)
    except CompressionError:
        return
    assert len(out) <= 4096
