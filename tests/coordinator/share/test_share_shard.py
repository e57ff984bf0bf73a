"""The share coordinator's shard on the real runtime over an in-memory partition: the five
operations, Kafka's fencing, the snapshot/update policy, and that replaying the partition gives
back the state the operations built."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from kbroker.coordinator.share import operations as ops
from kbroker.coordinator.share import records as rec
from kbroker.coordinator.share.persister import SharePartitionKey
from kbroker.coordinator.share.persister import StateBatch as B
from kbroker.coordinator.share.shard import ShareShard
from kbroker.protocol.errors import Errors
from tests.coordinator.fakes import make_runtime

TOPIC_ID = uuid.UUID("12345678-1234-5678-1234-567812345678")
KEY = SharePartitionKey("g1", TOPIC_ID, 0)
AV, ACK, ARC = 0, 2, 4


class _UserTopic:
    num_partitions = 2


def _setup(updates_per_snapshot=500):
    runtime, broker = make_runtime(
        lambda rt, i: ShareShard(rt, i, updates_per_snapshot), "__share_group_state")
    broker.topic_by_id = lambda tid: _UserTopic() if tid == TOPIC_ID else None
    runtime.load(0)
    return runtime, broker


def _run(runtime, op):
    return asyncio.run(_write(runtime, op))


async def _write(runtime, op):
    return await runtime.write(0, op)


def run_all(runtime, *ops_):
    async def go():
        return [await runtime.write(0, op) for op in ops_]
    return asyncio.run(go())


def _types(broker):
    part = broker.partitions[("__share_group_state", 0)]
    return [int.from_bytes(k[:2], "big") if v is not None else "tombstone"
            for _, k, v in part.records()]


def test_initialize_write_read():
    runtime, broker = _setup()
    init, w1, w2, read = run_all(
        runtime,
        ops.initialize(KEY, 1, -1),
        ops.write(KEY, 1, 0, 0, [B(0, 9, AV, 1)], -1),
        ops.write(KEY, 1, 0, 5, [B(5, 7, ACK, 1)], 3),
        ops.read(KEY, 0))
    assert (init.error, w1.error, w2.error) == (Errors.NONE,) * 3
    assert read.error is Errors.NONE
    assert read.state_epoch == 1 and read.start_offset == 5
    assert read.batches == [B(5, 7, ACK, 1), B(8, 9, AV, 1)]
    summary = _run(runtime, ops.read_summary(KEY, 0))
    assert (summary.start_offset, summary.state_epoch, summary.delivery_complete_count,
            summary.leader_epoch) == (5, 1, 3, 0)
    assert _types(broker) == [rec.SNAPSHOT_TYPE, rec.UPDATE_TYPE, rec.UPDATE_TYPE]


def test_replay_rebuilds_the_same_state():
    runtime, broker = _setup(updates_per_snapshot=2)
    run_all(runtime,
            ops.initialize(KEY, 3, 10),
            ops.write(KEY, 3, 1, -1, [B(10, 19, AV, 1)], -1),
            ops.write(KEY, 3, 1, 12, [B(12, 14, ACK, 1)], -1),
            ops.write(KEY, 3, 1, -1, [B(15, 16, ARC, 2)], 4),  # a snapshot (2 updates before)
            ops.write(KEY, 3, 1, -1, [B(17, 17, ACK, 1)], 5))
    assert _types(broker) == [0, 1, 1, 0, 1]
    live = runtime.shards[0]
    replayed = ShareShard(runtime, 0, 2)
    for offset, k, v in broker.partitions[("__share_group_state", 0)].records():
        replayed.replay(offset, k, v)
    assert replayed.states == live.states
    assert replayed.update_counts == live.update_counts == {KEY: 1}
    assert replayed.leader_epochs == live.leader_epochs
    assert live.states[KEY].batches == (B(12, 14, ACK, 1), B(15, 16, ARC, 2), B(17, 17, ACK, 1),
                                        B(18, 19, AV, 1))
    assert live.states[KEY].snapshot_epoch == 1


def test_updates_per_snapshot_zero_writes_snapshots_only():
    runtime, broker = _setup(updates_per_snapshot=0)
    run_all(runtime, ops.initialize(KEY, 0, 0), ops.write(KEY, 0, 0, -1, [B(0, 1, ACK, 1)], -1),
            ops.write(KEY, 0, 0, -1, [B(2, 3, ACK, 1)], -1))
    assert _types(broker) == [0, 0, 0]
    assert runtime.shards[0].states[KEY].batches == (B(0, 3, ACK, 1),)


def test_uninitialized_partition():
    runtime, _ = _setup()
    read = _run(runtime, ops.read(KEY, 0))
    assert read.error is Errors.INVALID_REQUEST
    assert read.error_message == "Read operation on uninitialized share partition not allowed."
    write = _run(runtime, ops.write(KEY, 0, 0, 0, [], -1))
    assert write.error is Errors.INVALID_REQUEST
    assert write.error_message == "Write operation on uninitialized share partition not allowed."
    summary = _run(runtime, ops.read_summary(KEY, 0))
    assert (summary.error, summary.start_offset, summary.state_epoch, summary.leader_epoch,
            summary.delivery_complete_count) == (Errors.NONE, -1, 0, 0, -1)
    assert _run(runtime, ops.delete(KEY)).error is Errors.NONE


def test_unknown_topic_or_partition():
    runtime, _ = _setup()
    for key in (SharePartitionKey("g1", uuid.uuid4(), 0), SharePartitionKey("g1", TOPIC_ID, 2)):
        assert _run(runtime, ops.initialize(key, 0, 0)).error is Errors.UNKNOWN_TOPIC_OR_PARTITION
        assert _run(runtime, ops.read_summary(key, 0)).error is Errors.UNKNOWN_TOPIC_OR_PARTITION
        assert _run(runtime, ops.delete(key)).error is Errors.UNKNOWN_TOPIC_OR_PARTITION
    bad = SharePartitionKey("g1", TOPIC_ID, -1)
    assert _run(runtime, ops.read(bad, 0)).error is Errors.INVALID_REQUEST


def test_fencing():
    runtime, broker = _setup()
    run_all(runtime, ops.initialize(KEY, 2, 0))
    # A leader that reads with a newer epoch records it (an update record) ...
    assert _run(runtime, ops.read(KEY, 5)).error is Errors.NONE
    assert _types(broker) == [0, 1]
    assert _run(runtime, ops.read(KEY, 5)).error is Errors.NONE
    assert _types(broker) == [0, 1]  # same epoch: nothing to record
    # ... so the older leader is fenced, for reads and writes.
    assert _run(runtime, ops.read(KEY, 4)).error is Errors.FENCED_LEADER_EPOCH
    assert _run(runtime, ops.write(KEY, 2, 4, -1, [], -1)).error is Errors.FENCED_LEADER_EPOCH
    assert _run(runtime, ops.write(KEY, 2, 5, -1, [], -1)).error is Errors.NONE
    # State epochs: an older group epoch can neither write nor initialize.
    assert _run(runtime, ops.write(KEY, 1, 5, -1, [], -1)).error is Errors.FENCED_STATE_EPOCH
    assert _run(runtime, ops.initialize(KEY, 1, 0)).error is Errors.FENCED_STATE_EPOCH
    assert _run(runtime, ops.initialize(KEY, 3, 7)).error is Errors.NONE
    summary = _run(runtime, ops.read_summary(KEY, 0))
    # A re-initialize starts afresh: leader epoch 0 in the record, the highest seen still fences.
    assert (summary.state_epoch, summary.start_offset, summary.leader_epoch,
            summary.delivery_complete_count) == (3, 7, 0, 0)
    assert _run(runtime, ops.read(KEY, 4)).error is Errors.FENCED_LEADER_EPOCH


def test_delete_writes_a_tombstone():
    runtime, broker = _setup()
    run_all(runtime, ops.initialize(KEY, 0, 0), ops.write(KEY, 0, 0, -1, [B(0, 0, ACK, 1)], -1))
    assert _run(runtime, ops.delete(KEY)).error is Errors.NONE
    assert _types(broker) == [0, 1, "tombstone"]
    assert _run(runtime, ops.read(KEY, 0)).error is Errors.INVALID_REQUEST
    shard = runtime.shards[0]
    assert not (shard.states or shard.leader_epochs or shard.state_epochs or shard.update_counts)


def test_records_are_kafkas_format():
    state = rec.ShareState(1, 2, 3, 4, 5, (B(4, 6, ACK, 1),), 100, 200)
    k, v = rec.snapshot_record(KEY, state)
    # key: type 0, group (int16 length), topic id, partition
    assert k == b"\x00\x00" + b"\x00\x02g1" + TOPIC_ID.bytes + b"\x00\x00\x00\x00"
    decoded = rec.decode(k, v)
    assert decoded.record_type == 0 and decoded.key == KEY
    assert decoded.value.delivery_complete_count == 5
    assert v[:2] == b"\x00\x00"


def test_coordinator_key_uses_kafka_uuid_text():
    key = SharePartitionKey("grp", uuid.UUID(bytes=bytes(range(16))), 3)
    assert key.coordinator_key() == "grp:AAECAwQFBgcICQoLDA0ODw:3"
    assert rec.parse_coordinator_key("a:b:AAECAwQFBgcICQoLDA0ODw:3") == SharePartitionKey(
        "a:b", uuid.UUID(bytes=bytes(range(16))), 3)
    for bad in ("", "g:3", "g:notauuid:1", "g:AAECAwQFBgcICQoLDA0ODw:x"):
        with pytest.raises(ValueError):
            rec.parse_coordinator_key(bad)


def test_negative_epochs_are_invalid():
    """Kafka 4.4 takes no -1 for "any epoch": a negative epoch is INVALID_REQUEST, checked
    before whether the partition was initialized."""
    runtime, _ = _setup()
    read = _run(runtime, ops.read(KEY, -1))
    assert (read.error, read.error_message) == (
        Errors.INVALID_REQUEST, "The leader epoch cannot be a negative number.")
    write = _run(runtime, ops.write(KEY, -1, 0, 0, [], -1))
    assert (write.error, write.error_message) == (
        Errors.INVALID_REQUEST, "The state epoch cannot be a negative number.")
    assert _run(runtime, ops.write(KEY, 0, -1, 0, [], -1)).error_message == \
        "The leader epoch cannot be a negative number."
    assert _run(runtime, ops.initialize(KEY, -1, 0)).error_message == \
        "The state epoch cannot be a negative number."


def test_start_offset_and_delivery_complete_count_never_move_back():
    runtime, _ = _setup()
    run_all(runtime, ops.initialize(KEY, 0, 10),
            ops.write(KEY, 0, 0, 20, [B(15, 30, AV, 1)], 5),   # forward: 5 stands
            ops.write(KEY, 0, 0, 20, [], 3),                    # same start: the higher, 5
            ops.write(KEY, 0, 0, 12, [B(12, 13, ACK, 1)], 9))   # behind: stays 20 and 5
    state = runtime.shards[0].states[KEY]
    assert (state.start_offset, state.delivery_complete_count) == (20, 5)
    assert state.batches == (B(20, 30, AV, 1),)


def test_last_redundant_offset():
    """Records below the oldest latest snapshot of the share partitions are redundant; a
    deleted partition stops holding the others back after its tombstone."""
    runtime, broker = _setup(updates_per_snapshot=0)  # every write is a snapshot
    other = SharePartitionKey("g2", TOPIC_ID, 1)
    shard = lambda: runtime.shards[0]  # noqa: E731
    run_all(runtime, ops.initialize(KEY, 0, 0))                      # offset 0
    assert shard().last_redundant_offset() is None                   # 0: nothing below
    run_all(runtime, ops.initialize(other, 0, 0))                    # 1
    run_all(runtime, ops.write(KEY, 0, 0, 0, [B(0, 0, ACK, 1)], -1))  # 2
    assert shard().last_redundant_offset() == 1                      # other's snapshot at 1
    run_all(runtime, ops.write(other, 0, 0, 0, [], -1))              # 3
    assert shard().last_redundant_offset() == 2
    run_all(runtime, ops.delete(KEY))                                # 4: tombstone
    assert shard().last_redundant_offset() == 3
    run_all(runtime, ops.write(other, 0, 0, 0, [], -1))              # 5
    assert shard().last_redundant_offset() == 5


def test_cold_partitions_get_a_fresh_snapshot(monkeypatch):
    """A share partition without a snapshot for the interval gets one (its state merged, the
    snapshot epoch bumped, the creation time kept) and stops holding pruning back; when every
    state is such a cold snapshot already, nothing is written."""
    from kbroker.coordinator.share import operations
    clock = [1_000_000]
    monkeypatch.setattr(operations, "now_ms", lambda: clock[0])
    runtime, broker = _setup()
    other = SharePartitionKey("g2", TOPIC_ID, 1)
    run_all(runtime, ops.initialize(KEY, 0, 0), ops.initialize(other, 0, 0),
            ops.write(KEY, 0, 0, 0, [B(0, 4, ACK, 1)], -1))  # an update: the snapshot stays old
    clock[0] += 60_000
    run_all(runtime, ops.initialize(other, 1, 0))  # other's snapshot is fresh
    before = runtime.shards[0].states[KEY]
    clock[0] += 1_000
    assert _run(runtime, ops.snapshot_cold(30_000)) == 1  # KEY only
    after = runtime.shards[0].states[KEY]
    assert after.batches == before.batches == (B(0, 4, ACK, 1),)
    assert after.snapshot_epoch == before.snapshot_epoch + 1
    assert (after.create_timestamp, after.write_timestamp) == (1_000_000, clock[0])
    assert _types(broker)[-1] == rec.SNAPSHOT_TYPE
    assert runtime.shards[0].last_redundant_offset() == 3  # other's snapshot
    clock[0] += 60_000
    assert _run(runtime, ops.snapshot_cold(30_000)) == 2  # other is warm: both idle ones go
    clock[0] += 60_000
    assert _run(runtime, ops.snapshot_cold(30_000)) == 0  # all cold already: skipped
