import random
import struct

import pytest

from kbroker.log import LogConfig, RecordValidationError
from kbroker.log.validation import (_uniform_record_count, _walk_records, check_record_structure,
                                    record_layout)
from kbroker.protocol.compression import GZIP
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.protocol.primitives import DecodeError
from kbroker.protocol.records import (RECORDS_OFFSET, RecordBatchBuilder, read_varint, read_varlong,
                                      write_varint)

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


# --- the regex fast path and the record walk agree ------------------------------------------------
#
# check_record_structure answers from _uniform_record_count (a regex per record shape) when it
# matches and from _walk_records otherwise. The fast path may decline (None) anything, but when it
# answers it must give the walk's answer: the same count, never a count for records the walk
# rejects. Seeded random batches (uniform and mixed shapes, headers, null keys and values,
# multi-byte and non-canonical varints) and random mutations of their record bytes check that.

# Lengths around the 1/2/3-byte varint boundaries (zig-zag: 63|64, 8191|8192).
_LENGTHS = [0, 1, 2, 7, 62, 63, 64, 65, 200, 8191, 8192, 9000]
# Timestamp deltas around the 1..5-byte boundaries, and beyond the fast path's 4 bytes.
_TS_DELTAS = [0, 1, -1, 63, 64, -65, 8191, 8192, 2**20 - 1, 2**20, 2**27 - 1, 2**27, 2**34, -2**40]
_OFFSET_STEPS = [1, 1, 1, 2, 63, 64, 8192, 2**20, 2**27]


def _verdict(function, data):
    try:
        return function(data)
    except DecodeError:
        return "reject"


def _payload(rng, length):
    if length is None:
        return None
    return rng.randbytes(length)


def _pick_length(rng, small=False):
    choices = _LENGTHS[:8] if small else _LENGTHS
    return None if rng.random() < 0.15 else rng.choice(choices)


def _headers(rng):
    return [(rng.choice(["", "h", "trace-id", "k" * 70]), _payload(rng, _pick_length(rng, True)))
            for _ in range(rng.choice([1, 1, 2, 3]))]


def _built_batch(rng):
    """Records from RecordBatchBuilder: (record bytes, count, uniform, fits the fast path)."""
    uniform = rng.random() < 0.7
    big = rng.random() < 0.2
    count = 1 if rng.random() < 0.2 else rng.randint(1, 4 if big else 40)
    key_length, value_length = _pick_length(rng, not big), _pick_length(rng, not big)
    with_headers = rng.random() < 0.25
    wide_ts = rng.random() < 0.3
    wide_offsets = rng.random() < 0.2
    builder = RecordBatchBuilder()
    offset, fast_ok = 0, not with_headers
    for i in range(count):
        if not uniform and i and rng.random() < 0.5:
            key_length, value_length = _pick_length(rng, not big), _pick_length(rng, not big)
        headers = _headers(rng) if with_headers and (uniform or rng.random() < 0.5) else ()
        delta = rng.choice(_TS_DELTAS) if wide_ts and i else rng.randint(0, 50) if i else 0
        if i:
            offset += rng.choice(_OFFSET_STEPS) if wide_offsets else 1
        if not -2**27 <= delta < 2**27 or offset >= 2**20:
            fast_ok = False                   # more than 4 (3) varint bytes: the walk's case
        builder.append(NOW + delta, _payload(rng, key_length), _payload(rng, value_length),
                       headers, offset_delta=offset)
    shapes_equal = uniform and not with_headers
    return bytes(builder.build())[RECORDS_OFFSET:], count, shapes_equal and fast_ok


def _varint(value, extra=0):
    """A zig-zag varint, padded with ``extra`` redundant continuation bytes (non-canonical but
    readable: Kafka's ByteUtils accepts them)."""
    out = bytearray()
    write_varint(out, value)
    if extra:
        out[-1] |= 0x80
        out += b"\x80" * (extra - 1) + b"\x00"
    return bytes(out)


def _hand_built_batch(rng):
    """Same-shaped records whose varints are sometimes padded: the fast path (canonical varints
    only) must decline or agree, the walk decides."""
    key = _payload(rng, _pick_length(rng, True))
    value = _payload(rng, _pick_length(rng, True))
    count = 1 if rng.random() < 0.3 else rng.randint(1, 20)
    padded_record = rng.randrange(count)
    field = rng.choice(["length", "ts", "offset", "key", "value", "headers"])
    extra = rng.randint(1, 3)
    records = bytearray()
    for i in range(count):
        pad = extra if i == padded_record else 0

        def width(name):
            return pad if name == field else 0

        body = bytes([rng.randrange(256)])  # attributes: never checked
        body += _varint(i * 3, width("ts")) + _varint(i, width("offset"))
        body += _varint(-1 if key is None else len(key), width("key")) + (key or b"")
        body += _varint(-1 if value is None else len(value), width("value")) + (value or b"")
        body += _varint(0, width("headers"))
        records += _varint(len(body), width("length")) + body
    return bytes(records), count


def _record_starts(data):
    starts, pos = [], 0
    while pos < len(data):
        starts.append(pos)
        size, pos = read_varint(data, pos)
        pos += size
    return starts


# Zig-zag 0, -1, 1, -2, -3, 63, -64, and continuation bytes.
_SPECIAL_BYTES = [0x00, 0x01, 0x02, 0x03, 0x05, 0x7E, 0x7F, 0x80, 0x81, 0xFE, 0xFF]


def _mutate(rng, data, starts, donors):
    data = bytearray(data)
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        if not data:
            data += rng.randbytes(rng.randint(1, 4))
            continue
        # Half the time aim at a record's varint header or at its end (the header count).
        if rng.random() < 0.5 and starts:
            start = rng.choice(starts)
            pos = min(start + rng.randint(0, 8), len(data) - 1)
            if rng.random() < 0.3:
                pos = max(rng.choice(starts + [len(data)]) - rng.randint(1, 2), 0)
        else:
            pos = rng.randrange(len(data))
        kind = rng.randrange(8)
        if kind == 0:
            data[pos] ^= 1 << rng.randrange(8)
        elif kind == 1:
            data[pos] = rng.choice(_SPECIAL_BYTES)
        elif kind == 2:
            data[pos] = rng.randrange(256)
        elif kind == 3:
            data[pos:pos] = rng.randbytes(rng.randint(1, 3))
        elif kind == 4:
            del data[pos:pos + rng.randint(1, 3)]
        elif kind == 5:
            del data[rng.randint(max(len(data) - 10, 0), len(data) - 1):]     # truncate
        elif kind == 6 and len(starts) > 1:
            # Splice in another record of the same batch (a second shape, or a duplicate).
            i = rng.randrange(len(starts) - 1)
            data[pos:pos] = data[starts[i]:starts[i + 1]]
        else:
            donor = rng.choice(donors)
            cut = rng.randrange(len(donor) + 1)
            data[pos:pos] = donor[cut:cut + rng.randint(1, 40)]
    return bytes(data)


def _canonical_reference(data):
    """Kafka's rebuild writes attributes 0, offset deltas 0..n-1, first timestamp delta 0."""
    pos, index = 0, 0
    while pos < len(data):
        size, pos = read_varint(data, pos)
        record_end = pos + size
        timestamp_delta, at = read_varlong(data, pos + 1)
        offset_delta = read_varint(data, at)[0]
        if data[pos] != 0 or offset_delta != index or (index == 0 and timestamp_delta != 0):
            return False
        pos, index = record_end, index + 1
    return True


def _check_agree(data, tally):
    view = memoryview(data) if tally["cases"] % 2 else data  # validate passes a memoryview
    walked = _verdict(_walk_records, view)
    fast = _uniform_record_count(view)
    if fast is not None:
        assert fast == walked, f"fast path counted {fast}, the walk says {walked}: {data.hex()}"
        tally["fast"] += 1
    assert _verdict(check_record_structure, view) == walked, data.hex()
    # record_layout (what a rebuild uses) counts the same and knows canonical records.
    expected = walked if walked == "reject" else (walked, _canonical_reference(data))
    assert _verdict(record_layout, view) == expected, data.hex()
    tally["canonical"] += expected != "reject" and expected[1]
    tally["cases"] += 1
    tally["rejected"] += walked == "reject"
    return walked, fast


@pytest.mark.parametrize("seed", range(4))
def test_fast_path_agrees_with_the_walk(seed):
    rng = random.Random(seed)
    tally = {"cases": 0, "fast": 0, "rejected": 0, "canonical": 0}
    donors = []
    mutated_fast = 0
    for n in range(300):
        if n % 5 == 4:
            data, count = _hand_built_batch(rng)
            fits = None
        else:
            data, count, fits = _built_batch(rng)
        donors = (donors + [data])[-8:]
        walked, fast = _check_agree(data, tally)
        assert walked == count
        if fits:
            assert fast == count, "a uniform batch of canonical records missed the fast path"
        starts = _record_starts(data)
        for _ in range(8 if len(data) < 50_000 else 2):
            before = tally["fast"]
            _check_agree(_mutate(rng, data, starts, donors), tally)
            mutated_fast += tally["fast"] - before
    # Not vacuous: plenty of cases on each side of both paths.
    assert tally["cases"] >= 2500
    assert tally["fast"] >= 200 and mutated_fast >= 80
    assert tally["rejected"] >= 1000
    assert tally["canonical"] >= 150
