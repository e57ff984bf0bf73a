"""Moving a replica between log dirs (AlterReplicaLogDirs, issue 36 part 5), without sockets: the
replica manager's answers, the copy while the partition takes writes, the swap, cancelling, a
deletion during a move, reconciling the copy with a truncated or trimmed current log, and every
crash point of a move (a future log beside the current one, a swap interrupted after the old
copy went, two future logs). Kafka's own tools drive it end to end in
tests/integration/test_log_dir_moves_reference.py."""

from __future__ import annotations

import asyncio
import os
import time
import uuid

import pytest

from kbroker.config import BrokerConfig
from kbroker.log import LogConfig, PartitionLog
from kbroker.log.log_manager import LogManager
from kbroker.metadata.image import MetadataImage, PartitionState, TopicMetadata
from kbroker.protocol.errors import Errors
from kbroker.protocol.records import iter_batches
from kbroker.replica.log_dir_mover import reconcile
from kbroker.replica.replica_manager import ReplicaManager
from kbroker.startup import StartupError
from tests.log.conftest import NOW, make_batch
from tests.replica.test_replica_manager_states import apply

CONFIG = LogConfig(segment_bytes=4096)


def open_replicas(tmp_path, cluster=False, **settings):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    log_manager = LogManager(dirs, 1, "c")
    log_manager.open(config_for=lambda name: CONFIG)
    replicas = ReplicaManager(log_manager, lambda topic: CONFIG, node_id=1, cluster=cluster)
    replicas.broker_config = BrokerConfig(settings)
    return replicas, dirs


def crash(replicas) -> None:
    """Stop without closing anything (kill -9): only what reached the files is left."""
    replicas.log_dir_mover.stop_all()
    replicas.log_manager._unlock()


TOPIC = TopicMetadata("t", uuid.uuid4(), [(1,)])
EMPTY = MetadataImage.build("c")
IMAGE = EMPTY.with_topic(TOPIC)


def hosted(tmp_path, **settings):
    replicas, dirs = open_replicas(tmp_path, **settings)
    apply(replicas, EMPTY, IMAGE)
    partition = replicas.get("t", 0)
    source = replicas.log_dir_of("t", 0)
    destination = dirs[1] if source == dirs[0] else dirs[0]
    return replicas, partition, source, destination


def write(partition, batches, producer_id=-1, first_sequence=0):
    """Batches of 5 records, stamped now (an older producer would expire when the log
    is opened again, as in Kafka)."""
    for i in range(batches):
        now = int(time.time() * 1000)
        batch = bytearray(make_batch(count=5, ts=now, producer_id=producer_id, producer_epoch=0 if
                                     producer_id >= 0 else -1,
                                     base_sequence=first_sequence + 5 * i if producer_id >= 0
                                     else -1))
        partition.append(batch, now)


def content(log) -> list[tuple[int, int, bytes]]:
    """Every batch (base offset, epoch, bytes) from the log start on."""
    batches, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        read = log.read(offset, 1 << 30)
        data = b"".join(region.read() for region in read.regions)
        found = [(h.base_offset, h.partition_leader_epoch, bytes(h.view()))
                 for h in iter_batches(data)]
        if not found:
            break
        batches += found
        offset = iter_batches_last_offset(data) + 1
    return batches


def iter_batches_last_offset(data) -> int:
    return [h.last_offset for h in iter_batches(data)][-1]


async def until_moved(replicas, key=("t", 0), timeout=10.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while replicas.log_manager.future_of(*key) is not None:
        assert asyncio.get_running_loop().time() < deadline, "the move did not finish"
        await asyncio.sleep(0.005)


# --- the answers ---------------------------------------------------------------------------------

def test_answers_in_kafkas_order(tmp_path):
    replicas, partition, source, destination = hosted(tmp_path)
    alter = replicas.alter_log_dir
    assert alter("t", 0, "relative/dir") == Errors.LOG_DIR_NOT_FOUND
    assert alter("t", 0, destination + "/") == Errors.LOG_DIR_NOT_FOUND  # exactly as configured
    assert alter("t" * 250, 0, destination) == Errors.INVALID_TOPIC_EXCEPTION
    assert alter("nope", 0, destination) == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert alter("t", 0, source) == Errors.NONE  # already there: nothing to do
    assert replicas.log_manager.future_of("t", 0) is None
    replicas.close()


def test_a_replica_not_hosted_yet_is_created_where_it_was_asked_for(tmp_path):
    """kafka-reassign-partitions.sh asks before the reassignment made the replica: the broker
    answers REPLICA_NOT_AVAILABLE (the tool retries) and creates it in that dir."""
    replicas, dirs = open_replicas(tmp_path, cluster=True)
    elsewhere = TopicMetadata("r", uuid.uuid4(), [(2,), (2,)], {}, [
        PartitionState(2, 0, (2,), 0), PartitionState(2, 0, (2,), 0)])
    image = EMPTY.with_topic(elsewhere)
    apply(replicas, EMPTY, image)
    for index in (0, 1):  # the least loaded dir would take them one each
        assert replicas.alter_log_dir("r", index, dirs[1]) == Errors.REPLICA_NOT_AVAILABLE
    moved = image.with_topic(TopicMetadata("r", elsewhere.topic_id, [(1, 2), (1, 2)], {}, [
        PartitionState(1, 1, (1, 2), 1), PartitionState(1, 1, (1, 2), 1)]))
    apply(replicas, image, moved)
    assert [replicas.log_dir_of("r", i) for i in (0, 1)] == [dirs[1], dirs[1]]
    replicas.close()


# --- the copy and the swap -----------------------------------------------------------------------

def test_a_move_under_writes_keeps_every_batch_and_the_producer_state(tmp_path):
    async def run():
        replicas, partition, source, destination = hosted(
            tmp_path, **{"replica.fetch.max.bytes": 2048})  # many rounds
        write(partition, 200, producer_id=7)
        assert replicas.alter_log_dir("t", 0, destination) == Errors.NONE
        assert replicas.alter_log_dir("t", 0, destination) == Errors.NONE  # idempotent
        future = replicas.log_manager.future_of("t", 0)
        assert future is not None and os.path.dirname(future.dir_path) == destination
        for i in range(50):  # the partition keeps serving while the copy runs
            write(partition, 1, producer_id=7, first_sequence=1000 + 5 * i)
            assert len(content(partition.log)) == 201 + i
            await asyncio.sleep(0)
        before = content(partition.log)
        await until_moved(replicas)
        assert replicas.log_dir_of("t", 0) == destination
        assert content(partition.log) == before  # the same batches at the same offsets
        assert partition.log.dir_path == os.path.join(destination, "t-0")
        assert not [n for n in os.listdir(source) if n.startswith("t-0")]
        assert partition.high_watermark == partition.log_end_offset == 1250
        # The producer state came along: a retried batch is still a duplicate.
        retry = bytearray(make_batch(count=5, ts=int(time.time() * 1000), producer_id=7, producer_epoch=0,
                                     base_sequence=1000 + 5 * 49))
        result, _ = partition.append(retry, int(time.time() * 1000))
        assert result.duplicate
        write(partition, 1, producer_id=7, first_sequence=1250)
        assert replicas.log_dir_mover.completed == 1
        replicas.close()
        # ...and it is there after a restart.
        again, _ = open_replicas(tmp_path)
        assert again.log_manager.log_dir_of("t", 0) == destination
        assert again.log_manager.get("t", 0).log_end_offset == 1255
        again.close()
    asyncio.run(run())


def test_what_batches_cannot_carry_comes_from_the_current_log(tmp_path):
    """A leader's epoch begun at the log end (no append yet) and a producer whose batches
    DeleteRecords removed are on the moved log as they were on the current one."""
    async def run():
        replicas, partition, source, destination = hosted(tmp_path)
        write(partition, 4, producer_id=9)
        write(partition, 4)
        partition.log.delete_records_before(20)  # producer 9's batches are gone
        partition.log.leader_epoch_cache.assign(3, partition.log_end_offset)
        epochs = partition.log.leader_epoch_cache.entries()
        assert replicas.alter_log_dir("t", 0, destination) == Errors.NONE
        await until_moved(replicas)
        assert partition.log.leader_epoch_cache.entries() == epochs
        assert partition.log.producer_state.producers[9].last_seq == 19
        replicas.close()
    asyncio.run(run())


def test_pointing_back_at_the_current_dir_cancels_a_move(tmp_path):
    async def run():
        replicas, partition, source, destination = hosted(
            tmp_path, **{"replica.alter.log.dirs.io.max.bytes.per.second": 0})  # paused
        write(partition, 20)
        assert replicas.alter_log_dir("t", 0, destination) == Errors.NONE
        await asyncio.sleep(0.05)
        assert replicas.log_manager.future_of("t", 0) is not None
        assert [n for n in os.listdir(destination) if n.endswith("-future")]
        assert replicas.alter_log_dir("t", 0, source) == Errors.NONE
        assert replicas.log_manager.future_of("t", 0) is None
        assert not [n for n in os.listdir(destination) if n.startswith("t-0")]
        assert replicas.log_dir_mover.moving() == []
        assert replicas.log_dir_of("t", 0) == source
        replicas.close()
    asyncio.run(run())


def test_deleting_the_topic_during_a_move_leaves_nothing(tmp_path):
    async def run():
        replicas, partition, source, destination = hosted(
            tmp_path, **{"replica.alter.log.dirs.io.max.bytes.per.second": 1000})
        write(partition, 50)
        assert replicas.alter_log_dir("t", 0, destination) == Errors.NONE
        await asyncio.sleep(0.05)
        apply(replicas, IMAGE, EMPTY)
        assert replicas.log_dir_mover.moving() == []
        for log_dir in (source, destination):
            assert not [n for n in os.listdir(log_dir) if n.startswith("t-0")]
        replicas.close()
    asyncio.run(run())


def test_the_byte_rate_paces_the_copy(tmp_path):
    async def run():
        replicas, partition, source, destination = hosted(
            tmp_path, **{"replica.alter.log.dirs.io.max.bytes.per.second": 20_000,
                         "replica.fetch.max.bytes": 1024})
        write(partition, 60)  # ~ 9 KB
        size = partition.size_in_bytes
        started = asyncio.get_running_loop().time()
        assert replicas.alter_log_dir("t", 0, destination) == Errors.NONE
        await until_moved(replicas)
        assert asyncio.get_running_loop().time() - started >= 0.8 * (size - 1024) / 20_000
        replicas.close()
    asyncio.run(run())


# --- reconciling with the current log --------------------------------------------------------------

def _log(path, name="t-0"):
    return PartitionLog.open(str(path / name), "t", 0, CONFIG, now_ms=NOW, clean_shutdown=True)


def copy_all(current, future):
    while future.log_end_offset < current.log_end_offset:
        reconcile(current, future)
        read = current.read(future.log_end_offset, 1 << 20)
        future.append_as_follower(b"".join(r.read() for r in read.regions))
    reconcile(current, future)


def test_a_truncated_current_log_cuts_the_copy_at_the_divergence(tmp_path):
    current, future = _log(tmp_path / "a"), _log(tmp_path / "b")
    for _ in range(10):
        current.append_as_leader(bytearray(make_batch()), 0, NOW)
    copy_all(current, future)
    assert future.log_end_offset == 30
    # A new leader's epoch 1 starts at 15: the follower's current log drops 15-29 and takes the
    # leader's batches, four of them (the copy still holds epoch 0's up to 30).
    current.truncate_to(15)
    for _ in range(4):
        current.append_as_leader(bytearray(make_batch()), 1, NOW)
    assert current.log_end_offset == 27
    reconcile(current, future)
    assert future.log_end_offset == 15
    copy_all(current, future)
    current.high_watermark = future.high_watermark = current.log_end_offset
    assert content(future) == content(current)
    assert future.leader_epoch_cache.entries() == current.leader_epoch_cache.entries()


def test_retention_on_the_current_log_moves_the_copys_start(tmp_path):
    current, future = _log(tmp_path / "a"), _log(tmp_path / "b")
    for _ in range(200):
        current.append_as_leader(bytearray(make_batch()), 0, NOW)
    current.high_watermark = current.log_end_offset
    read = current.read(0, 600)
    future.append_as_follower(b"".join(r.read() for r in read.regions))
    # DeleteRecords past what the copy holds: it starts again at the new log start.
    current.delete_records_before(450)
    reconcile(current, future)
    assert (future.log_start_offset, future.log_end_offset) == (450, 450)
    copy_all(current, future)
    # A start inside what the copy holds: the copy drops the same prefix.
    current.delete_records_before(510)
    reconcile(current, future)
    assert future.log_start_offset == current.log_start_offset == 510
    assert content(future) == content(current)


# --- crashes -------------------------------------------------------------------------------------

def test_a_crash_mid_copy_resumes_the_move_at_the_next_start(tmp_path):
    async def first_run():
        replicas, partition, source, destination = hosted(
            tmp_path, **{"replica.alter.log.dirs.io.max.bytes.per.second": 5000,
                         "replica.fetch.max.bytes": 1024})
        write(partition, 100)
        assert replicas.alter_log_dir("t", 0, destination) == Errors.NONE
        await asyncio.sleep(0.3)
        future = replicas.log_manager.future_of("t", 0)
        assert 0 < future.log_end_offset < partition.log_end_offset
        future.flush()
        crash(replicas)
        return source, destination, content(partition.log)

    async def second_run(source, destination, before):
        replicas, _ = open_replicas(tmp_path)
        assert replicas.log_manager.log_dir_of("t", 0) == source
        assert replicas.log_manager.future_dir_of("t", 0) == destination
        apply(replicas, EMPTY, IMAGE)
        await until_moved(replicas)
        assert replicas.log_dir_of("t", 0) == destination
        assert content(replicas.get("t", 0).log) == before
        replicas.close()

    asyncio.run(second_run(*asyncio.run(first_run())))


def test_a_swap_interrupted_after_the_old_copy_went_promotes_the_new_one(tmp_path):
    async def first_run():
        replicas, partition, source, destination = hosted(tmp_path)
        write(partition, 40)
        before = content(partition.log)
        log_manager = replicas.log_manager
        future = log_manager.create_future("t", 0, destination)
        copy_all(partition.log, future)
        future.flush()
        partition.log.delete()  # step 2 of the swap; the rename of step 3 never happens
        crash(replicas)
        assert [n for n in os.listdir(destination) if n.endswith("-future")]
        return destination, before

    destination, before = asyncio.run(first_run())
    again, _ = open_replicas(tmp_path)
    assert again.log_manager.log_dir_of("t", 0) == destination
    assert again.log_manager.future_of("t", 0) is None
    assert "t-0" in os.listdir(destination)
    assert content(again.log_manager.get("t", 0)) == before
    again.close()


def test_two_future_logs_of_one_partition_refuse_to_start(tmp_path):
    replicas, partition, source, destination = hosted(tmp_path)
    replicas.log_manager.create_future("t", 0, destination)
    crash(replicas)
    os.makedirs(os.path.join(destination, f"t-0.{uuid.uuid4().hex}-future"))
    with pytest.raises(StartupError, match="2 future logs"):
        open_replicas(tmp_path)


def test_a_move_whose_current_log_is_offline_at_start_is_dropped(tmp_path):
    async def first_run():
        replicas, partition, source, destination = hosted(tmp_path)
        write(partition, 10)
        replicas.log_manager.create_future("t", 0, destination)
        crash(replicas)
        return source, destination

    source, destination = asyncio.run(first_run())
    with open(os.path.join(source, "t-0", "partition.metadata"), "wb") as damaged:
        damaged.write(b"\x00garbage\xff")

    async def second_run():
        replicas, _ = open_replicas(tmp_path)
        assert replicas.log_manager.future_of("t", 0) is not None
        apply(replicas, EMPTY, IMAGE)
        replicas.resume_log_dir_moves()
        await until_moved(replicas)  # here: until the future log is gone
        assert replicas.log_dir_of("t", 0) == source  # left where it was, offline
        assert not [n for n in os.listdir(destination) if n.startswith("t-0")]
        replicas.close()
    asyncio.run(second_run())
