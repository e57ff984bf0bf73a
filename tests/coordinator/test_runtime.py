"""The coordinator runtime: answers only once committed, restores the shard when a write is not,
replays a log into the same state, and cancels a shard's timers when it unloads.

A small key-value shard exercises the runtime itself; the group shard checks the same promises
where they matter (a new group, the leader's assignment, loading). The partition is the test
double of tests/coordinator/fakes.py, whose committed futures the test holds, completes or fails.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from kbroker.config import BrokerConfig
from kbroker.coordinator.group import offsets, sync
from kbroker.coordinator.group.join import JoinRequest, join
from kbroker.coordinator.group.shard import GroupShard
from kbroker.coordinator.group.state import GroupState
from kbroker.coordinator.runtime import CoordinatorResult, Shard, respond
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.protocol.primitives import ZERO_UUID
from tests.coordinator.fakes import make_runtime


class KeyValueShard(Shard):
    """Durable state: a dict, changed only by replay."""

    def __init__(self, runtime, index):
        super().__init__(runtime, index)
        self.values: dict[bytes, bytes] = self.timeline_dict()

    def replay(self, offset, key, value):
        if value is None:
            self.values.pop(key, None)
        else:
            self.values[key] = value

    def durable_state(self):
        return dict(self.values)


def put(key: bytes, value: bytes | None, events: list | None = None):
    def op(shard):
        return CoordinatorResult(
            [(key, value)], f"put {key!r}",
            on_committed=(lambda: events.append(("committed", key))) if events is not None
            else None)
    return op


def read(key: bytes):
    return lambda shard: respond(shard.values.get(key))


def kv_runtime():
    runtime, broker = make_runtime(KeyValueShard)
    runtime.load(0)
    return runtime, broker.get("__test", 0)


def run(coro):
    return asyncio.run(coro)


async def settle():
    for _ in range(5):
        await asyncio.sleep(0)


# --- commit -------------------------------------------------------------------------------------

def test_response_completes_only_after_commit():
    async def scenario():
        runtime, partition = kv_runtime()
        partition.hold_commits = True
        events = []
        done = runtime.run(0, put(b"a", b"1", events))
        # Appended and replayed (later operations see it), but not answered.
        assert runtime.shards[0].values == {b"a": b"1"}
        await settle()
        assert not done.done() and events == []
        # An operation without records that read that state answers after it, too.
        reader = runtime.run(0, read(b"a"))
        await settle()
        assert not reader.done()
        partition.commit()
        assert await done == "put b'a'"
        assert events == [("committed", b"a")]
        assert await reader == b"1"

    run(scenario())


def test_follow_up_work_runs_when_the_caller_went_away():
    async def scenario():
        runtime, partition = kv_runtime()
        partition.hold_commits = True
        events = []
        caller = asyncio.ensure_future(runtime.write(0, put(b"a", b"1", events)))
        await settle()
        caller.cancel()  # e.g. the client's connection closed
        await settle()
        partition.commit()
        await settle()
        assert events == [("committed", b"a")]

    run(scenario())


def test_a_gone_callers_write_failing_on_unload_logs_no_unretrieved_error(caplog):
    """A caller that went away leaves its write to finish alone; when the shard then unloads,
    the write's NOT_COORDINATOR is the caller's business: no asyncio "Future exception was
    never retrieved" ERROR line in the broker's log."""
    import gc

    async def scenario():
        runtime, partition = kv_runtime()
        partition.hold_commits = True
        caller = asyncio.ensure_future(runtime.write(0, put(b"a", b"1")))
        await settle()
        caller.cancel()
        await settle()
        runtime.unload(0)
        await settle()

    run(scenario())
    gc.collect()  # asyncio reports an unretrieved exception when the future is collected
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]


def test_failed_append_restores_state_and_maps_the_error():
    async def scenario():
        runtime, partition = kv_runtime()
        await runtime.write(0, put(b"a", b"1"))
        before = runtime.shards[0].durable_state()
        for raised, answered in [(Errors.NOT_LEADER_OR_FOLLOWER, Errors.NOT_COORDINATOR),
                                 (Errors.NOT_ENOUGH_REPLICAS, Errors.COORDINATOR_NOT_AVAILABLE),
                                 (Errors.MESSAGE_TOO_LARGE, Errors.UNKNOWN_SERVER_ERROR)]:
            partition.append_error = KafkaError(raised)
            with pytest.raises(KafkaError) as e:
                await runtime.write(0, put(b"a", b"2"))
            assert e.value.error is answered
            assert runtime.shards[0].durable_state() == before
        assert [r[1:] for r in partition.records()] == [(b"a", b"1")]

    run(scenario())


def test_failed_commit_restores_state_and_fails_later_writes():
    async def scenario():
        runtime, partition = kv_runtime()
        await runtime.write(0, put(b"a", b"1"))
        committed_state = runtime.shards[0].durable_state()
        partition.hold_commits = True
        events = []
        first = runtime.run(0, put(b"a", b"2", events))
        second = runtime.run(0, put(b"b", b"3", events))
        assert runtime.shards[0].values == {b"a": b"2", b"b": b"3"}
        partition.fail(KafkaError(Errors.NOT_LEADER_OR_FOLLOWER))
        for done in (first, second):
            with pytest.raises(KafkaError) as e:
                await done
            assert e.value.error is Errors.NOT_COORDINATOR
        assert runtime.shards[0].durable_state() == committed_state
        assert events == []
        # The shard goes on from the restored state.
        partition.hold_commits = False
        await runtime.write(0, put(b"c", b"4"))
        assert runtime.shards[0].values == {b"a": b"1", b"c": b"4"}

    run(scenario())


def test_on_failed_gives_the_response_and_then_follows_up():
    async def scenario():
        runtime, partition = kv_runtime()
        partition.append_error = KafkaError(Errors.REQUEST_TIMED_OUT)
        answer = await runtime.write(0, lambda s: CoordinatorResult(
            [(b"k", b"v")], "ok", on_failed=lambda exc: f"failed: {exc.error.name}"))
        assert answer == "failed: COORDINATOR_NOT_AVAILABLE"
        # A follow-up operation runs once the first write is committed; its response is given.
        answer = await runtime.write(0, lambda s: CoordinatorResult(
            [(b"k", b"v")], "first", then=lambda s2: CoordinatorResult(
                [(b"k2", s2.values[b"k"] + b"!")], "second")))
        assert answer == "second" and runtime.shards[0].values[b"k2"] == b"v!"

    run(scenario())


# --- replay -------------------------------------------------------------------------------------

def test_replay_of_the_log_rebuilds_identical_state():
    async def scenario():
        runtime, partition = kv_runtime()
        for i in range(20):
            await runtime.write(0, put(b"k%d" % (i % 7), b"%d" % i))
        await runtime.write(0, put(b"k3", None))
        built = runtime.shards[0].durable_state()
        runtime.unload(0)
        runtime.load(0)  # replays the partition, as after a restart or a leadership move
        with pytest.raises(KafkaError) as e:
            runtime.shard(0)
        assert e.value.error is Errors.COORDINATOR_LOAD_IN_PROGRESS
        while runtime.shards[0].loading:
            await asyncio.sleep(0)
        assert runtime.shards[0].durable_state() == built

    run(scenario())


def group_runtime(**overrides):
    config = BrokerConfig({"group.initial.rebalance.delay.ms": 0,
                           "group.min.session.timeout.ms": 10, **overrides})
    runtime, broker = make_runtime(lambda rt, index: GroupShard(rt, index, config),
                                   "__consumer_offsets")
    runtime.load(0)
    return runtime, broker.get("__consumer_offsets", 0)


def join_request(group="g", member_id="", instance=None):
    return JoinRequest(group, member_id, instance, "consumer", [("range", b"r")], 10000, 10000,
                       "client", "/127.0.0.1", 9)


async def write(runtime, op, *args):
    response = await runtime.write(0, lambda s: op(s, *args))
    return await response if isinstance(response, asyncio.Future) else response


def test_group_shard_replay_rebuilds_identical_state(monkeypatch):
    async def scenario():
        runtime, partition = group_runtime()
        first = await write(runtime, join, join_request())
        a = await write(runtime, join, join_request(member_id=first.member_id))
        await write(runtime, sync.sync, "g", 1, a.member_id, None, None, None,
                    {a.member_id: b"assignment"})
        await write(runtime, offsets.commit, "g", [("t", 0, ZERO_UUID, 5, -1, "m"),
                                                    ("t", 1, ZERO_UUID, 7, 3, "")])
        await write(runtime, offsets.commit, "solo", [("u", 0, ZERO_UUID, 1, -1, "")])
        await write(runtime, offsets.delete, "solo", [("u", 0)])
        built = runtime.shards[0].durable_state()
        assert built[1]["g"].members[0].assignment == b"assignment"
        runtime.unload(0)

        # Replay is pure: no clock while loading.
        def no_clock():
            raise AssertionError("replay read the clock")
        monkeypatch.setattr(time, "time", no_clock)
        runtime.load(0)
        while runtime.shards[0].loading:
            await asyncio.sleep(0)
        monkeypatch.undo()
        loaded = runtime.shards[0]
        assert loaded.durable_state() == built
        group = loaded.groups["g"]
        assert group.is_in(GroupState.STABLE) and list(group.members) == [a.member_id]
        runtime.unload(0)

    run(scenario())


def test_new_group_is_not_created_when_its_record_is_not_committed():
    async def scenario():
        runtime, partition = group_runtime()
        partition.append_error = KafkaError(Errors.NOT_LEADER_OR_FOLLOWER)
        result = await write(runtime, join, join_request())
        assert result.error is Errors.NOT_COORDINATOR
        shard = runtime.shards[0]
        assert shard.groups == {} and shard.persisted == {}
        # Held, then failed: the same.
        partition.hold_commits = True
        pending = asyncio.ensure_future(write(runtime, join, join_request()))
        await settle()
        assert "g" in shard.persisted and "g" not in shard.groups  # replayed, not committed
        partition.fail(KafkaError(Errors.NOT_LEADER_OR_FOLLOWER))
        assert (await pending).error is Errors.NOT_COORDINATOR
        assert shard.groups == {} and shard.persisted == {}
        runtime.unload(0)

    run(scenario())


def test_assignment_not_committed_answers_the_error_and_rebalances():
    async def scenario():
        runtime, partition = group_runtime()
        first = await write(runtime, join, join_request())
        a = await write(runtime, join, join_request(member_id=first.member_id))
        shard = runtime.shards[0]
        before = shard.durable_state()
        partition.hold_commits = True
        leader = asyncio.ensure_future(write(runtime, sync.sync, "g", 1, a.member_id, None,
                                             None, None, {a.member_id: b"x"}))
        await settle()
        assert not leader.done()  # the assignment is not committed yet
        assert shard.groups["g"].is_in(GroupState.COMPLETING_REBALANCE)
        partition.fail(KafkaError(Errors.NOT_ENOUGH_REPLICAS))
        assert (await leader).error is Errors.COORDINATOR_NOT_AVAILABLE
        assert shard.durable_state() == before
        assert shard.groups["g"].is_in(GroupState.PREPARING_REBALANCE)
        runtime.unload(0)

    run(scenario())


# --- timers and unloading -----------------------------------------------------------------------

def test_timer_runs_an_operation_and_unload_cancels_timers():
    async def scenario():
        runtime, partition = kv_runtime()
        shard = runtime.shards[0]
        shard.schedule("soon", 0, put(b"timer", b"fired"))
        shard.schedule("later", 20, put(b"late", b"fired"))
        await asyncio.sleep(0.005)
        assert shard.values == {b"timer": b"fired"}  # written through the runtime
        assert [r[1:] for r in partition.records()] == [(b"timer", b"fired")]
        assert runtime.timer_keys(0) == {"later"}
        runtime.unload(0)
        assert runtime.timer_keys(0) == set()
        await asyncio.sleep(0.04)
        assert b"late" not in shard.values
        shard.schedule("after", 0, put(b"x", b"y"))  # an unloaded shard schedules nothing
        assert runtime.timer_keys(0) == set()

    run(scenario())


def test_unload_fails_pending_writes_and_parked_requests_with_not_coordinator():
    async def scenario():
        runtime, partition = group_runtime()
        first = await write(runtime, join, join_request())
        parked = await runtime.write(0, lambda s: join(s, join_request(
            member_id=first.member_id)))
        # Two members: the second's join parks until the first rejoins.
        a = await parked
        second = await write(runtime, join, join_request())
        parked_b = await runtime.write(0, lambda s: join(s, join_request(
            member_id=second.member_id)))
        assert not parked_b.done()
        partition.hold_commits = True
        commit = runtime.run(0, lambda s: offsets.commit(s, "solo",
                                                         [("t", 0, ZERO_UUID, 1, -1, "")]))
        assert runtime.timer_keys(0)  # session and rebalance timers
        runtime.unload(0)
        assert runtime.timer_keys(0) == set()
        assert (await parked_b).error is Errors.NOT_COORDINATOR
        with pytest.raises(KafkaError) as e:
            await commit
        assert e.value.error is Errors.NOT_COORDINATOR
        with pytest.raises(KafkaError) as e:
            await write(runtime, join, join_request(member_id=a.member_id))
        assert e.value.error is Errors.NOT_COORDINATOR

    run(scenario())


def test_an_uncommitted_offset_commit_is_reverted_at_the_cost_of_its_entries():
    """Issue 34: a write waiting for its commit journals the entries it changed, whatever else
    the shard holds (it used to copy every group's offsets first)."""
    async def scenario():
        runtime, partition = group_runtime()
        for g in range(200):
            await write(runtime, offsets.commit, f"other-{g}",
                        [("t", p, ZERO_UUID, p, -1, "") for p in range(50)])
        await write(runtime, offsets.commit, "probe", [("t", 0, ZERO_UUID, 1, -1, "")])
        shard = runtime.shards[0]
        before = shard.durable_state()
        partition.hold_commits = True
        pending = asyncio.ensure_future(write(
            runtime, offsets.commit, "probe", [("t", 0, ZERO_UUID, 2, -1, ""),
                                               ("t", 1, ZERO_UUID, 2, -1, "")]))
        await settle()
        assert shard.offsets["probe"][("t", 1)].offset == 2  # replayed, not committed
        assert len(shard.timeline) == 2  # one undo entry per partition written
        partition.fail(KafkaError(Errors.NOT_LEADER_OR_FOLLOWER))
        await pending
        assert shard.durable_state() == before and len(shard.timeline) == 0
        runtime.unload(0)

    run(scenario())
