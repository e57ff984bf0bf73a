"""kbroker.protocol.records: RecordBatch v2 view, builder, records, control records, interop."""

from __future__ import annotations

import struct
import types

import cramjam
import pytest
from hypothesis import given, settings, strategies as st

from kbroker.protocol import records as r
from kbroker.protocol.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD, CompressionError
from kbroker.protocol.primitives import DecodeError
from kbroker.protocol.records import (
    BATCH_HEADER_SIZE, CONTROL_ABORT, CONTROL_COMMIT, CREATE_TIME, LOG_APPEND_TIME, LOG_OVERHEAD,
    BatchHeader, CorruptRecordError, Record, RecordBatchBuilder, build_control_batch, count_records,
    decode_records, iter_batches, parse_control_record, set_base_offset,
    set_max_timestamp_and_log_append_time, set_partition_leader_epoch,
)

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
LIMIT = 1 << 20

headers_st = st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=8)), max_size=3)
record_st = st.tuples(
    st.integers(min_value=-(1 << 40), max_value=1 << 40),  # timestamp offset from a base
    st.none() | st.binary(max_size=40),
    st.none() | st.binary(max_size=200),
    headers_st,
)


def build(records, **kwargs):
    builder = RecordBatchBuilder(**kwargs)
    for timestamp, key, value, headers in records:
        builder.append(timestamp, key, value, headers)
    return builder.build()


def test_layout_constants():
    assert BATCH_HEADER_SIZE == 61 and LOG_OVERHEAD == 12 and r.MIN_BATCH_LENGTH == 49
    assert r.HEADER.size + r.HEADER_TAIL.size == BATCH_HEADER_SIZE
    assert r.HEADER.size == r.ATTRIBUTES_OFFSET
    assert (r.NO_PRODUCER_ID, r.NO_SEQUENCE, r.NO_PARTITION_LEADER_EPOCH) == (-1, -1, -1)
    assert (CREATE_TIME, LOG_APPEND_TIME, CONTROL_ABORT, CONTROL_COMMIT) == (0, 1, 0, 1)
    assert issubclass(CorruptRecordError, DecodeError)


# --- round trips -----------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("timestamp_type", [CREATE_TIME, LOG_APPEND_TIME])
@settings(max_examples=25, deadline=None)
@given(records=st.lists(record_st, min_size=1, max_size=12), base_timestamp=st.integers(0, 1 << 42))
def test_builder_iter_decode_round_trip(codec, timestamp_type, records, base_timestamp):
    records = [(base_timestamp + t, k, v, h) for t, k, v, h in records]
    data = build(records, compression=codec, timestamp_type=timestamp_type, producer_id=4242,
                 producer_epoch=7, base_sequence=100, is_transactional=True,
                 partition_leader_epoch=3, base_offset=1000)
    [header] = list(iter_batches(data))
    assert header.size == len(data)
    assert header.is_valid_crc()
    assert header.magic == 2
    assert header.compression == codec
    assert header.timestamp_type == timestamp_type
    assert header.is_transactional and not header.is_control and not header.has_delete_horizon
    assert header.base_offset == 1000 and header.partition_leader_epoch == 3
    assert header.record_count == len(records)
    assert header.last_offset_delta == len(records) - 1
    assert header.last_offset == 1000 + len(records) - 1
    assert header.base_timestamp == records[0][0]
    assert header.max_timestamp == max(t for t, *_ in records)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (4242, 7, 100)
    assert header.last_sequence == 100 + len(records) - 1
    assert header.fields()[0] == 1000 and len(header.fields()) == 13
    decoded = decode_records(header, LIMIT)
    assert count_records(header, LIMIT) == len(records)
    for i, (record, (timestamp, key, value, headers)) in enumerate(zip(decoded, records)):
        assert (record.offset_delta, record.key, record.value) == (i, key, value)
        assert record.headers == list(headers)
        assert record.offset(header) == 1000 + i
        expected_ts = header.max_timestamp if timestamp_type == LOG_APPEND_TIME else timestamp
        assert record.timestamp(header) == expected_ts


def test_many_batches_and_partial_tail():
    batches = [build([(1000 + i, b"k%d" % i, b"v" * i, [])], base_offset=i * 10) for i in range(5)]
    data = b"".join(batches)
    headers = list(iter_batches(memoryview(data)))
    assert [h.base_offset for h in headers] == [0, 10, 20, 30, 40]
    assert [h.pos for h in headers] == [sum(map(len, batches[:i])) for i in range(5)]
    for cut in (1, 11, 12, 20, 60, len(batches[-1]) - 1):
        truncated = data[:-cut]
        assert len(list(iter_batches(truncated, allow_partial_tail=True))) == 4
        with pytest.raises(CorruptRecordError):
            list(iter_batches(truncated))
    assert list(iter_batches(b"")) == []


def test_header_view_does_not_copy():
    buf = bytearray(build([(5, b"key", b"value", [])]))
    header = BatchHeader(buf)
    view = header.records_view()
    assert view.obj is buf and header.view().obj is buf
    assert len(header.view()) == len(buf)
    assert len(view) == len(buf) - BATCH_HEADER_SIZE


def test_empty_batch_keeps_its_offset_span():
    data = RecordBatchBuilder(producer_id=1, producer_epoch=0, base_sequence=5).build(last_offset_delta=9)
    [header] = iter_batches(data)
    assert header.record_count == 0 and header.last_offset_delta == 9 and header.is_valid_crc()
    assert header.base_timestamp == -1 and header.max_timestamp == -1
    assert decode_records(header, LIMIT) == []


def test_offset_delta_gaps_for_compacted_batches():
    builder = RecordBatchBuilder(compression=ZSTD)
    builder.append(1, b"a", b"1", offset_delta=2)
    builder.append(2, b"b", b"2", offset_delta=7)
    with pytest.raises(ValueError):
        builder.append(3, b"c", b"3", offset_delta=7)
    [header] = iter_batches(builder.build())
    assert header.last_offset_delta == 7
    assert [rec.offset_delta for rec in decode_records(header, LIMIT)] == [2, 7]


def test_last_sequence_wraps_like_kafka():
    data = build([(1, None, b"x", [])] * 3, producer_id=1, producer_epoch=0,
                 base_sequence=2**31 - 2)
    [header] = iter_batches(data)
    assert header.last_sequence == 0
    assert r.increment_sequence(2**31 - 1, 1) == 0
    [header] = iter_batches(build([(1, None, b"x", [])]))
    assert header.last_sequence == r.NO_SEQUENCE and not header.has_producer_id


def test_invalid_utf8_header_key_round_trips():
    builder = RecordBatchBuilder()
    builder.append(1, None, None, [("\udcff\udcfe", b"v")])
    [header] = iter_batches(builder.build())
    [record] = decode_records(header, LIMIT)
    again = RecordBatchBuilder()
    again.append(1, None, None, record.headers)
    assert again.build() == builder.build()


# --- CRC and in-place patches ----------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(index=st.integers(min_value=r.CRC_OFFSET), xor=st.integers(1, 255),
       codec=st.sampled_from(CODECS))
def test_crc_detects_any_mutation_it_covers(index, xor, codec):
    data = bytearray(build([(10, b"k", b"value" * 20, [("h", b"1")])] * 3, compression=codec))
    index = r.CRC_OFFSET + index % (len(data) - r.CRC_OFFSET)
    data[index] ^= xor
    assert not BatchHeader(data).is_valid_crc()


def test_patches_outside_the_crc():
    buf = bytearray(build([(10, b"k", b"v", [])]) * 2)
    second = len(buf) // 2
    set_base_offset(buf, second, 1 << 40)
    set_partition_leader_epoch(memoryview(buf), second, 17)
    first, patched = iter_batches(buf)
    assert patched.base_offset == 1 << 40 and patched.partition_leader_epoch == 17
    assert patched.last_offset == (1 << 40)
    assert first.base_offset == 0 and first.partition_leader_epoch == -1
    assert first.is_valid_crc() and patched.is_valid_crc()


@pytest.mark.parametrize("codec", CODECS)
def test_log_append_time_rewrites_crc(codec):
    buf = bytearray(build([(10, b"k", b"v", []), (30, None, b"w", [])], compression=codec,
                          is_transactional=True, producer_id=1, producer_epoch=0, base_sequence=0))
    set_max_timestamp_and_log_append_time(buf, 0, 99_999)
    [header] = iter_batches(buf)
    assert header.is_valid_crc()
    assert header.timestamp_type == LOG_APPEND_TIME and header.max_timestamp == 99_999
    assert header.compression == codec and header.is_transactional
    assert [rec.timestamp(header) for rec in decode_records(header, LIMIT)] == [99_999, 99_999]
    before = bytes(buf)
    set_max_timestamp_and_log_append_time(buf, 0, 99_999)
    assert bytes(buf) == before


# --- control batches -------------------------------------------------------------------------------

@pytest.mark.parametrize("control_type", [CONTROL_ABORT, CONTROL_COMMIT])
def test_control_batch(control_type):
    data = build_control_batch(control_type, producer_id=77, producer_epoch=3, coordinator_epoch=12,
                               base_offset=500, timestamp_ms=1234, partition_leader_epoch=4)
    [header] = iter_batches(data)
    assert header.is_valid_crc() and header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (77, 3, -1)
    assert (header.base_offset, header.partition_leader_epoch, header.max_timestamp) == (500, 4, 1234)
    [record] = decode_records(header, LIMIT)
    assert record.key == struct.pack(">hh", 0, control_type)
    assert record.value == struct.pack(">hi", 0, 12)
    assert parse_control_record(record) == (control_type, 12)


def test_parse_other_and_bad_control_records():
    assert parse_control_record(Record(0, 0, struct.pack(">hh", 0, 3), b"anything")) == (3, None)
    for key, value in [(None, None), (b"\0\0\0", None), (struct.pack(">hh", -1, 0), b"\0" * 6),
                       (struct.pack(">hh", 0, 1), b"\0\0\0"), (struct.pack(">hh", 0, 0), None)]:
        with pytest.raises(CorruptRecordError):
            parse_control_record(Record(0, 0, key, value))


# --- malformed batches -----------------------------------------------------------------------------

def test_length_below_minimum_and_bad_magic():
    data = bytearray(build([(1, None, b"x", [])]))
    bad = bytearray(data)
    struct.pack_into(">i", bad, r.BATCH_LENGTH_OFFSET, 48)
    with pytest.raises(CorruptRecordError, match="minimum"):
        list(iter_batches(bad, allow_partial_tail=True))
    bad = bytearray(data)
    bad[r.MAGIC_OFFSET] = 1
    with pytest.raises(CorruptRecordError, match="magic"):
        list(iter_batches(bad))


@pytest.mark.parametrize("codec", CODECS)
def test_lying_record_count(codec):
    data = bytearray(build([(1, b"k", b"v", [])] * 5, compression=codec))
    for claimed in (4, 6, 0, -1, 2**31 - 1):
        struct.pack_into(">i", data, r.RECORDS_COUNT_OFFSET, claimed)
        [header] = iter_batches(data)
        assert count_records(header, LIMIT) == 5
        with pytest.raises(CorruptRecordError):
            decode_records(header, LIMIT)


def test_varints():
    for value in [0, 1, -1, 63, -64, 64, 2**31 - 1, -2**31, 300, -300]:
        out = bytearray()
        r.write_varint(out, value)
        assert r.read_varint(bytes(out), 0) == (value, len(out))
        assert len(out) == r.size_of_varint(value)
    for value in [2**63 - 1, -2**63, 2**40]:
        out = bytearray()
        r.write_varlong(out, value)
        assert r.read_varlong(bytes(out), 0) == (value, len(out))
    with pytest.raises(CorruptRecordError):
        r.read_varint(b"\xff" * 5 + b"\x01", 0)
    with pytest.raises(CorruptRecordError):
        r.read_varlong(b"\xff" * 10 + b"\x01", 0)
    # Java's readVarint keeps the low 32 bits of a 5-byte varint.
    assert r.read_varint(b"\xfe\xff\xff\xff\x7f", 0) == (2**31 - 1, 5)


def _batch_with_body(body: bytes, count: int) -> bytes:
    builder = RecordBatchBuilder()
    data = bytearray(builder.build())
    data += body
    struct.pack_into(">i", data, r.BATCH_LENGTH_OFFSET, len(data) - LOG_OVERHEAD)
    struct.pack_into(">i", data, r.RECORDS_COUNT_OFFSET, count)
    return bytes(data)


@pytest.mark.parametrize("body", [
    b"\x02",  # record of length 1, then nothing
    b"\x7f",  # negative record length
    b"\x0e\x00\x00\x00\x7f\x00\x00\x00",  # key length -64 is null, then fields end early
    b"\x0c\x00\x00\x00\x10abc\x00\x00",  # key longer than the record
    b"\x0c\x00\x00\x00\x01\x01\x01",  # negative header count
    b"\x0a\x00\x00\x00\x01\x01\x02\x7f\x01\x00",  # negative header key length
    b"\x0a\x00\x00\x00\x01\x01\x00\x00\x00\x00",  # fields run past the declared record length
    b"\x0c\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",  # overlong varlong timestamp
])
def test_malformed_records(body):
    [header] = iter_batches(_batch_with_body(body, 1))
    with pytest.raises(CorruptRecordError):
        decode_records(header, LIMIT)


def test_compressed_bomb_in_batch():
    builder = RecordBatchBuilder(compression=ZSTD)
    for _ in range(64):
        builder.append(1, None, b"\0" * 100_000)
    [header] = iter_batches(builder.build())
    with pytest.raises(CompressionError):
        decode_records(header, 1_000_000)
    with pytest.raises(CompressionError):
        count_records(header, 1_000_000)
    assert len(decode_records(header, 7_000_000)) == 64


def test_unknown_codec_in_attributes():
    data = bytearray(build([(1, None, b"x", [])]))
    data[r.ATTRIBUTES_OFFSET + 1] |= 0x07
    [header] = iter_batches(data)
    with pytest.raises(CompressionError):
        decode_records(header, LIMIT)


def _decode_all(buf):
    for header in iter_batches(buf, allow_partial_tail=True):
        header.is_valid_crc()
        count_records(header, 1 << 16)
        for record in decode_records(header, 1 << 16):
            record.offset(header), record.timestamp(header)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=400))
def test_random_buffers_raise_only_decode_errors(data):
    try:
        _decode_all(data)
    except DecodeError:
        pass


@settings(max_examples=300, deadline=None)
@given(codec=st.sampled_from(CODECS), records=st.lists(record_st, min_size=1, max_size=4),
       edits=st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)), max_size=4),
       cut=st.integers(min_value=0), fix_crc=st.booleans())
def test_mutated_batches_raise_only_decode_errors(codec, records, edits, cut, fix_crc):
    data = bytearray(build(records, compression=codec))
    for index, byte in edits:
        data[index % len(data)] = byte
    if fix_crc and len(data) >= BATCH_HEADER_SIZE:
        struct.pack_into(">I", data, r.CRC_OFFSET,
                         r.crc32c(memoryview(data)[r.ATTRIBUTES_OFFSET:]))
    if cut % 4 == 0:
        del data[cut % len(data):]
    try:
        _decode_all(bytes(data))
        list(iter_batches(data))
    except DecodeError:
        pass


# --- interop with real clients' record code --------------------------------------------------------

INTEROP_RECORDS = [
    (1_700_000_000_000, b"key-0", b"value-0" * 50, [("trace", b"abc"), ("empty", b""), ("null", None)]),
    (1_700_000_000_005, None, b"value-1", []),
    (1_699_999_999_990, b"key-2", None, [("h", b"\x00\xff")]),
    (1_700_000_000_100, b"", b"x" * 5000, []),
]


def _check_decoded(header, expected):
    assert header.is_valid_crc()
    assert header.record_count == len(expected)
    decoded = decode_records(header, LIMIT)
    assert [(d.timestamp(header), d.key, d.value, d.headers) for d in decoded] == [
        (t, k, v, list(h)) for t, k, v, h in expected]
    assert [d.offset(header) for d in decoded] == list(range(len(expected)))


def _aiokafka_builders():
    from aiokafka.record import default_records as ak

    return [ak._DefaultRecordBatchBuilderPy, getattr(ak, "_DefaultRecordBatchBuilderCython", None)]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("impl", ["py", "cython"])
def test_aiokafka_built_batches_decode(codec, impl):
    builder_cls = _aiokafka_builders()[impl == "cython"]
    if builder_cls is None:
        pytest.skip("aiokafka built without extensions")
    builder = builder_cls(magic=2, compression_type=codec, is_transactional=0, producer_id=9,
                          producer_epoch=1, base_sequence=5, batch_size=1 << 20)
    for offset, (timestamp, key, value, headers) in enumerate(INTEROP_RECORDS):
        assert builder.append(offset, timestamp, key, value, headers) is not None
    [header] = iter_batches(bytes(builder.build()))
    assert header.compression == codec  # aiokafka keeps the codec when it helps; these compress
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (9, 1, 5)
    _check_decoded(header, INTEROP_RECORDS)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("impl", ["py", "cython"])
def test_aiokafka_reads_our_batches(codec, impl):
    from aiokafka.record import default_records as ak

    reader_cls = ak._DefaultRecordBatchPy if impl == "py" else getattr(ak, "_DefaultRecordBatchCython", None)
    if reader_cls is None:
        pytest.skip("aiokafka built without extensions")
    data = build(INTEROP_RECORDS, compression=codec, producer_id=9, producer_epoch=1, base_sequence=5,
                 base_offset=40)
    batch = reader_cls(data)
    assert batch.validate_crc()
    assert batch.base_offset == 40 and batch.compression_type == codec
    got = [(rec.offset, rec.timestamp, rec.key, rec.value, list(rec.headers)) for rec in batch]
    assert got == [(40 + i, t, k, v, list(h)) for i, (t, k, v, h) in enumerate(INTEROP_RECORDS)]


@pytest.fixture
def kafka_python_codecs(monkeypatch):
    """kafka-python ships codec glue but no snappy/lz4/zstd libraries here; give its own glue
    (xerial framing etc.) cramjam's primitives, independent of kbroker's compression module."""
    import kafka.codec as kc
    import kafka.record.default_records as kdr

    monkeypatch.setattr(kc, "snappy", types.SimpleNamespace(
        compress=lambda data: bytes(cramjam.snappy.compress_raw(bytes(data))),
        decompress=lambda data: bytes(cramjam.snappy.decompress_raw(bytes(data)))))

    def lz4_encode(data):
        compressor = cramjam.lz4.Compressor(level=9, content_checksum=True, block_linked=False)
        compressor.compress(bytes(data))
        return bytes(compressor.finish())

    for module in (kc, kdr):
        monkeypatch.setattr(module, "lz4_encode", lz4_encode)
        monkeypatch.setattr(module, "lz4_decode", lambda data: bytes(cramjam.lz4.decompress(bytes(data))))
        monkeypatch.setattr(module, "zstd_encode", lambda data: bytes(cramjam.zstd.compress(bytes(data))))
        monkeypatch.setattr(module, "zstd_decode", lambda data: bytes(cramjam.zstd.decompress(bytes(data))))
    monkeypatch.setattr(kc, "has_lz4", lambda: True)
    monkeypatch.setattr(kc, "has_zstd", lambda: True)
    return kdr


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_built_batches_decode(codec, kafka_python_codecs):
    builder = kafka_python_codecs.DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=False, producer_id=-1, producer_epoch=-1,
        base_sequence=-1, batch_size=1 << 20)
    for offset, (timestamp, key, value, headers) in enumerate(INTEROP_RECORDS):
        assert builder.append(offset, timestamp, key, value, headers) is not None
    [header] = iter_batches(bytes(builder.build()))
    assert header.compression == codec
    _check_decoded(header, INTEROP_RECORDS)


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_reads_our_batches(codec, kafka_python_codecs):
    data = build(INTEROP_RECORDS, compression=codec, base_offset=7)
    data += build_control_batch(CONTROL_ABORT, producer_id=3, producer_epoch=0, coordinator_epoch=5,
                                base_offset=11, timestamp_ms=1)
    batches = list(iter_batches(data))
    batch = kafka_python_codecs.DefaultRecordBatch(data[:batches[0].size])
    assert batch.validate_crc()
    got = [(rec.offset, rec.timestamp, rec.key, rec.value, list(rec.headers)) for rec in batch]
    assert got == [(7 + i, t, k, v, list(h)) for i, (t, k, v, h) in enumerate(INTEROP_RECORDS)]
    control = kafka_python_codecs.DefaultRecordBatch(data[batches[0].size:])
    assert control.validate_crc() and control.is_control_batch and control.is_transactional
    [marker] = list(control)
    assert marker.abort and marker.version == 0
