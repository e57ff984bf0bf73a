"""Kafka's on-disk formats, byte for byte, and read back by Kafka's own DumpLogSegments."""

import os
import struct
import subprocess
import uuid


from kbroker.log import LogConfig, LogManager
from kbroker.log.checkpoint import (read_offset_checkpoint, read_partition_metadata,
                                    uuid_to_base64, write_offset_checkpoint)
from kbroker.protocol.records import iter_batches

from .conftest import NOW, append, kafka_java, make_batch


def test_segment_file_names_and_index_entries(open_log, log_dir):
    log = open_log(LogConfig(index_interval_bytes=100))
    for i in range(4):
        append(log, make_batch(2, ts=NOW + i))
    size = len(make_batch(2))
    assert sorted(os.listdir(log_dir)) == ["00000000000000000000.index",
                                           "00000000000000000000.log",
                                           "00000000000000000000.timeindex",
                                           "leader-epoch-checkpoint"]
    with open(os.path.join(log_dir, "00000000000000000000.index"), "rb") as f:
        index = f.read()
    with open(os.path.join(log_dir, "00000000000000000000.timeindex"), "rb") as f:
        time_index = f.read()
    # The first batch is never indexed; after that every batch (each > 100 bytes) is: the
    # entry names the batch's last offset (relative) and its start position.
    assert index == b"".join(struct.pack(">ii", 2 * i + 1, size * i) for i in (1, 2, 3))
    assert time_index == b"".join(struct.pack(">qi", NOW + i, 2 * i + 1) for i in (1, 2, 3))
    with open(os.path.join(log_dir, "00000000000000000000.log"), "rb") as f:
        data = f.read()
    assert [h.base_offset for h in iter_batches(data)] == [0, 2, 4, 6]


def test_relative_offsets_in_later_segment(open_log, log_dir):
    log = open_log(LogConfig(index_interval_bytes=1))
    append(log, make_batch(5))
    log.roll(NOW)
    append(log, make_batch(2))
    append(log, make_batch(3))
    with open(os.path.join(log_dir, "00000000000000000005.index"), "rb") as f:
        assert f.read() == struct.pack(">ii", 4, len(make_batch(2)))


def test_offset_checkpoint_format(tmp_path):
    path = str(tmp_path / "recovery-point-offset-checkpoint")
    write_offset_checkpoint(path, {("a-b", 0): 5, ("c", 12): 0})
    with open(path) as f:
        assert f.read() == "0\n2\na-b 0 5\nc 12 0\n"
    assert read_offset_checkpoint(path) == {("a-b", 0): 5, ("c", 12): 0}
    assert not os.path.exists(path + ".tmp")


def test_log_manager_files(tmp_path):
    topic_id = uuid.uuid4()
    manager = LogManager([str(tmp_path / "d1")], node_id=3, cluster_id="clusterX")
    manager.open(now_ms=NOW)
    log = manager.create("orders", 2, LogConfig(), topic_id)
    append(log, make_batch(3))
    manager.close()
    root = tmp_path / "d1"
    names = sorted(os.listdir(root))
    assert names == [".kafka_cleanshutdown", ".lock", "log-start-offset-checkpoint",
                     "meta.properties", "orders-2", "recovery-point-offset-checkpoint",
                     "replication-offset-checkpoint"]
    props = dict(line.split("=", 1) for line in (root / "meta.properties").read_text().splitlines()
                 if "=" in line)
    assert props["version"] == "1" and props["node.id"] == "3"
    assert props["cluster.id"] == "clusterX" and len(props["directory.id"]) == 22
    assert (root / "recovery-point-offset-checkpoint").read_text() == "0\n1\norders 2 3\n"
    assert (root / "log-start-offset-checkpoint").read_text() == "0\n1\norders 2 0\n"
    assert (root / "replication-offset-checkpoint").read_text() == "0\n1\norders 2 3\n"
    metadata = (root / "orders-2" / "partition.metadata").read_text()
    assert metadata == f"version: 0\ntopic_id: {uuid_to_base64(topic_id)}"
    assert read_partition_metadata(str(root / "orders-2")) == topic_id
    assert (root / "orders-2" / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"
    assert (root / "orders-2" / "00000000000000000003.snapshot").exists()


def test_kafka_dump_log_segments_reads_our_files(open_log, log_dir):
    log = open_log(LogConfig(segment_bytes=1500, index_interval_bytes=200))
    for i in range(30):
        append(log, make_batch(3, ts=NOW + i, producer_id=11, producer_epoch=0,
                               base_sequence=3 * i))
    log.close()
    names = sorted(n for n in os.listdir(log_dir) if n.endswith((".log", ".index", ".timeindex",
                                                                 ".snapshot")))
    out = subprocess.run([*kafka_java("org.apache.kafka.tools.DumpLogSegments"),
                          "--index-sanity-check",
                          "--files", ",".join(os.path.join(log_dir, n) for n in names)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "isvalid: true" in out.stdout and "isvalid: false" not in out.stdout
    assert "Mismatches" not in out.stdout and "mismatch" not in out.stdout.lower()
    assert "failed" not in out.stdout.lower() and "Exception" not in out.stderr
    for name in names:
        if name.endswith((".index", ".timeindex")):
            assert f"{name} passed sanity check" in out.stdout
    out = subprocess.run([*kafka_java("org.apache.kafka.tools.DumpLogSegments"),
                          "--files", ",".join(os.path.join(log_dir, n) for n in names)],
                         capture_output=True, text=True, timeout=120)
    assert out.stdout.count("baseOffset:") == 30
    assert "producerId: 11 producerEpoch: 0" in out.stdout
    assert "lastSequence: 89 lastOffset: 89" in out.stdout
