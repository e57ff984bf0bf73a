"""preallocate=true (log.preallocate): a new segment's .log file starts at segment.bytes, as
Kafka's FileRecords makes it; rolling or closing cuts it back to its data, and recovery after a
crash truncates the zeros, so Kafka's DumpLogSegments reads the files either way."""

import os
import subprocess

from kbroker.log import LogConfig

from .conftest import NOW, append, kafka_java, make_batch, read_all

SEGMENT = 64 * 1024
CONFIG = LogConfig(preallocate=True, segment_bytes=SEGMENT)


def log_size(log_dir, base=0):
    return os.path.getsize(os.path.join(log_dir, f"{base:020d}.log"))


def test_segments_start_at_segment_bytes_and_are_trimmed_when_rolled(open_log, log_dir):
    log = open_log(CONFIG)
    assert log_size(log_dir) == SEGMENT
    batches = [make_batch(5, ts=NOW + i, value=b"v" * 1000) for i in range(20)]
    for batch in batches[:10]:
        append(log, batch)
    assert log_size(log_dir) == SEGMENT and log.size_in_bytes == sum(map(len, batches[:10]))
    assert read_all(log).count(b"v" * 1000) == 50    # reads stop at the data, not the zeros
    for batch in batches[10:]:
        append(log, batch)                      # past 64 KiB: a roll
    assert len(log.segments) == 2
    assert log_size(log_dir) == log.segments[0].size  # the rolled one is cut back
    assert log_size(log_dir, log.segments[1].base_offset) == SEGMENT
    log.close()
    assert log_size(log_dir, log.segments[1].base_offset) == log.segments[1].size
    reopened = open_log(CONFIG, clean_shutdown=True)
    assert reopened.log_end_offset == 100
    assert sum(read_all(reopened, offset=s.base_offset).count(b"v" * 1000)
               for s in reopened.segments) == 100


def test_a_crash_leaves_zeros_that_recovery_truncates(open_log, log_dir):
    log = open_log(CONFIG)
    for i in range(3):
        append(log, make_batch(4, ts=NOW + i))
    log.flush()
    data = read_all(log)
    assert log_size(log_dir) == SEGMENT          # never closed: the zeros stay on disk
    recovered = open_log(CONFIG)                 # no clean-shutdown marker: recovery
    assert recovered.log_end_offset == 12 and read_all(recovered) == data
    assert log_size(log_dir) == len(data)
    append(recovered, make_batch(2, ts=NOW + 9))
    assert recovered.log_end_offset == 14


def test_off_by_default_and_dump_log_segments_reads_a_preallocated_log(open_log, log_dir,
                                                                       tmp_path):
    from kbroker.log import PartitionLog

    plain = PartitionLog.open(str(tmp_path / "plain-0"), "plain", 0, LogConfig(), now_ms=NOW)
    assert os.path.getsize(tmp_path / "plain-0" / f"{0:020d}.log") == 0
    plain.close()
    log = open_log(CONFIG)
    for i in range(3):
        append(log, make_batch(4, ts=NOW + i))
    log.close()
    out = subprocess.run([*kafka_java("org.apache.kafka.tools.DumpLogSegments"),
                          "--files", os.path.join(log_dir, f"{0:020d}.log")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.count("baseOffset:") == 3, out.stdout + out.stderr
