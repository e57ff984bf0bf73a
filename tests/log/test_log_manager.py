import os
import uuid

import pytest

from kbroker.log import LogConfig, LogManager

from .conftest import NOW, append, make_batch, read_all


def manager_for(tmp_path, dirs=("d1",), node_id=1, cluster_id="c1"):
    manager = LogManager([str(tmp_path / d) for d in dirs], node_id, cluster_id)
    manager.open(now_ms=NOW)
    return manager


def test_create_spreads_over_dirs_and_reopens(tmp_path):
    manager = manager_for(tmp_path, ("d1", "d2"))
    logs = [manager.create("t", p, LogConfig(), uuid.uuid4()) for p in range(4)]
    dirs = [manager.log_dir_of("t", p) for p in range(4)]
    assert dirs.count(str(tmp_path / "d1")) == dirs.count(str(tmp_path / "d2")) == 2
    for i, log in enumerate(logs):
        for _ in range(i + 1):
            append(log, make_batch(2))
    assert manager.create("t", 0) is logs[0]
    data = read_all(logs[3])
    manager.close()

    manager = manager_for(tmp_path, ("d1", "d2"))
    assert sorted((l.topic, l.partition) for l in manager.all_logs()) == [("t", p)
                                                                           for p in range(4)]
    assert [manager.get("t", p).log_end_offset for p in range(4)] == [2, 4, 6, 8]
    assert read_all(manager.get("t", 3)) == data
    assert manager.get("t", 0).topic_id is not None
    assert manager.get("x", 0) is None
    # The clean-shutdown marker is consumed at start.
    assert manager.had_clean_shutdown[str(tmp_path / "d1")]
    assert not os.path.exists(tmp_path / "d1" / ".kafka_cleanshutdown")
    manager.close()


def test_unclean_shutdown_recovers_from_recovery_point(tmp_path):
    manager = manager_for(tmp_path)
    log = manager.create("t", 0, LogConfig(segment_bytes=500))
    for _ in range(10):
        append(log, make_batch(2))
    log.flush()
    manager.checkpoint()
    path = log.active_segment.log_path
    end = log.log_end_offset
    append(log, make_batch(2))
    log.flush()
    # Crash: no close, no marker; the tail batch is torn.
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 5)
    manager._unlock()   # the crashed process's lock goes with it
    manager = manager_for(tmp_path)
    assert not manager.had_clean_shutdown[str(tmp_path / "d1")]
    log = manager.get("t", 0)
    assert log.log_end_offset == end
    assert log.recovery_point == end
    manager.close()


def test_log_start_offset_is_checkpointed(tmp_path):
    manager = manager_for(tmp_path)
    log = manager.create("t", 0, LogConfig(segment_bytes=300))
    for _ in range(6):
        append(log, make_batch(1))
    log.delete_records_before(4)
    manager.close()
    manager = manager_for(tmp_path)
    assert manager.get("t", 0).log_start_offset == 4
    assert manager.checkpointed_high_watermarks[("t", 0)] == 6
    manager.close()


def test_delete_and_leftover_delete_dirs(tmp_path):
    manager = manager_for(tmp_path)
    append(manager.create("t", 0), make_batch(1))
    assert manager.delete("t", 0)
    assert not manager.delete("t", 0)
    assert manager.get("t", 0) is None
    assert not os.path.exists(tmp_path / "d1" / "t-0")
    os.makedirs(tmp_path / "d1" / "t-1.0123abcd-delete")
    os.makedirs(tmp_path / "d1" / "not_a_partition")
    manager.close()
    manager = manager_for(tmp_path)
    assert not os.path.exists(tmp_path / "d1" / "t-1.0123abcd-delete")
    assert manager.all_logs() == []
    manager.close()


def test_meta_properties_mismatch_and_lock(tmp_path):
    manager = manager_for(tmp_path)
    with pytest.raises(RuntimeError, match="in use"):
        manager_for(tmp_path)
    manager.close()
    with pytest.raises(RuntimeError, match="cluster.id"):
        manager_for(tmp_path, cluster_id="other")
    with pytest.raises(RuntimeError, match="node.id"):
        LogManager([str(tmp_path / "d2"), str(tmp_path / "d1")], 2, "c1").open()


def test_cleanup_applies_retention(tmp_path):
    manager = manager_for(tmp_path)
    log = manager.create("t", 0, LogConfig(segment_bytes=200, retention_ms=1000))
    for i in range(4):
        append(log, make_batch(1, ts=NOW + i))
    assert manager.cleanup(NOW + 10_000) == 4
    assert log.log_start_offset == log.log_end_offset == 4
    manager.close()


def test_partition_counts_follow_loads_deletes_and_creates(tmp_path):
    manager = manager_for(tmp_path, ("d1", "d2"))
    for p in range(4):
        manager.create("t", p, LogConfig(), uuid.uuid4())
    manager.close()
    manager = manager_for(tmp_path, ("d1", "d2"))
    # Both partitions of d1 go: the next two creations must both land in d1.
    for p in range(4):
        if manager.log_dir_of("t", p) == str(tmp_path / "d1"):
            manager.delete("t", p)
    manager.create("u", 0)
    manager.create("u", 1)
    assert {manager.log_dir_of("u", p) for p in range(2)} == {str(tmp_path / "d1")}
    manager.close()


def test_topic_id_survives_restart_and_empty_metadata_keeps_partition_online(tmp_path):
    topic_id = uuid.uuid4()
    manager = manager_for(tmp_path)
    manager.create("t", 0, LogConfig(), topic_id)
    manager.create("t", 1, LogConfig(), topic_id)
    manager.sync_created()
    assert manager._unsynced == {}
    manager.close()
    # What a power loss can leave of a file written without fsync: an empty one.
    (tmp_path / "d1" / "t-1" / "partition.metadata").write_bytes(b"")
    manager = manager_for(tmp_path)
    assert manager.get("t", 0).topic_id == topic_id
    assert manager.get("t", 1).topic_id is None
    assert manager.offline == {}
    manager.close()
