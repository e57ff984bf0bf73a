import os

import pytest

from kbroker.log import LogConfig
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.protocol.records import BatchHeader, iter_batches

from .conftest import NOW, append, make_batch, read_all


def headers(data):
    return [(h.base_offset, h.last_offset, h.partition_leader_epoch) for h in iter_batches(data)]


def test_append_assigns_offsets_and_reads_back(open_log):
    log = open_log()
    r1 = append(log, make_batch(3), epoch=5)
    r2 = append(log, make_batch(2), epoch=5)
    assert (r1.first_offset, r1.last_offset, r1.duplicate) == (0, 2, False)
    assert (r2.first_offset, r2.last_offset) == (3, 4)
    assert r1.log_append_time == -1
    assert log.log_end_offset == 5
    data = read_all(log)
    assert headers(data) == [(0, 2, 5), (3, 4, 5)]
    assert all(h.is_valid_crc() for h in iter_batches(data))
    # A fetch from the middle of a batch returns that whole batch.
    assert headers(read_all(log, offset=1)) == [(0, 2, 5), (3, 4, 5)]
    assert headers(read_all(log, offset=3)) == [(3, 4, 5)]
    assert read_all(log, offset=5) == b""


def test_read_bounds(open_log):
    log = open_log()
    for _ in range(10):
        append(log, make_batch(2))
    size = len(make_batch(2))
    # max_bytes cuts at whole batches; at least one batch with min_one_message.
    assert len(read_all(log, max_bytes=size * 3 + 10)) == size * 3
    assert len(read_all(log, max_bytes=1)) == size
    assert log.read(0, 1, None, min_one_message=False).regions == []
    # Never past the bound (high watermark), never a batch that straddles it.
    assert headers(read_all(log, bound=6))[-1][:2] == (4, 5)
    assert headers(read_all(log, bound=5))[-1][:2] == (2, 3)
    assert read_all(log, offset=6, bound=6) == b""
    result = log.read(0, 1 << 20, 4)
    assert result.size == sum(len(r) for r in result.regions) == 2 * size
    with pytest.raises(KafkaError) as e:
        log.read(21, 100)
    assert e.value.error == Errors.OFFSET_OUT_OF_RANGE
    assert log.read(20, 100).regions == []


def test_multiple_segments_and_index_lookups(open_log):
    config = LogConfig(segment_bytes=2000, index_interval_bytes=300)
    log = open_log(config)
    size = len(make_batch(3))
    for _ in range(60):
        append(log, make_batch(3))
    assert len(log.segments) > 3
    assert all(s.size <= 2000 for s in log.segments)
    bases = [s.base_offset for s in log.segments]
    assert bases == sorted(bases) and bases[0] == 0
    assert all(len(s.index) > 0 for s in log.segments[:-1])
    # Every offset is found through the index + a short header scan, one segment per read.
    for offset in range(0, 180, 7):
        data = read_all(log, offset=offset, max_bytes=size)
        (h,) = list(iter_batches(data))
        assert h.base_offset <= offset <= h.last_offset
    # A read does not span segments.
    segment = log.segments[1]
    data = read_all(log, offset=segment.base_offset)
    assert len(data) == segment.size
    # Index entries point at batches whose last offset they name (what DumpLogSegments checks).
    for seg in log.segments:
        for i in range(len(seg.index)):
            offset, position = seg.index.entry(i)
            assert BatchHeader(os.pread(seg.file.fileno(), 61, position)).last_offset == offset


def test_roll_by_size_rolls_before_the_append_that_overflows(open_log):
    size = len(make_batch(3))
    log = open_log(LogConfig(segment_bytes=size * 2 + 10))
    append(log, make_batch(3))
    append(log, make_batch(3))
    assert len(log.segments) == 1
    append(log, make_batch(3))
    assert [s.base_offset for s in log.segments] == [0, 6]
    assert log.segments[0].size == 2 * size


def test_roll_by_time_uses_record_timestamps(open_log):
    log = open_log(LogConfig(segment_ms=1000))
    append(log, make_batch(1, ts=NOW))
    append(log, make_batch(1, ts=NOW + 1000))
    assert len(log.segments) == 1
    append(log, make_batch(1, ts=NOW + 1001))
    assert [s.base_offset for s in log.segments] == [0, 2]
    # The rolled segment's time index ends with its max timestamp.
    assert log.segments[0].time_index.last_entry() == (NOW + 1000, 1)


def test_roll_when_index_is_full(open_log):
    log = open_log(LogConfig(index_interval_bytes=1, segment_index_bytes=24))
    for _ in range(8):
        append(log, make_batch(1))
    assert len(log.segments) > 1
    assert all(len(s.index) <= 3 for s in log.segments)


def test_restart_keeps_offsets_and_start_offset(open_log, log_dir):
    config = LogConfig(segment_bytes=1000)
    log = open_log(config)
    for _ in range(20):
        append(log, make_batch(2))
    log.delete_records_before(7)
    before = read_all(log, offset=7)
    log.close()
    reopened = open_log(config, log_start_offset=7, clean_shutdown=True)
    assert reopened.log_end_offset == 40
    assert reopened.log_start_offset == 7
    assert reopened.high_watermark == 40
    assert read_all(reopened, offset=7) == before
    r = append(reopened, make_batch(1))
    assert r.first_offset == 40


def test_retention_by_time(open_log):
    config = LogConfig(segment_bytes=300, retention_ms=10_000)
    log = open_log(config)
    for i in range(12):
        append(log, make_batch(1, ts=NOW + i * 1000), now=NOW + i * 1000)
    n = len(log.segments)
    assert n > 3
    # Segments whose largest timestamp is older than retention.ms go, whole and in order.
    deleted = log.delete_old_segments(NOW + 15_500)
    assert deleted > 0
    assert log.log_start_offset == log.segments[0].base_offset > 0
    assert all(NOW + 15_500 - s.largest_timestamp <= 10_000 for s in log.segments[:-1])
    with pytest.raises(KafkaError):
        log.read(0, 100)
    # Everything expired: the active segment is rolled and deleted too; offsets continue.
    log.delete_old_segments(NOW + 100_000)
    assert log.log_start_offset == log.log_end_offset == 12
    assert len(log.segments) == 1 and log.segments[0].size == 0
    assert append(log, make_batch(1)).first_offset == 12


def test_retention_by_size(open_log):
    size = len(make_batch(1))
    config = LogConfig(segment_bytes=size * 2, retention_bytes=size * 5, retention_ms=-1)
    log = open_log(config)
    for _ in range(10):
        append(log, make_batch(1))
    assert log.size_in_bytes == 10 * size
    assert log.delete_old_segments(NOW) == 2
    # Whole segments only, while what remains stays at or above retention.bytes (Kafka's rule).
    assert log.size_in_bytes == 6 * size
    assert log.size_in_bytes - log.segments[0].size < 5 * size
    assert log.log_start_offset == 4


def test_retention_only_with_delete_policy_and_below_high_watermark(open_log):
    config = LogConfig(segment_bytes=200, retention_ms=0, cleanup_policy=["compact"])
    log = open_log(config)
    for _ in range(5):
        append(log, make_batch(1))
    assert log.delete_old_segments(NOW + 10**9) == 0
    log.config = LogConfig(segment_bytes=200, retention_ms=0)
    log.high_watermark = 2
    log.delete_old_segments(NOW + 10**9)
    assert log.log_start_offset == 2


def test_delete_records(open_log, log_dir):
    log = open_log(LogConfig(segment_bytes=500))
    for _ in range(10):
        append(log, make_batch(2))
    segments_before = len(log.segments)
    assert log.delete_records_before(9) == 9
    assert log.log_start_offset == 9
    assert len(log.segments) < segments_before
    assert log.segments[0].base_offset <= 9
    with pytest.raises(KafkaError) as e:
        log.read(8, 100)
    assert e.value.error == Errors.OFFSET_OUT_OF_RANGE
    assert headers(read_all(log, offset=9))[0][0] <= 9
    assert log.delete_records_before(3) == 9       # never moves back
    log.high_watermark = 15
    with pytest.raises(KafkaError) as e:
        log.delete_records_before(16)
    assert e.value.error == Errors.OFFSET_OUT_OF_RANGE
    assert log.delete_records_before(-1) == 15     # -1 means the high watermark
    assert log.fetch_offset_by_timestamp(-2)[0] == 15
    assert log.fetch_offset_by_timestamp(-4)[0] == 15


def test_offset_for_timestamp(open_log):
    log = open_log(LogConfig(segment_bytes=700, index_interval_bytes=100))
    # 20 batches of 3 records, timestamps NOW + 10*i + {0, 3, 6}
    for i in range(20):
        append(log, make_batch(3, ts=NOW + 10 * i, ts_step=3))
    assert log.offset_for_timestamp(NOW) == (0, NOW, 0)
    assert log.offset_for_timestamp(NOW - 5) == (0, NOW, 0)
    assert log.offset_for_timestamp(NOW + 4) == (2, NOW + 6, 0)
    assert log.offset_for_timestamp(NOW + 7) == (3, NOW + 10, 0)
    assert log.offset_for_timestamp(NOW + 123) == (37, NOW + 123, 0)
    assert log.offset_for_timestamp(NOW + 124) == (38, NOW + 126, 0)
    assert log.offset_for_timestamp(NOW + 197) is None
    assert log.fetch_offset_by_timestamp(-3) == (59, NOW + 196, 0)
    assert log.fetch_offset_by_timestamp(-1) == (60, -1, 0)
    assert log.fetch_offset_by_timestamp(-2) == (0, -1, 0)
    log.delete_records_before(37)
    assert log.offset_for_timestamp(NOW + 100) == (37, NOW + 123, 0)


def test_log_append_time(open_log):
    log = open_log(LogConfig(message_timestamp_type="LogAppendTime"))
    r = append(log, make_batch(2, ts=5), now=NOW + 42)
    assert r.log_append_time == NOW + 42
    (h,) = iter_batches(read_all(log))
    assert h.timestamp_type == 1 and h.max_timestamp == NOW + 42 and h.is_valid_crc()
    assert log.offset_for_timestamp(NOW) == (0, NOW + 42, 0)


def test_leader_epochs(open_log, log_dir):
    log = open_log()
    append(log, make_batch(2), epoch=0)
    append(log, make_batch(2), epoch=3)
    append(log, make_batch(2), epoch=3)
    append(log, make_batch(2), epoch=7)
    cache = log.leader_epoch_cache
    assert cache.entries() == [(0, 0), (3, 2), (7, 6)]
    assert cache.end_offset_for(0, log.log_end_offset) == (0, 2)
    assert cache.end_offset_for(3, log.log_end_offset) == (3, 6)
    assert cache.end_offset_for(5, log.log_end_offset) == (3, 6)
    assert cache.end_offset_for(7, log.log_end_offset) == (7, 8)
    assert cache.end_offset_for(9, log.log_end_offset) == (-1, -1)
    with open(os.path.join(log_dir, "leader-epoch-checkpoint")) as f:
        assert f.read() == "0\n3\n0 0\n3 2\n7 6\n"
    log.truncate_to(4)
    assert cache.entries() == [(0, 0), (3, 2)]
    assert log.log_end_offset == 4
    # An epoch begun at the log end without data (a leadership lost before any append) goes
    # with a truncation to the end, which cuts no batch (Kafka's truncateTo).
    cache.assign(9, 4)
    log.truncate_to(4)
    assert cache.entries() == [(0, 0), (3, 2)] and log.log_end_offset == 4
    with open(os.path.join(log_dir, "leader-epoch-checkpoint")) as f:
        assert f.read() == "0\n2\n0 0\n3 2\n"


def test_truncate_to(open_log):
    log = open_log(LogConfig(segment_bytes=500, index_interval_bytes=50))
    for _ in range(12):
        append(log, make_batch(2))
    log.truncate_to(10)
    assert log.log_end_offset == 10 and log.high_watermark == 10
    assert headers(read_all(log, offset=8))[-1][:2] == (8, 9)
    assert append(log, make_batch(2)).first_offset == 10
    log.truncate_to(0)
    assert log.log_end_offset == 0 and len(log.segments) == 1
    assert append(log, make_batch(1)).first_offset == 0


def test_flush_policy(open_log):
    log = open_log(LogConfig(flush_messages=5))
    append(log, make_batch(3))
    assert not log.flush_if_needed(NOW)
    assert log.recovery_point == 0
    append(log, make_batch(3))
    assert log.flush_if_needed(NOW)
    assert log.recovery_point == 6
    log.config = LogConfig(flush_ms=1000)
    append(log, make_batch(1))
    assert not log.flush_if_needed(NOW + 500)
    assert log.flush_if_needed(NOW + 1000)
    assert log.recovery_point == 7


def test_region_survives_segment_deletion(open_log):
    log = open_log(LogConfig(segment_bytes=300, retention_ms=0))
    append(log, make_batch(2))
    append(log, make_batch(2))
    result = log.read(0, 1 << 20)
    expected = result.regions[0].read()
    log.delete_old_segments(NOW + 10**9)
    assert log.log_start_offset == 4
    assert not os.path.exists(result.regions[0].file.name)
    assert result.regions[0].read() == expected
    assert len(result.regions[0]) == len(expected)


def test_delete_removes_the_directory(open_log, log_dir):
    log = open_log()
    append(log, make_batch(1))
    region = log.read(0, 100).regions[0]
    log.delete()
    assert not os.path.exists(log_dir)
    assert os.listdir(os.path.dirname(log_dir)) == []
    assert len(region.read()) == len(region)
