"""The broker's persister end to end on a real broker: the state written through
``broker.share_persister`` lands in ``__share_group_state`` (created on first use, not compacted, with
the share coordinator's settings) and comes back the same after a clean restart and after the
broker process is killed with SIGKILL."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

from kbroker.coordinator.share.persister import SharePartitionKey
from kbroker.coordinator.share.persister import StateBatch as B
from kbroker.metadata.topic_policy import NewTopic
from kbroker.protocol.errors import Errors
from kbroker.testing.inprocess import AsyncKafkaBroker

GROUP = "sg1"
AV, ACK, ARC = 0, 2, 4
EXPECTED = [B(3, 4, ACK, 3), B(5, 9, AV, 2), B(10, 19, ARC, 5)]
ROOT = Path(__file__).resolve().parents[3]


async def write_state(broker) -> uuid.UUID:
    """Initialize partitions 0 and 1 of a new topic for GROUP and write their states."""
    topic = await broker.controller.create_topic(NewTopic("orders", 2, 1))
    persister = broker.share_persister
    for p in (0, 1):
        key = SharePartitionKey(GROUP, topic.topic_id, p)
        assert (await persister.initialize(key, 1, 0)).error is Errors.NONE
        assert (await persister.read(key, 3)).error is Errors.NONE
        result = await persister.write(key, 1, 3, 3, [B(0, 9, AV, 2), B(3, 4, ACK, 3)], -1)
        assert result.error is Errors.NONE, result
        result = await persister.write(key, 1, 3, 3, [B(10, 19, ARC, 5)], 7)
        assert result.error is Errors.NONE, result
    return topic.topic_id


async def check_state(broker, topic_id: uuid.UUID) -> None:
    persister = broker.share_persister
    for p in (0, 1):
        key = SharePartitionKey(GROUP, topic_id, p)
        read = await persister.read(key, 3)
        assert read.error is Errors.NONE, read
        assert (read.state_epoch, read.start_offset, read.batches) == (1, 3, EXPECTED)
        summary = await persister.read_summary(key, 3)
        assert (summary.leader_epoch, summary.delivery_complete_count) == (3, 7)
        assert (await persister.read(key, 2)).error is Errors.FENCED_LEADER_EPOCH


def test_state_survives_a_restart(tmp_path):
    async def scenario():
        async with AsyncKafkaBroker(data_dir=tmp_path) as kafka:
            topic_id = await write_state(kafka.broker)
            await check_state(kafka.broker, topic_id)
            state_topic = kafka.broker.controller.image.topic("__share_group_state")
            assert state_topic.num_partitions == 50
            # As Kafka: never compacted (updates are deltas), kept forever.
            assert state_topic.configs["cleanup.policy"] == "delete"
            assert state_topic.configs["retention.ms"] == "-1"
            assert state_topic.configs["min.insync.replicas"] == "1"
            assert state_topic.configs["segment.bytes"] == "104857600"
        async with AsyncKafkaBroker(data_dir=tmp_path) as kafka:
            await check_state(kafka.broker, topic_id)
            # and the coordinator keeps working after the reload
            key = SharePartitionKey(GROUP, topic_id, 0)
            assert (await kafka.broker.share_persister.delete(key)).error is Errors.NONE
            assert (await kafka.broker.share_persister.read(key, 3)).error is Errors.INVALID_REQUEST
    asyncio.run(scenario())


def test_settings_are_applied(tmp_path):
    async def scenario():
        settings = {"share.coordinator.state.topic.num.partitions": 3,
                    "share.coordinator.state.topic.segment.bytes": 1048576}
        async with AsyncKafkaBroker(settings, data_dir=tmp_path) as kafka:
            topic_id = await write_state(kafka.broker)
            state_topic = kafka.broker.controller.image.topic("__share_group_state")
            assert state_topic.num_partitions == 3
            assert state_topic.configs["segment.bytes"] == "1048576"
            await check_state(kafka.broker, topic_id)
    asyncio.run(scenario())


def test_state_survives_kill_9(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "tests.coordinator.share.share_state_writer",
                             str(tmp_path)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        output = []
        for line in proc.stdout:
            output.append(line)
            if line.startswith("WRITTEN "):
                break
        else:
            raise AssertionError("the writer exited early:\n" + "".join(output))
        topic_id = uuid.UUID(line.split()[1])
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=20)

    async def scenario():
        async with AsyncKafkaBroker(data_dir=tmp_path) as kafka:
            await check_state(kafka.broker, topic_id)
    asyncio.run(scenario())


def test_deleting_a_topic_drops_its_share_states(tmp_path):
    async def scenario():
        async with AsyncKafkaBroker(data_dir=tmp_path) as kafka:
            broker = kafka.broker
            topic_id = await write_state(broker)
            other = await broker.controller.create_topic(NewTopic("kept", 1, 1))
            kept = SharePartitionKey(GROUP, other.topic_id, 0)
            assert (await broker.share_persister.initialize(kept, 0, 0)).error is Errors.NONE
            await broker.controller.delete_topic("orders")
            coordinator = broker.share_coordinator

            def remaining():
                return {k for shard in coordinator.runtime.shards.values() for k in shard.states}
            for _ in range(100):
                if remaining() == {kept}:
                    break
                await asyncio.sleep(0.05)
            assert remaining() == {kept}
            key = SharePartitionKey(GROUP, topic_id, 0)
            assert (await broker.share_persister.read_summary(key, 0)).error is \
                Errors.UNKNOWN_TOPIC_OR_PARTITION
        async with AsyncKafkaBroker(data_dir=tmp_path) as kafka:  # the tombstones were written
            runtime = kafka.broker.share_coordinator.runtime
            for _ in range(100):
                if not any(shard.loading for shard in runtime.shards.values()):
                    break
                await asyncio.sleep(0.05)
            assert {k for shard in runtime.shards.values() for k in shard.states} == {kept}
    asyncio.run(scenario())


def test_the_state_topic_refuses_compaction_and_retention(tmp_path):
    """Compacting __share_group_state would keep one ShareUpdate per share partition and lose
    the deltas before it; AlterConfigs is refused (a kbroker guard, as for the other internal
    topics)."""
    from kbroker.protocol.errors import KafkaError
    from kbroker.metadata.topic_policy import check_topic_configs

    async def scenario():
        async with AsyncKafkaBroker(data_dir=tmp_path) as kafka:
            await write_state(kafka.broker)
            topic = kafka.broker.controller.image.topic("__share_group_state")
            for bad in ({"cleanup.policy": "compact"}, {"cleanup.policy": "delete,compact"},
                        {"retention.ms": "604800000"}):
                try:
                    check_topic_configs(topic, {**topic.configs, **bad})
                except KafkaError as exc:
                    assert exc.error is Errors.INVALID_CONFIG
                else:
                    raise AssertionError(f"{bad} accepted")
            check_topic_configs(topic, {**topic.configs, "segment.bytes": "1048576"})
    asyncio.run(scenario())


def test_pruning_keeps_the_state(tmp_path):
    """With a snapshot after every update, the records below each share partition's latest
    snapshot are deleted every prune interval; the state read back (also after a restart) is
    the same."""
    settings = {"share.coordinator.state.topic.prune.interval.ms": 100,
                "share.coordinator.snapshot.update.records.per.snapshot": 1}

    async def scenario():
        async with AsyncKafkaBroker(settings, data_dir=tmp_path) as kafka:
            broker = kafka.broker
            topic_id = await write_state(broker)
            coordinator = broker.share_coordinator
            indexes = {coordinator.partition_for(SharePartitionKey(GROUP, topic_id, p))
                       for p in (0, 1)}
            for _ in range(100):
                starts = {i: broker.replicas.get("__share_group_state", i).log_start_offset
                          for i in indexes}
                if all(starts.values()):
                    break
                await asyncio.sleep(0.05)
            assert all(starts.values()), starts
            await check_state(broker, topic_id)
        async with AsyncKafkaBroker(settings, data_dir=tmp_path) as kafka:
            await check_state(kafka.broker, topic_id)
    asyncio.run(scenario())
