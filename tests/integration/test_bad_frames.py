"""Hostile and broken frames over a raw socket. Each gets the Kafka error a client expects, in a
decoded response, or a closed connection; none crashes the broker, logs a traceback, or stores
anything; and after each one the broker still serves a normal client.

Requests are built with the generated codecs where the frame is well formed, and by hand where it
is not; record batches come from the independent encoder in ``clients.py``.
"""

from __future__ import annotations

import struct

import pytest

from kbroker.protocol import messages
from kbroker.protocol.messages.headers import RequestHeader
from tests.integration.clients import (
    API_VERSIONS, FETCH, LATEST, METADATA, PRODUCE, Rec, Wire, api_versions_ok,
    broker_tracebacks, build_batch, ensure_topic, now_ms, running_broker,
)

TOPIC = "bad-frames"
MAX_MESSAGE = 10_000
MAX_REQUEST = 200_000
AFTER_MAX_MS = 60_000
BEFORE_MAX_MS = 86_400_000

CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
INVALID_REQUIRED_ACKS = 21
INVALID_TIMESTAMP = 32
UNSUPPORTED_VERSION = 35
INVALID_RECORD = 87
UNKNOWN_SERVER_ERROR = -1
BAD_BATCH = {CORRUPT_MESSAGE, INVALID_RECORD}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    overrides = {"num.partitions": 1, "message.max.bytes": MAX_MESSAGE,
                 "socket.request.max.bytes": MAX_REQUEST,
                 "log.message.timestamp.after.max.ms": AFTER_MAX_MS,
                 "log.message.timestamp.before.max.ms": BEFORE_MAX_MS}
    with running_broker(tmp_path_factory.mktemp("bad-frames") / "data", overrides) as process:
        ensure_topic(process.bootstrap, TOPIC, 1)
        yield process


@pytest.fixture
def wire(broker):
    with Wire(broker.bootstrap, timeout=10) as connection:
        yield connection


@pytest.fixture(autouse=True)
def still_serving(broker):
    """After each bad frame: the process is alive, logged no traceback, nothing was appended by
    the bad request, and a fresh connection gets ApiVersions and a good produce answered."""
    tracebacks = len(broker_tracebacks(broker))
    with Wire(broker.bootstrap) as wire:
        end_before = wire.list_offset(TOPIC, 0, LATEST).offset
    yield
    assert broker.alive(), "the broker died"
    assert api_versions_ok(broker.bootstrap)
    with Wire(broker.bootstrap) as wire:
        assert wire.list_offset(TOPIC, 0, LATEST).offset == end_before, \
            "a rejected request appended records"
        good = wire.produce(TOPIC, 0, build_batch([Rec(value=b"good", key=b"k")]))
        assert (good.error_code, good.base_offset) == (0, end_before)
    new = broker_tracebacks(broker)[tracebacks:]
    assert not new, "broker logged a traceback:\n" + "\n".join(new)


def header(api_key: int, version: int, correlation_id: int = 7, header_version=None) -> bytes:
    if header_version is None:
        header_version = messages.request_header_version(api_key, version) \
            if api_key in messages.API_BY_KEY else 1
    return RequestHeader(request_api_key=api_key, request_api_version=version,
                         correlation_id=correlation_id, client_id="bad").to_bytes(header_version)


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def produce_response(wire: Wire, batch, acks: int = -1, topic: str = TOPIC, partition: int = 0):
    return wire.produce(topic, partition, batch, acks=acks)


# --- framing ------------------------------------------------------------------------------------

def test_http_garbage_closes(wire):
    wire.send_raw(b"GET / HTTP/1.1\r\nHost: kafka\r\n\r\n")  # size 0x47455420: far too big
    assert wire.closed_by_broker()


def test_garbage_with_plausible_length_closes(wire):
    wire.send_raw(frame(bytes(range(1, 40))))  # api key 0x0102, version 0x0304
    assert wire.closed_by_broker()


def test_truncated_header_closes(wire):
    wire.send_raw(frame(struct.pack(">hh", API_VERSIONS, 3) + b"\x00\x01"))  # 6 of 8+ bytes
    assert wire.closed_by_broker()


def test_header_client_id_longer_than_frame_closes(wire):
    payload = struct.pack(">hhih", METADATA, 1, 7, 5000) + b"abc"
    wire.send_raw(frame(payload))
    assert wire.closed_by_broker()


def test_frame_longer_than_socket_request_max_bytes_closes(wire):
    wire.send_raw(struct.pack(">i", MAX_REQUEST + 1) + header(API_VERSIONS, 0))
    assert wire.closed_by_broker()


def test_huge_frame_length_closes_without_allocating(wire):
    wire.send_raw(struct.pack(">i", 0x7FFFFFFF))
    assert wire.closed_by_broker()


@pytest.mark.parametrize("size", [-1, -(2 ** 31)])
def test_negative_frame_length_closes(wire, size):
    wire.send_raw(struct.pack(">i", size) + b"\x00" * 16)
    assert wire.closed_by_broker()


def test_zero_length_frame_closes(wire):
    wire.send_raw(struct.pack(">i", 0))
    assert wire.closed_by_broker()


def test_client_hangs_up_mid_frame(broker):
    with Wire(broker.bootstrap) as wire:
        wire.send_raw(struct.pack(">i", 5000) + header(PRODUCE, 9) + b"\x00" * 100)
    # still_serving checks the broker afterwards.


def test_good_request_then_garbage_on_one_connection(wire):
    """Pipelined: the good request is answered first, then the connection is closed."""
    api_versions = messages.request_class(API_VERSIONS)(
        client_software_name="t", client_software_version="1")
    good = wire.encode_request(API_VERSIONS, 3, api_versions, correlation_id=41)
    wire.send_raw(frame(good) + struct.pack(">i", -5) + b"junk")
    correlation_id, response = wire.receive(API_VERSIONS, 3)
    assert (correlation_id, response.error_code) == (41, 0)
    assert wire.closed_by_broker()


# --- api keys and versions ----------------------------------------------------------------------

@pytest.mark.parametrize("api_key", [999, 32767, -1, 67])
def test_unknown_api_key_closes(wire, api_key):
    wire.send_raw(frame(struct.pack(">hhih", api_key, 0, 7, -1)))
    assert wire.closed_by_broker()


def test_fetch_v99_closes(wire):
    wire.send_raw(frame(header(FETCH, 99, header_version=2) + b"\x00" * 40))
    assert wire.closed_by_broker()


def test_produce_v2_is_advertised_but_rejected(wire):
    """Kafka 4 advertises Produce from v0 (KAFKA-18659) but rejects v0-2: closed, or an
    UNSUPPORTED_VERSION answer."""
    wire.api_versions()
    assert wire.versions[PRODUCE][0] == 0, "Produce should be advertised from v0"
    batch = build_batch([Rec(value=b"v2")])
    body = struct.pack(">hi", 1, 5000) + struct.pack(">i", 1) + struct.pack(">h", len(TOPIC)) + \
        TOPIC.encode() + struct.pack(">i", 1) + struct.pack(">ii", 0, len(batch)) + batch
    wire.send_raw(frame(header(PRODUCE, 2, header_version=1) + body))
    answer = wire.recv_frame()
    if answer is None:
        return  # closed: acceptable
    # Produce v2 response: [topic [partition error_code base_offset log_append_time]] throttle
    (correlation_id,) = struct.unpack_from(">i", answer, 0)
    pos = 4 + 4
    (name_len,) = struct.unpack_from(">h", answer, pos)
    pos += 2 + name_len + 4
    _, error_code = struct.unpack_from(">ih", answer, pos)
    assert (correlation_id, error_code) == (7, UNSUPPORTED_VERSION)


@pytest.mark.parametrize("body", [b"", b"\xff" * 64])
def test_api_versions_v99_gets_v0_answer_with_our_ranges(wire, body):
    """KIP-511: a v0-format response with UNSUPPORTED_VERSION and the api list, whatever the
    body holds."""
    wire.send_raw(frame(header(API_VERSIONS, 99, correlation_id=99, header_version=2) + body))
    answer = wire.recv_frame()
    assert answer is not None, "ApiVersions v99 must be answered, not dropped"
    correlation_id, response = wire.receive(API_VERSIONS, 0, frame=answer)
    assert correlation_id == 99
    assert response.error_code == UNSUPPORTED_VERSION
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert ranges.get(API_VERSIONS, (None, None))[0] == 0
    assert ranges[API_VERSIONS][1] >= 3
    assert PRODUCE in ranges and FETCH in ranges and METADATA in ranges


# --- undecodable bodies -------------------------------------------------------------------------

def test_string_length_past_end_closes(wire):
    # Metadata v1: topics array of 1, topic name claims 30000 bytes.
    wire.send_raw(frame(header(METADATA, 1) + struct.pack(">ih", 1, 30000) + b"abc"))
    assert wire.closed_by_broker()


def test_array_count_larger_than_frame_closes(wire):
    wire.send_raw(frame(header(METADATA, 4) + struct.pack(">i", 100_000) + b"\x00\x03abc"))
    assert wire.closed_by_broker()


@pytest.mark.parametrize("version", [8, 9])
def test_huge_array_count_closes_without_allocating(wire, version):
    """Produce topic_data count 0x7fffffff: int32 in v8, unsigned varint in v9 (flexible)."""
    if version >= 9:
        body = b"\x00" + struct.pack(">hi", 1, 5000) + b"\xff\xff\xff\xff\x07"
    else:
        body = struct.pack(">hhi", -1, 1, 5000) + struct.pack(">i", 0x7FFFFFFF)
    wire.send_raw(frame(header(PRODUCE, version) + body))
    assert wire.closed_by_broker()


def test_tagged_field_count_lies_closes(wire):
    # ApiVersions v3 (flexible header v2): the header says 50 tagged fields follow; none do.
    raw = struct.pack(">hhih", API_VERSIONS, 3, 7, 3) + b"bad" + bytes([50])
    wire.send_raw(frame(raw + b"\x02t\x02t\x00"))
    assert wire.closed_by_broker()


def test_tagged_field_size_lies_closes(wire):
    # One tagged field (tag 0) that claims 1000 bytes, in the body of ApiVersions v3.
    wire.send_raw(frame(header(API_VERSIONS, 3) + b"\x02t\x02t" + b"\x01\x00\xe8\x07" + b"xx"))
    assert wire.closed_by_broker()


def test_request_body_truncated_closes(wire):
    request = messages.request_class(METADATA)(topics=None, allow_auto_topic_creation=False)
    payload = wire.encode_request(METADATA, 9, request)
    wire.send_raw(frame(payload[:-3]))
    assert wire.closed_by_broker()


# --- produce: batches that must be refused ------------------------------------------------------

def _batch(**kwargs) -> bytes:
    return build_batch([Rec(value=b"one", key=b"k"), Rec(value=b"two"), Rec(value=b"three")],
                       **kwargs)


def test_corrupted_crc_gets_corrupt_message(wire):
    batch = bytearray(_batch())
    batch[-1] ^= 0xFF  # flip a byte inside the CRC-covered records
    assert produce_response(wire, bytes(batch)).error_code == CORRUPT_MESSAGE


def test_wrong_crc_value_gets_corrupt_message(wire):
    assert produce_response(wire, _batch(crc=0xDEADBEEF)).error_code == CORRUPT_MESSAGE


@pytest.mark.parametrize("count", [5, 2, 0, -1, 0x7FFFFFFF])
def test_lying_record_count_is_refused(wire, count):
    r = produce_response(wire, _batch(record_count=count))
    assert r.error_code in BAD_BATCH, r


def test_last_offset_delta_not_matching_count_is_refused(wire):
    r = produce_response(wire, _batch(last_offset_delta=10))
    assert r.error_code in BAD_BATCH, r


@pytest.mark.parametrize("delta", [100, 1, -1, -40])
def test_batch_length_not_matching_the_bytes_is_refused(wire, delta):
    r = produce_response(wire, _batch(length_delta=delta))
    assert r.error_code in BAD_BATCH, r


def test_record_overrunning_its_length_inside_a_valid_crc_is_refused(wire):
    """CRC and counts are right, but the record's value claims 100 bytes where 1 remains: Kafka
    decodes uncompressed records while validating and refuses the batch."""
    body = b"\x00" + b"\x00" + b"\x00" + b"\x01" + b"\xc8\x01" + b"v" + b"\x00"
    payload = bytes([len(body) * 2]) + body
    r = produce_response(wire, build_batch([Rec(value=b"x")], payload=payload))
    assert r.error_code in BAD_BATCH, r


def test_magic_1_message_set_is_refused(wire):
    """Produce v3+ carries only magic 2 batches (Kafka: INVALID_RECORD)."""
    key, value = b"k", b"magic one"
    body = struct.pack(">bbq", 1, 0, now_ms()) + struct.pack(">i", len(key)) + key + \
        struct.pack(">i", len(value)) + value
    import zlib

    message = struct.pack(">I", zlib.crc32(body)) + body
    message_set = struct.pack(">qi", 0, len(message)) + message
    r = produce_response(wire, message_set)
    assert r.error_code in BAD_BATCH, r


def test_magic_3_batch_is_refused(wire):
    r = produce_response(wire, _batch(magic=3))
    assert r.error_code in BAD_BATCH, r


def test_two_batches_in_one_partition_are_refused(wire):
    """Kafka requires exactly one batch per partition in Produce v3+ (INVALID_RECORD)."""
    r = produce_response(wire, _batch() + _batch())
    assert r.error_code == INVALID_RECORD, r


def test_null_records_are_refused(wire):
    r = produce_response(wire, None)
    assert r.error_code in BAD_BATCH, r


def test_empty_records_are_refused(wire):
    r = produce_response(wire, b"")
    assert r.error_code in BAD_BATCH, r


# Kafka 4.4 answers both with UNKNOWN_SERVER_ERROR (an IllegalArgumentException / a
# decompression exception; compared side by side in test_compression_reference.py).
def test_unknown_compression_codec_is_refused(wire):
    r = produce_response(wire, _batch(attributes=7))
    assert r.error_code == UNKNOWN_SERVER_ERROR, r


def test_undecompressable_payload_is_refused(wire):
    r = produce_response(wire, build_batch([Rec(value=b"x")], codec="gzip",
                                           payload=b"\x1f\x8b\x08\x00garbage-not-deflate"))
    assert r.error_code == UNKNOWN_SERVER_ERROR, r


def test_control_batch_from_a_client_is_refused(wire):
    r = produce_response(wire, _batch(attributes=0x20))
    assert r.error_code in BAD_BATCH, r


def test_acks_5_gets_invalid_required_acks(wire):
    r = produce_response(wire, _batch(), acks=5)
    assert r.error_code == INVALID_REQUIRED_ACKS, r


def test_produce_to_unknown_topic(wire):
    r = produce_response(wire, _batch(), topic="no-such-topic-anywhere")
    assert r.error_code == UNKNOWN_TOPIC_OR_PARTITION, r
    meta = wire.metadata(["no-such-topic-anywhere"])
    assert meta.topics[0].error_code == UNKNOWN_TOPIC_OR_PARTITION, "produce must not create it"


def test_produce_to_unknown_partition(wire):
    r = produce_response(wire, _batch(), partition=7)
    assert r.error_code == UNKNOWN_TOPIC_OR_PARTITION, r


def test_message_too_large(wire):
    r = produce_response(wire, build_batch([Rec(value=b"x" * (MAX_MESSAGE + 1))]))
    assert r.error_code == MESSAGE_TOO_LARGE, r


def test_timestamp_too_far_in_the_future(wire):
    r = produce_response(wire, build_batch([Rec(value=b"future",
                                                timestamp=now_ms() + 10 * AFTER_MAX_MS)]))
    assert r.error_code == INVALID_TIMESTAMP, r


def test_timestamp_too_far_in_the_past(wire):
    r = produce_response(wire, build_batch([Rec(value=b"past",
                                                timestamp=now_ms() - 2 * BEFORE_MAX_MS)]))
    assert r.error_code == INVALID_TIMESTAMP, r


def test_acks_0_bad_batch_closes_the_connection(wire):
    """With acks=0 there is no response to carry the error: Kafka closes the connection so that
    the client notices."""
    produce_response(wire, _batch(crc=1), acks=0)
    assert wire.closed_by_broker()


# --- afterwards ---------------------------------------------------------------------------------

def test_normal_clients_still_work_after_all_of_the_above(broker):
    from tests.integration.clients import CONSUMERS, PRODUCERS

    topic = "after-bad-frames"
    ensure_topic(broker.bootstrap, topic, 1)
    sent = [Rec(value=f"ok-{i}".encode(), key=b"k") for i in range(20)]
    acks = PRODUCERS["confluent"](broker.bootstrap, topic, sent, codec="zstd")
    assert [a.offset for a in acks] == list(range(20))
    got = CONSUMERS["confluent"](broker.bootstrap, topic, 20, partitions=[0])
    assert [g.value for g in got] == [r.value for r in sent]
    got = CONSUMERS["kcat"](broker.bootstrap, topic, 20, partitions=[0])
    assert [g.value for g in got] == [r.value for r in sent]
