"""compression.type on the log: a batch whose codec is not the topic's is rebuilt as Kafka's
LogValidator rebuilds it (kbroker.log.recompression), one batch out per batch in."""

import os
import struct
import subprocess

import pytest

from kbroker.log import LogConfig
from kbroker.protocol import compression as codecs
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.protocol.records import (LOG_APPEND_TIME, RECORDS_OFFSET, BatchHeader,
                                      RecordBatchBuilder, decode_records, iter_batches,
                                      write_varint)

from .conftest import NOW, append, kafka_java, read_all

TYPES = ["uncompressed", "gzip", "snappy", "lz4", "zstd"]
SOURCES = [codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD]
TARGET = {"uncompressed": codecs.NONE, "gzip": codecs.GZIP, "snappy": codecs.SNAPPY,
          "lz4": codecs.LZ4, "zstd": codecs.ZSTD}


def produced(codec=codecs.NONE, count=5, producer_id=-1, producer_epoch=-1, base_sequence=-1,
             transactional=False, headers=(), ts_step=3, value=b"value-%d" * 20):
    builder = RecordBatchBuilder(compression=codec, producer_id=producer_id,
                                 producer_epoch=producer_epoch, base_sequence=base_sequence,
                                 is_transactional=transactional)
    for i in range(count):
        builder.append(NOW + i * ts_step, b"key-%d" % i, value.replace(b"%d", b"%d" % i)
                       if b"%d" in value else value, list(headers))
    return builder.build()


def stored(log):
    data = read_all(log)
    return [(BatchHeader(data, h.pos), decode_records(BatchHeader(data, h.pos), 1 << 26))
            for h in iter_batches(data)]


def content(header, records):
    """What a consumer sees: offsets, timestamps, keys, values, headers."""
    return [(header.base_offset + r.offset_delta, r.timestamp(header), r.key, r.value, r.headers)
            for r in records]


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("topic_type", TYPES)
def test_every_codec_to_every_type(open_log, source, topic_type):
    log = open_log(LogConfig(compression_type=topic_type))
    first = produced(source, headers=[("h", b"v"), ("n", None)])
    append(log, first)
    append(log, produced(source, count=3))
    (h1, r1), (h2, r2) = stored(log)                   # one batch out per batch in
    assert h1.compression == h2.compression == TARGET[topic_type]
    assert (h1.base_offset, h1.last_offset_delta, h2.base_offset) == (0, 4, 5)
    assert all(h.is_valid_crc() for h in (h1, h2))
    original = BatchHeader(first)
    assert content(h1, r1) == content(original, decode_records(original, 1 << 26))
    assert [r.offset_delta for r in r1] == list(range(5))
    assert (h1.base_timestamp, h1.max_timestamp) == (NOW, NOW + 12)
    if TARGET[topic_type] == source:                   # nothing to do: appended as it came
        assert read_all(log)[RECORDS_OFFSET:h1.size] == first[RECORDS_OFFSET:]


def test_producer_keeps_the_producers_codec(open_log):
    log = open_log(LogConfig(compression_type="producer"))
    for codec in SOURCES:
        append(log, produced(codec))
    assert [h.compression for h, _ in stored(log)] == SOURCES


@pytest.mark.parametrize("topic_type", ["lz4", "uncompressed"])
def test_idempotent_and_transactional_batches_keep_producer_id_epoch_and_sequence(open_log,
                                                                                   topic_type):
    log = open_log(LogConfig(compression_type=topic_type))
    source = codecs.GZIP if topic_type == "uncompressed" else codecs.NONE
    append(log, produced(source, producer_id=7, producer_epoch=2, base_sequence=0))
    append(log, produced(source, producer_id=7, producer_epoch=2, base_sequence=5))
    retry = log.append_as_leader(produced(source, producer_id=7, producer_epoch=2,
                                          base_sequence=5), 0, NOW)
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (5, 9)
    append(log, produced(source, producer_id=8, producer_epoch=0, base_sequence=0,
                         transactional=True))
    batches = [h for h, _ in stored(log)]
    assert [(h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence,
             h.is_transactional) for h in batches] == [
        (7, 2, 0, 4, False), (7, 2, 5, 9, False), (8, 0, 0, 4, True)]
    assert {h.compression for h in batches} == {TARGET[topic_type]}
    assert log.first_unstable_offset == 10             # the transaction is open from its batch
    with pytest.raises(KafkaError) as info:            # the sequence still counts
        log.append_as_leader(produced(source, producer_id=7, producer_epoch=2,
                                      base_sequence=12), 0, NOW)
    assert info.value.error == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_log_append_time_as_kafka_sets_it(open_log):
    log = open_log(LogConfig(compression_type="zstd", message_timestamp_type="LogAppendTime"))
    result = log.append_as_leader(produced(codecs.NONE), 0, NOW + 500)
    log.high_watermark = log.log_end_offset
    (header, records), = stored(log)
    assert result.log_append_time == NOW + 500
    assert header.timestamp_type == LOG_APPEND_TIME and header.compression == codecs.ZSTD
    assert header.max_timestamp == NOW + 500 and header.base_timestamp == NOW
    # The records keep their create times inside; a consumer sees the append time.
    assert [header.base_timestamp + r.timestamp_delta for r in records] == \
        [NOW + 3 * i for i in range(5)]
    assert {r.timestamp(header) for r in records} == {NOW + 500}


def _raw_records(records):
    """(attributes, timestamp delta, offset delta, key, value) records, encoded by hand."""
    out = bytearray()
    for attributes, ts_delta, offset_delta, key, value in records:
        body = bytearray([attributes])
        write_varint(body, ts_delta)
        write_varint(body, offset_delta)
        write_varint(body, len(key))
        body += key
        write_varint(body, len(value))
        body += value
        body.append(0)
        write_varint(out, len(body))
        out += body
    return bytes(out)


def _batch_around(records, count, last_offset_delta, base_ts, max_ts, codec=codecs.NONE):
    from kbroker.protocol.records import assemble_batch
    return assemble_batch(records, count, compression=codec, last_offset_delta=last_offset_delta,
                          base_timestamp=base_ts, max_timestamp=max_ts)


@pytest.mark.parametrize("records, why", [
    ([(0, 0, 0, b"a", b"1"), (0, 5, 2, b"b", b"2"), (0, 9, 4, b"c", b"3")], "offset gaps"),
    ([(0, 0, 0, b"a", b"1"), (4, 5, 1, b"b", b"2"), (0, 9, 2, b"c", b"3")], "record attributes"),
    ([(0, 2, 0, b"a", b"1"), (0, 5, 1, b"b", b"2"), (0, 9, 2, b"c", b"3")], "first delta 2"),
])
def test_records_are_rewritten_as_kafkas_builder_writes_them(open_log, records, why):
    log = open_log(LogConfig(compression_type="lz4"))
    last = records[-1][2]
    batch = _batch_around(_raw_records(records), 3, last, NOW, NOW + 9)
    if why == "offset gaps":
        with pytest.raises(KafkaError):               # lastOffsetDelta 4 with 3 records
            log.append_as_leader(batch, 0, NOW)
        batch = _batch_around(_raw_records(records), 3, 2, NOW, NOW + 9)
    append(log, batch)
    (header, stored_records), = stored(log)
    assert [(r.attributes, r.offset_delta) for r in stored_records] == [(0, 0), (0, 1), (0, 2)]
    assert header.base_timestamp == NOW + records[0][1]
    assert [r.timestamp(header) for r in stored_records] == [NOW + r[1] for r in records]
    assert header.max_timestamp == NOW + 9 and header.last_offset_delta == 2


def test_levels_reach_the_compressor(tmp_path):
    from kbroker.log import PartitionLog
    value = bytes(range(256)) * 4 + b"abc" * 2000
    sizes = {}
    for level in (1, 9):
        log = PartitionLog.open(str(tmp_path / f"t-{level}"), "t", level,
                                LogConfig(compression_type="gzip", compression_gzip_level=level),
                                now_ms=NOW)
        append(log, produced(codecs.NONE, count=20, value=value))
        sizes[level] = log.size_in_bytes
    assert sizes[9] < sizes[1]
    assert codecs.level_for(codecs.GZIP, -1) == 6 and codecs.level_for(codecs.LZ4, 9) == 1
    assert codecs.level_for(codecs.LZ4, 12) == 12 and codecs.level_for(codecs.ZSTD, -5) == -5


def test_a_rebuilt_batch_over_max_message_bytes_is_refused(open_log):
    log = open_log(LogConfig(compression_type="uncompressed", max_message_bytes=2000))
    batch = produced(codecs.ZSTD, count=50, value=b"z" * 100)
    assert len(batch) < 2000
    with pytest.raises(KafkaError) as info:
        log.append_as_leader(batch, 0, NOW)
    assert info.value.error == Errors.MESSAGE_TOO_LARGE
    assert "bytes in append topartition topic-0 which exceeds the maximum configured size of " \
        "2000." in info.value.message
    assert log.log_end_offset == 0 and log.size_in_bytes == 0


def test_changing_the_type_applies_to_new_batches_only(open_log):
    config = LogConfig(compression_type="gzip")
    log = open_log(config)
    append(log, produced(codecs.NONE))
    log.config = LogConfig(compression_type="zstd")
    append(log, produced(codecs.NONE))
    log.config = LogConfig(compression_type="producer")
    append(log, produced(codecs.SNAPPY))
    assert [h.compression for h, _ in stored(log)] == [codecs.GZIP, codecs.ZSTD, codecs.SNAPPY]


def test_corrupt_compressed_batch_is_refused_and_nothing_is_written(open_log):
    log = open_log(LogConfig(compression_type="lz4"))
    append(log, produced(codecs.NONE))
    good = bytearray(produced(codecs.GZIP))
    good[RECORDS_OFFSET + 12] ^= 0xFF                  # inside the deflate stream
    from crc32c import crc32c
    struct.pack_into(">I", good, 17, crc32c(bytes(good[21:])))
    with pytest.raises(KafkaError) as info:
        log.append_as_leader(bytes(good), 0, NOW)
    # Kafka 4.4 answers a batch that does not decompress with UNKNOWN_SERVER_ERROR
    # (tests/integration/test_compression_reference.py)
    assert info.value.error == Errors.UNKNOWN_SERVER_ERROR
    assert log.log_end_offset == 5 and len(stored(log)) == 1


def test_compacted_topic_rebuilds_from_its_decoded_records(open_log):
    log = open_log(LogConfig(compression_type="snappy", cleanup_policy=["compact"]))
    append(log, produced(codecs.LZ4))
    (header, records), = stored(log)
    assert header.compression == codecs.SNAPPY and [r.key for r in records] == \
        [b"key-%d" % i for i in range(5)]


def test_dump_log_segments_reads_every_rebuilt_codec(tmp_path):
    from kbroker.log import PartitionLog
    dirs = []
    for i, topic_type in enumerate(TYPES):
        path = tmp_path / f"t-{i}"
        log = PartitionLog.open(str(path), "t", i, LogConfig(compression_type=topic_type),
                                now_ms=NOW)
        append(log, produced(codecs.NONE, producer_id=3, producer_epoch=1, base_sequence=0))
        append(log, produced(codecs.GZIP if topic_type != "gzip" else codecs.ZSTD,
                             producer_id=3, producer_epoch=1, base_sequence=5))
        log.flush()
        dirs.append((topic_type, path))
    files = [str(path / "00000000000000000000.log") for _, path in dirs]
    out = subprocess.run([*kafka_java("org.apache.kafka.tools.DumpLogSegments"),
                          "--deep-iteration", "--print-data-log", "--files", ",".join(files)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "Exception" not in out.stderr, out.stderr
    sections = out.stdout.split("Dumping ")[1:]
    assert len(sections) == len(TYPES)
    for (topic_type, _), section in zip(dirs, sections):
        codec = "none" if topic_type == "uncompressed" else topic_type
        assert section.count(f"compresscodec: {codec}") == 2, section
        assert section.count("| offset: ") == 10, section
        assert section.count("producerId: 3 producerEpoch: 1") == 2 and "isvalid: false" not in section
        assert "baseOffset: 5 lastOffset: 9 count: 5 baseSequence: 5 lastSequence: 9" in section
        assert "key: key-4 payload: value-4" in section and "key: key-0" in section
    assert os.path.exists(files[0])
