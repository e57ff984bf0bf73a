"""Loading a shard on a new leader: records in its log above its high watermark (acknowledged by
the previous leader, not yet committed here) are part of the state once they are committed
here; the shard stays COORDINATOR_LOAD_IN_PROGRESS until then, rather than coming up without
them."""

from __future__ import annotations

import asyncio

import pytest

from kbroker.coordinator.runtime import CoordinatorRuntime
from kbroker.protocol.errors import Errors, KafkaError
from tests.coordinator.fakes import FakeBroker
from tests.coordinator.test_runtime import KeyValueShard, put


def test_a_load_waits_for_the_high_watermark_to_reach_the_log_end():
    async def scenario():
        broker = FakeBroker("__kv")
        first = CoordinatorRuntime(broker, broker, "__kv", 1, {}, KeyValueShard)
        first.load(0)
        await first.write(0, put(b"a", b"1"))
        partition = broker.partitions[("__kv", 0)]
        partition.hold_commits = True
        first.run(0, put(b"b", b"2"))  # in the log, not committed here yet
        first.unload(0)
        assert partition.high_watermark < partition.log_end_offset

        second = CoordinatorRuntime(broker, broker, "__kv", 1, {}, KeyValueShard)
        second.load(0)
        await asyncio.sleep(0.1)
        with pytest.raises(KafkaError) as info:
            second.shard(0)
        assert info.value.error is Errors.COORDINATOR_LOAD_IN_PROGRESS
        partition.commit()  # the followers caught up
        for _ in range(100):
            if not second.shards[0].loading:
                break
            await asyncio.sleep(0.02)
        assert second.shard(0).values == {b"a": b"1", b"b": b"2"}
        await second.stop()
    asyncio.run(scenario())
