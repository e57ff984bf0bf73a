import struct

import pytest

from kbroker.log import LogConfig, RecordValidationError
from kbroker.protocol.compression import GZIP
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.protocol.records import RecordBatchBuilder

from .conftest import NOW, append, make_batch


def rejected(log, batch, error, config=None, now=NOW):
    size_before = log.size_in_bytes
    end_before = log.log_end_offset
    with pytest.raises(KafkaError) as e:
        log.append_as_leader(batch, 0, now)
    assert e.value.error == error, e.value
    assert log.size_in_bytes == size_before and log.log_end_offset == end_before
    return e.value


def patch(batch, offset, fmt, value):
    data = bytearray(batch)
    struct.pack_into(fmt, data, offset, value)
    return bytes(data)


def fix_crc(batch):
    from crc32c import crc32c
    return patch(batch, 17, ">I", crc32c(batch[21:]))


def test_bad_crc(open_log):
    batch = bytearray(make_batch())
    batch[-1] ^= 1
    rejected(open_log(), bytes(batch), Errors.CORRUPT_MESSAGE)


def test_old_magic_is_invalid_record(open_log):
    rejected(open_log(), patch(make_batch(), 16, ">b", 1), Errors.INVALID_RECORD)


def test_too_large(open_log):
    batch = make_batch(value=b"x" * 2000)
    rejected(open_log(LogConfig(max_message_bytes=1000)), batch, Errors.MESSAGE_TOO_LARGE)


def test_count_mismatch(open_log):
    log = open_log()
    # Header says 4 records, lastOffsetDelta says 3 (offsets 0..2): inconsistent.
    rejected(log, fix_crc(patch(make_batch(3), 57, ">i", 4)), Errors.INVALID_RECORD)
    # Consistent header (4 records, delta 3) but only 3 records in the body.
    lying = fix_crc(patch(patch(make_batch(3), 57, ">i", 4), 23, ">i", 3))
    rejected(log, lying, Errors.INVALID_RECORD)
    # Zero records.
    rejected(log, fix_crc(patch(patch(make_batch(1), 57, ">i", 0), 23, ">i", -1)),
             Errors.INVALID_RECORD)


def test_batch_shape(open_log):
    log = open_log()
    rejected(log, b"", Errors.INVALID_RECORD)
    rejected(log, make_batch()[:50], Errors.INVALID_RECORD)            # partial batch only
    rejected(log, make_batch() + make_batch(), Errors.INVALID_RECORD)  # two batches
    rejected(log, patch(make_batch(), 8, ">i", 10), Errors.CORRUPT_MESSAGE)
    rejected(log, patch(make_batch(), 0, ">q", 5), Errors.INVALID_RECORD)  # base offset != 0
    # A trailing partial batch is trimmed, as Kafka does.
    assert append(log, make_batch() + make_batch()[:30]).last_offset == 2


def test_control_batch_from_client(open_log):
    batch = fix_crc(patch(make_batch(), 21, ">h", 0x20))
    rejected(open_log(), batch, Errors.INVALID_RECORD)


def test_producer_id_without_sequence(open_log):
    rejected(open_log(), make_batch(producer_id=5, producer_epoch=0, base_sequence=-1),
             Errors.INVALID_RECORD)


def test_timestamps(open_log):
    config = LogConfig(message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=500)
    log = open_log(config)
    e = rejected(log, make_batch(3, ts=NOW - 2000, ts_step=800), Errors.INVALID_TIMESTAMP)
    assert isinstance(e, RecordValidationError)
    assert [i for i, _ in e.record_errors] == [0, 1]       # NOW-2000, NOW-1200 out; NOW-400 in
    e = rejected(log, make_batch(2, ts=NOW + 400, ts_step=200), Errors.INVALID_TIMESTAMP)
    assert [i for i, _ in e.record_errors] == [1]
    append(log, make_batch(2, ts=NOW - 1000, ts_step=1500))   # both ends inclusive
    append(log, make_batch(1, ts=-1))                         # no timestamp: not checked
    # LogAppendTime topics ignore the producer's timestamps...
    log.config = LogConfig(message_timestamp_type="LogAppendTime",
                           message_timestamp_before_max_ms=1000)
    append(log, make_batch(1, ts=0))
    # ...but a producer may not claim LogAppendTime itself.
    builder = RecordBatchBuilder(timestamp_type=1)
    builder.append(NOW, b"k", b"v")
    rejected(log, builder.build(), Errors.INVALID_TIMESTAMP)


def test_keyless_record_on_compacted_topic(open_log):
    log = open_log(LogConfig(cleanup_policy=["compact", "delete"]))
    builder = RecordBatchBuilder()
    builder.append(NOW, b"k", b"v")
    builder.append(NOW, None, b"v")
    builder.append(NOW, None, b"v")
    e = rejected(log, builder.build(), Errors.INVALID_RECORD)
    assert [i for i, _ in e.record_errors] == [1, 2]
    builder = RecordBatchBuilder(compression=GZIP)
    builder.append(NOW, None, b"v")
    rejected(log, builder.build(), Errors.INVALID_RECORD)
    assert append(log, make_batch(2, compression=GZIP)).last_offset == 1
    # Keyless records are fine on a delete-only topic.
    log.config = LogConfig()
    builder = RecordBatchBuilder()
    builder.append(NOW, None, b"v")
    append(log, builder.build())


def test_record_fields_must_fit_their_record(open_log):
    """The CRC and counts are right but a value claims more bytes than its record holds."""
    from kbroker.log.validation import check_record_structure
    builder = RecordBatchBuilder()
    builder.append(NOW, b"k", b"v")
    good = make_batch(1, key=b"k", value=b"v")
    assert check_record_structure(good[61:]) == 1
    data = bytearray(builder.build())
    # record: length, attributes, ts delta, offset delta, key len (1) 'k', value len (1) 'v', 0
    value_length_at = 61 + 1 + 1 + 1 + 1 + 1 + 1
    assert data[value_length_at] == 2   # zig-zag 1
    data[value_length_at] = 8           # zig-zag 4: runs past the record
    rejected(open_log(), fix_crc(bytes(data)), Errors.INVALID_RECORD)
