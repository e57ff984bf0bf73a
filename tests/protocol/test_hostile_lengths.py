"""Length prefixes larger than the remaining buffer are rejected before anything is allocated:
arrays, strings, bytes, records and tagged-field sections, in request bodies and in the request
header (the KAFKA-14063 class of pre-authentication memory attacks)."""

from __future__ import annotations

import struct
import tracemalloc

import pytest

from kbroker.protocol import messages
from kbroker.protocol.messages.headers import RequestHeader
from kbroker.protocol.primitives import DecodeError, uvarint_bytes

MAX_ALLOCATION = 64 * 1024  # what a rejected decode may allocate at most


def _decode_must_fail_cheaply(decode):
    tracemalloc.start()
    try:
        with pytest.raises(DecodeError):
            decode()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MAX_ALLOCATION, f"rejecting the input allocated {peak} bytes"


def _produce_v3_prefix():
    # transactional_id=null, acks=1, timeout=1000
    return struct.pack(">hhi", -1, 1, 1000)


def test_huge_array_count_is_rejected():
    body = _produce_v3_prefix() + struct.pack(">i", 0x7FFFFFFF)
    produce = messages.request_class(0)
    _decode_must_fail_cheaply(lambda: produce.decode(memoryview(body), 3))


def test_huge_compact_array_count_is_rejected():
    # Produce v9 (flexible): compact nullable string null, acks, timeout, compact array length.
    body = b"\x00" + struct.pack(">hi", 1, 1000) + uvarint_bytes(0xFFFFFFFF)
    produce = messages.request_class(0)
    _decode_must_fail_cheaply(lambda: produce.decode(memoryview(body), 9))


def test_huge_string_length_is_rejected():
    # One topic whose name claims 32767 bytes but has 3.
    body = _produce_v3_prefix() + struct.pack(">ih", 1, 0x7FFF) + b"abc"
    produce = messages.request_class(0)
    _decode_must_fail_cheaply(lambda: produce.decode(memoryview(body), 3))


def test_huge_compact_string_length_is_rejected():
    body = b"\x00" + struct.pack(">hi", 1, 1000) + uvarint_bytes(2) + uvarint_bytes(0xFFFFFFF0)
    produce = messages.request_class(0)
    _decode_must_fail_cheaply(lambda: produce.decode(memoryview(body), 9))


def test_huge_records_length_is_rejected():
    body = (_produce_v3_prefix() + struct.pack(">ih", 1, 1) + b"t"
            + struct.pack(">iii", 1, 0, 0x7FFFFFFF) + b"\x00" * 8)
    produce = messages.request_class(0)
    _decode_must_fail_cheaply(lambda: produce.decode(memoryview(body), 3))


def test_huge_bytes_length_is_rejected():
    # SaslAuthenticate v0: auth_bytes is BYTES.
    body = struct.pack(">i", 0x7FFFFFFF) + b"xy"
    sasl = messages.request_class(36)
    _decode_must_fail_cheaply(lambda: sasl.decode(memoryview(body), 0))


def test_huge_tagged_field_count_and_size_are_rejected():
    # ApiVersions v3 body: two compact strings then the tag section.
    prefix = uvarint_bytes(2) + b"a" + uvarint_bytes(2) + b"b"
    api_versions = messages.request_class(18)
    lying_count = prefix + uvarint_bytes(0x7FFFFFFF)
    _decode_must_fail_cheaply(lambda: api_versions.decode(memoryview(lying_count), 3))
    lying_size = prefix + uvarint_bytes(1) + uvarint_bytes(5) + uvarint_bytes(0x7FFFFFFF)
    _decode_must_fail_cheaply(lambda: api_versions.decode(memoryview(lying_size), 3))


def test_request_header_lies_are_rejected():
    # v1 header: api key, version, correlation id, client id claiming 32767 bytes.
    header = struct.pack(">hhih", 3, 1, 7, 0x7FFF) + b"kcat"
    _decode_must_fail_cheaply(lambda: RequestHeader.decode(memoryview(header), 1))
    # v2 header: the same, plus a tag section claiming 2^31 fields.
    header = struct.pack(">hhih", 18, 3, 7, 4) + b"kcat" + uvarint_bytes(0x7FFFFFFF)
    _decode_must_fail_cheaply(lambda: RequestHeader.decode(memoryview(header), 2))


def test_overlong_varint_is_rejected():
    body = b"\x00" + struct.pack(">hi", 1, 1000) + b"\xff" * 6
    produce = messages.request_class(0)
    with pytest.raises(DecodeError):
        produce.decode(memoryview(body), 9)


def test_negative_lengths_are_rejected():
    produce = messages.request_class(0)
    body = _produce_v3_prefix() + struct.pack(">i", -5)
    with pytest.raises(DecodeError):
        produce.decode(memoryview(body), 3)
    body = _produce_v3_prefix() + struct.pack(">ih", 1, -2)
    with pytest.raises(DecodeError):
        produce.decode(memoryview(body), 3)
