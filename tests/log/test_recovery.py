import os

from kbroker.log import LogConfig
from kbroker.protocol.records import iter_batches

from .conftest import append, files, make_batch, read_all

CONFIG = LogConfig(segment_bytes=1500, index_interval_bytes=200)


def fill(log, batches=20, **kwargs):
    for _ in range(batches):
        append(log, make_batch(3, **kwargs))


def index_bytes(segment):
    with open(segment.index.path, "rb") as f:
        index = f.read()
    with open(segment.time_index.path, "rb") as f:
        return index, f.read()


def test_torn_tail_is_truncated_and_indexes_rebuilt(open_log, log_dir):
    log = open_log(CONFIG)
    fill(log)
    active = log.segments[-1]
    expected_indexes = index_bytes(active)
    good_end = log.log_end_offset
    good_size = active.size
    data_before = read_all(log, offset=active.base_offset)
    log.flush()
    path = active.log_path
    log.close()
    # A crash in the middle of writing a batch: half a batch at the end.
    with open(path, "ab") as f:
        f.write(make_batch(3)[:100])
    os.unlink(active.index.path)   # and a lost index
    log = open_log(CONFIG, recovery_point=0)
    assert log.log_end_offset == good_end
    assert log.segments[-1].size == good_size == os.path.getsize(path)
    assert read_all(log, offset=log.segments[-1].base_offset) == data_before
    assert index_bytes(log.segments[-1])[0] == expected_indexes[0]
    assert append(log, make_batch(1)).first_offset == good_end


def test_corrupt_crc_in_tail_truncates_from_there(open_log, log_dir):
    log = open_log(CONFIG)
    fill(log)
    segment = log.segments[-2]
    positions = [pos for pos, _ in segment.batches()]
    bad_position = positions[len(positions) // 2]
    bad_offset = next(h.base_offset for pos, h in segment.batches() if pos == bad_position)
    earlier = read_all(log, offset=0)
    log.close()
    with open(segment.log_path, "r+b") as f:
        f.seek(bad_position + 70)   # a byte inside the records, covered by the CRC
        byte = f.read(1)
        f.seek(bad_position + 70)
        f.write(bytes([byte[0] ^ 0xFF]))
    # Unclean shutdown: the recovery point lies before the damaged segment.
    log = open_log(CONFIG, recovery_point=segment.base_offset)
    assert log.log_end_offset == bad_offset
    assert log.segments[-1].base_offset == segment.base_offset   # later segments are gone
    assert os.path.getsize(segment.log_path) == bad_position
    assert read_all(log, offset=0) == earlier[:len(read_all(log, offset=0))]
    for seg in log.segments:
        assert all(h.is_valid_crc() for _, h in seg.batches(full=True))
    # Offsets continue from the truncation point.
    assert append(log, make_batch(1)).first_offset == bad_offset


def test_clean_shutdown_skips_recovery_but_checks_indexes(open_log, log_dir):
    log = open_log(CONFIG)
    fill(log)
    first = log.segments[0]
    expected = index_bytes(first)
    log.close()
    with open(first.index.path, "r+b") as f:   # entries out of order: fails the sanity check
        f.write(b"\x7f\xff\xff\xff\x00\x00\x00\x01")
    log = open_log(CONFIG, clean_shutdown=True)
    assert index_bytes(log.segments[0]) == expected
    assert log.log_end_offset == 60


def test_zero_filled_index_tail_is_dropped(open_log, log_dir):
    log = open_log(CONFIG)
    fill(log)
    first = log.segments[0]
    expected = index_bytes(first)
    log.close()
    with open(first.index.path, "ab") as f:   # a preallocated Kafka index after a crash
        f.write(bytes(8 * 100))
    with open(first.time_index.path, "ab") as f:
        f.write(bytes(12 * 100))
    log = open_log(CONFIG, clean_shutdown=True)
    assert index_bytes(log.segments[0]) == expected


def test_recovery_of_garbage_only_segment(open_log, log_dir):
    log = open_log(CONFIG)
    append(log, make_batch(2))
    path = log.segments[0].log_path
    log.close()
    with open(path, "wb") as f:
        f.write(b"\x00" * 30)
    log = open_log(CONFIG)
    assert log.log_end_offset == 0 and log.segments[0].size == 0
    assert append(log, make_batch(2)).first_offset == 0


def test_recovery_rebuilds_leader_epochs_when_checkpoint_is_lost(open_log, log_dir):
    log = open_log(CONFIG)
    append(log, make_batch(2), epoch=1)
    append(log, make_batch(2), epoch=4)
    log.close()
    os.unlink(os.path.join(log_dir, "leader-epoch-checkpoint"))
    log = open_log(CONFIG)
    assert log.leader_epoch_cache.entries() == [(1, 0), (4, 2)]


def test_stray_files_are_cleaned(open_log, log_dir):
    log = open_log(CONFIG)
    append(log, make_batch(2))
    log.close()
    for name in ("00000000000000000099.index", "00000000000000000000.log.tmp", "x.deleted"):
        open(os.path.join(log_dir, name), "wb").close()
    log = open_log(CONFIG, clean_shutdown=True)
    assert "00000000000000000099.index" not in files(log_dir)
    assert not any(n.endswith((".tmp", ".deleted")) for n in files(log_dir))
    assert list(iter_batches(read_all(log)))[0].record_count == 2
