"""The group coordinator's state machines, fed operations and records directly (no broker).

Operations run through the real CoordinatorRuntime over an in-memory partition (tests/coordinator/
fakes.py) that commits at once, so a test can also rebuild a second shard from what the first one
wrote — exactly what loading after a restart does.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from kbroker.config import BrokerConfig
from kbroker.coordinator.group import admin, heartbeat, leave, offsets, sync
from kbroker.coordinator.group import records as rec
from kbroker.coordinator.group.join import JoinRequest, join
from kbroker.coordinator.group.parked import JoinResult
from kbroker.coordinator.group.shard import GroupShard
from kbroker.coordinator.group.state import TRANSITIONS, ClassicGroup, GroupState
from kbroker.protocol.errors import Errors, KafkaError
from tests.coordinator.fakes import make_runtime

S = GroupState
GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "internal" / "records.jsonl"


def make_shard(**overrides) -> GroupShard:
    config = BrokerConfig({"group.initial.rebalance.delay.ms": 0,
                           "group.min.session.timeout.ms": 10, **overrides})
    runtime, broker = make_runtime(lambda rt, index: GroupShard(rt, index, config),
                                   "__consumer_offsets")
    runtime.load(0)  # an empty partition: loaded at once
    shard = runtime.shards[0]
    shard.partition = broker.get("__consumer_offsets", 0)
    return shard


def reload(shard) -> GroupShard:
    """A new shard rebuilt from the records the first one wrote."""
    fresh = GroupShard(shard.runtime, 0, shard.config)
    for offset, key, value in shard.partition.records():
        fresh.replay(offset, key, value)
    fresh.loading = False
    fresh.on_loaded()  # not hosted by the runtime: schedules no timers
    return fresh


async def do(shard, op, *args):
    """Run ``op(shard, *args)`` through the runtime: its response once committed (a parked
    JoinGroup/SyncGroup stays a future)."""
    return await shard.runtime.write(shard.partition_index, lambda s: op(s, *args))


def close(shard) -> None:
    shard.runtime.unload(shard.partition_index)


def request(group="g", member_id="", instance=None, protocols=(("range", b"r"),), version=9,
            session=1000, rebalance=1000):
    return JoinRequest(group, member_id, instance, "consumer", list(protocols), session,
                       rebalance, "client", "/127.0.0.1", version)


async def resolve(result, timeout=2.0) -> JoinResult:
    if isinstance(result, asyncio.Future):
        return await asyncio.wait_for(result, timeout)
    return result


async def join_member(shard, **kw) -> JoinResult:
    """The v4+ round trip: MEMBER_ID_REQUIRED, then the join with the id."""
    first = await do(shard, join, request(**kw))
    assert isinstance(first, JoinResult) and first.error is Errors.MEMBER_ID_REQUIRED
    kw["member_id"] = first.member_id
    return await resolve(await do(shard, join, request(**kw)))


def run(coro):
    return asyncio.run(coro)


# --- records ----------------------------------------------------------------------------------

def test_group_partition_is_javas_hash():
    assert rec.java_string_hash("hello") == 99162322
    assert rec.java_string_hash("") == 0
    # Integer.MIN_VALUE: Kafka's Utils.abs maps it to 0.
    assert rec.java_string_hash("polygenelubricants") == -(2**31)
    assert rec.partition_for("polygenelubricants", 50) == 0
    assert rec.partition_for("hello", 50) == 99162322 % 50
    assert rec.java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00  # UTF-16 code units


def test_golden_records_replay_and_reencode():
    """Records Apache Kafka 4.3.1 wrote to __consumer_offsets replay into the group and its
    offsets, and our encoders write the same bytes."""
    shard = make_shard()
    lines = [json.loads(line) for line in GOLDEN.read_text().splitlines()]
    mine = [line for line in lines if line["topic"] == "__consumer_offsets"]
    for line in mine:
        shard.replay(line["offset"], bytes.fromhex(line["key"]), bytes.fromhex(line["value"]))
    shard.on_loaded()
    group = shard.groups["golden-group"]
    assert group.is_in(S.EMPTY) and group.generation == 2
    committed = shard.offsets["golden-group"][("golden-internal", 0)]
    # librdkafka sent the metadata string with its C terminator.
    assert (committed.offset, committed.metadata) == (2, "golden-meta\x00")
    for line in mine:
        key, value = bytes.fromhex(line["key"]), bytes.fromhex(line["value"])
        kind, k = rec.decode_key(key)
        if kind == rec.OFFSET_COMMIT_TYPE:
            assert rec.offset_commit_key(k.group, k.topic, k.partition) == key
            assert rec.offset_commit_value(rec.decode_offset_commit_value(value, 0)) == value
        else:
            assert rec.group_metadata_key(k.group) == key
            assert rec.group_metadata_value(rec.decode_group_metadata_value(value)) == value


# --- the transitions table ----------------------------------------------------------------------

def test_transitions_table():
    group = ClassicGroup("g")
    with pytest.raises(KafkaError):
        group.transition(S.STABLE, 0)
    for target, sources in TRANSITIONS.items():
        for source in S:
            group.state = source
            if source in sources:
                group.transition(target, 1)
                assert group.state is target and group.previous_state is source
            else:
                with pytest.raises(KafkaError):
                    group.transition(target, 1)


# --- joining ------------------------------------------------------------------------------------

def test_join_round_ends_when_all_members_rejoined():
    async def scenario():
        shard = make_shard()
        a = await join_member(shard, rebalance=60000)
        assert (a.error, a.generation, a.leader) == (Errors.NONE, 1, a.member_id)
        assert [m[0] for m in a.members] == [a.member_id]
        await do(shard, sync.sync, "g", 1, a.member_id, None, None, None, {a.member_id: b"A"})
        assert shard.groups["g"].is_in(S.STABLE)
        # A second member joins: the group rebalances; the first learns it from its heartbeat.
        b_first = await do(shard, join, request(rebalance=60000))
        b_join = await do(shard, join, request(member_id=b_first.member_id, rebalance=60000))
        assert shard.groups["g"].is_in(S.PREPARING_REBALANCE)
        assert await do(shard, heartbeat.heartbeat, "g", 1, a.member_id, None) is \
            Errors.REBALANCE_IN_PROGRESS
        started = time.monotonic()
        a2 = await resolve(await do(shard, join, request(member_id=a.member_id, rebalance=60000)))
        b = await resolve(b_join)
        assert time.monotonic() - started < 1  # not the 60 s rebalance timeout
        assert a2.generation == b.generation == 2
        assert a2.leader == a.member_id and len(a2.members) == 2 and b.members == []
        # Sync: the follower waits for the leader's assignment.
        waiting = await do(shard, sync.sync, "g", 2, b.member_id, None, "consumer", "range", {})
        leader = await do(shard, sync.sync, "g", 2, a.member_id, None, "consumer", "range",
                           {a.member_id: b"A2", b.member_id: b"B2"})
        assert (await waiting).assignment == b"B2"
        assert (await leader).assignment == b"A2"
        assert await do(shard, heartbeat.heartbeat, "g", 2, b.member_id, None) is Errors.NONE
        assert await do(shard, heartbeat.heartbeat, "g", 1, b.member_id, None) is \
            Errors.ILLEGAL_GENERATION
        assert await do(shard, heartbeat.heartbeat, "g", 2, "nobody", None) is \
            Errors.UNKNOWN_MEMBER_ID
        # A member leaving rebalances at once; the other rejoins and is alone.
        assert await do(shard, leave.leave, "g", [(b.member_id, None, "bye")]) == (Errors.NONE,
                                                                          [Errors.NONE])
        assert shard.groups["g"].is_in(S.PREPARING_REBALANCE)
        a3 = await resolve(await do(shard, join, request(member_id=a.member_id)))
        assert a3.generation == 3 and len(a3.members) == 1
        close(shard)

    run(scenario())


def test_protocol_selection_by_votes_and_inconsistent_protocols():
    async def scenario():
        shard = make_shard()
        group = ClassicGroup("g")
        shard.groups["g"] = group
        r1 = await do(shard, join, request(protocols=[("range", b""), ("roundrobin", b"")],
                                           version=3))
        r2 = await do(shard, join, request(protocols=[("roundrobin", b""), ("range", b"")],
                                           version=3))
        r3 = await do(shard, join, request(protocols=[("roundrobin", b""), ("sticky", b"")],
                                           version=3))
        results = [await resolve(r) for r in (r1, r2, r3)]
        assert {r.protocol_name for r in results} == {"roundrobin"}
        bad = await do(shard, join, request(protocols=[("other", b"")], version=3))
        assert bad.error is Errors.INCONSISTENT_GROUP_PROTOCOL
        close(shard)

    run(scenario())


def test_initial_rebalance_delay_extends_while_members_join():
    async def scenario():
        shard = make_shard(**{"group.initial.rebalance.delay.ms": 200})
        started = time.monotonic()
        a = await do(shard, join, request(version=3, rebalance=5000))
        await asyncio.sleep(0.1)
        b = await do(shard, join, request(version=3, rebalance=5000))
        ra, rb = await resolve(a), await resolve(b)
        elapsed = time.monotonic() - started
        # First window 0-200 ms saw a new member: one more 200 ms window.
        assert 0.35 < elapsed < 1.5, elapsed
        assert ra.generation == rb.generation == 1
        close(shard)

    run(scenario())


def test_session_expiry_removes_member_and_empties_group():
    async def scenario():
        shard = make_shard()
        a = await join_member(shard, session=100)
        await do(shard, sync.sync, "g", 1, a.member_id, None, None, None, {a.member_id: b"x"})
        await asyncio.sleep(0.3)
        group = shard.groups["g"]
        assert group.is_in(S.EMPTY) and not group.members and group.generation == 2
        assert await do(shard, heartbeat.heartbeat, "g", 1, a.member_id, None) is \
            Errors.UNKNOWN_MEMBER_ID
        # The emptied group is on the log; a reload sees it.
        assert reload(shard).groups["g"].is_in(S.EMPTY)

    run(scenario())


def test_static_member_rejoins_without_rebalance_and_old_id_is_fenced():
    async def scenario():
        shard = make_shard()
        a = await resolve(await do(shard, join, request(instance="i-a")))
        await do(shard, sync.sync, "g", 1, a.member_id, "i-a", None, None, {a.member_id: b"mine"})
        # Restarted: no member id.
        again = await resolve(await do(shard, join, request(instance="i-a")))
        group = shard.groups["g"]
        assert group.is_in(S.STABLE) and again.generation == 1
        assert again.member_id != a.member_id and again.skip_assignment
        result = await do(shard, sync.sync, "g", 1, again.member_id, "i-a", None, None, {})
        assert result.assignment == b"mine"
        assert await do(shard, heartbeat.heartbeat, "g", 1, a.member_id, "i-a") is \
            Errors.FENCED_INSTANCE_ID
        # An instance id the group does not know: UNKNOWN_MEMBER_ID, even with a valid member id.
        assert await do(shard, heartbeat.heartbeat, "g", 1, again.member_id, "i-x") is \
            Errors.UNKNOWN_MEMBER_ID
        assert (await do(shard, join, request(member_id=a.member_id, instance="i-a"))).error is \
            Errors.FENCED_INSTANCE_ID
        # The new member id is what a reload sees.
        assert list(reload(shard).groups["g"].members) == [again.member_id]
        close(shard)

    run(scenario())


def test_member_heartbeating_through_a_rebalance_stays_until_the_rebalance_timeout():
    """Kafka's classic protocol: a member busy between polls keeps heartbeating (the answer is
    REBALANCE_IN_PROGRESS) and keeps its membership past its session timeout; only the rebalance
    timeout (its max.poll.interval.ms) removes it if it does not rejoin."""
    async def scenario():
        shard = make_shard()
        a = await join_member(shard, session=300, rebalance=1500)
        await do(shard, sync.sync, "g", 1, a.member_id, None, None, None, {a.member_id: b"A"})
        b_first = await do(shard, join, request(session=300, rebalance=1500))
        b_join = await do(shard, join, request(member_id=b_first.member_id, session=300,
                                               rebalance=1500))
        for _ in range(15):  # 900 ms: three session timeouts
            await asyncio.sleep(0.06)
            assert await do(shard, heartbeat.heartbeat, "g", 1, a.member_id, None) is \
                Errors.REBALANCE_IN_PROGRESS
        assert not b_join.done() and a.member_id in shard.groups["g"].members
        b = await resolve(b_join)
        assert (b.generation, b.leader, [m[0] for m in b.members]) == \
            (2, b.member_id, [b.member_id])
        assert await do(shard, heartbeat.heartbeat, "g", 1, a.member_id, None) is \
            Errors.UNKNOWN_MEMBER_ID
        close(shard)

    run(scenario())


def test_rebalance_waits_again_when_no_member_rejoined():
    """Only a static member is left and it did not rejoin: Kafka does not start a generation
    nobody joined; it waits another rebalance timeout (completeClassicGroupJoin)."""
    async def scenario():
        shard = make_shard()
        s = await resolve(await do(shard, join, request(instance="i-s", session=2000,
                                                        rebalance=150)))
        await do(shard, sync.sync, "g", 1, s.member_id, "i-s", None, None, {s.member_id: b"S"})
        d = await do(shard, join, request(version=3, session=2000, rebalance=150))
        group = shard.groups["g"]
        assert group.is_in(S.PREPARING_REBALANCE)
        d_member = next(m for m in group.members if m != s.member_id)
        await do(shard, leave.leave, "g", [(d_member, None, "bye")])
        assert (await resolve(d)).error is Errors.UNKNOWN_MEMBER_ID
        await asyncio.sleep(0.4)  # more than two rebalance timeouts
        assert group.is_in(S.PREPARING_REBALANCE) and group.generation == 1
        assert await do(shard, heartbeat.heartbeat, "g", 1, s.member_id, "i-s") is \
            Errors.REBALANCE_IN_PROGRESS
        again = await resolve(await do(shard, join, request(member_id=s.member_id,
                                                            instance="i-s", rebalance=150)))
        assert (again.error, again.generation) == (Errors.NONE, 2)
        close(shard)

    run(scenario())


def test_group_max_size():
    async def scenario():
        shard = make_shard(**{"group.max.size": 1})
        a = await join_member(shard)
        # Kafka's acceptJoiningMember: a stable full group refuses new members at once...
        assert (await do(shard, join, request())).error is Errors.GROUP_MAX_SIZE_REACHED
        # ...but a member of the group may always rejoin.
        rejoined = await resolve(await do(shard, join, request(member_id=a.member_id)))
        assert rejoined.error is Errors.NONE
        close(shard)

    run(scenario())


# --- offsets ------------------------------------------------------------------------------------

def test_commit_validation_and_standalone_commits():
    async def scenario():
        shard = make_shard()
        # Standalone commits (generation -1) create an Empty group.
        offsets.validate_commit(shard, "solo", -1, "", None, True)
        assert await do(shard, offsets.commit, "solo",
                        [("t", 0, rec.ZERO_UUID, 5, -1, "meta")]) == \
            [Errors.NONE]
        assert shard.groups["solo"].is_in(S.EMPTY)
        for not_found, error in [(False, Errors.ILLEGAL_GENERATION),
                                 (True, Errors.GROUP_ID_NOT_FOUND)]:
            with pytest.raises(KafkaError) as e:
                offsets.validate_commit(shard, "nogroup", 3, "m", None, not_found)
            assert e.value.error is error
        assert await do(shard, offsets.commit, "solo",
                        [("t", 1, rec.ZERO_UUID, 1, -1, "x" * 5000)]) == \
            [Errors.OFFSET_METADATA_TOO_LARGE]
        a = await join_member(shard)
        for generation, member, error in [(1, "nobody", Errors.UNKNOWN_MEMBER_ID),
                                          (7, a.member_id, Errors.ILLEGAL_GENERATION),
                                          (-1, "", Errors.UNKNOWN_MEMBER_ID),
                                          (1, a.member_id, Errors.REBALANCE_IN_PROGRESS)]:
            with pytest.raises(KafkaError) as e:
                offsets.validate_commit(shard, "g", generation, member, None, True)
            assert e.value.error is error
        # A transactional commit without a member is taken in any state, even mid-rebalance.
        offsets.validate_commit(shard, "g", -1, "", None, True, transactional=True)
        await do(shard, sync.sync, "g", 1, a.member_id, None, None, None, {})
        offsets.validate_commit(shard, "g", 1, a.member_id, None, True)
        fetched = offsets.fetch(shard, "solo", [("t", [0, 1])])
        assert [(p, c.offset if c else None) for _, p, c in fetched] == [(0, 5), (1, None)]
        fresh = reload(shard)
        assert fresh.offsets["solo"][("t", 0)].metadata == "meta"
        close(shard)

    run(scenario())


def test_offset_expiry_and_delete():
    async def scenario():
        shard = make_shard()
        await do(shard, offsets.commit, "solo", [("t", 0, rec.ZERO_UUID, 5, -1, "")])
        now = shard.offsets["solo"][("t", 0)].commit_timestamp
        assert await do(shard, offsets.expire, 1000, now + 999) == 0
        assert await do(shard, offsets.expire, 1000, now + 1000) == 1
        assert "solo" not in shard.offsets and "solo" not in shard.groups
        assert "solo" not in reload(shard).groups
        # OffsetDelete and DeleteGroups.
        await do(shard, offsets.commit, "e", [("t", 0, rec.ZERO_UUID, 1, -1, ""),
                                    ("u", 0, rec.ZERO_UUID, 2, -1, "")])
        assert await do(shard, offsets.delete, "e", [("t", 0)]) == (Errors.NONE, [Errors.NONE])
        assert list(shard.offsets["e"]) == [("u", 0)]
        missing = await do(shard, offsets.delete, "missing", [("t", 0)])
        assert missing[0] is Errors.GROUP_ID_NOT_FOUND
        a = await join_member(shard, protocols=[("range", b"")])
        assert await do(shard, admin.delete_group, "g") is Errors.NON_EMPTY_GROUP
        assert await do(shard, admin.delete_group, "e") is Errors.NONE
        assert await do(shard, admin.delete_group, "e") is Errors.GROUP_ID_NOT_FOUND
        assert "e" not in reload(shard).groups and "e" not in reload(shard).offsets
        assert [g for g, _, _, _ in admin.list_groups(shard, {"completingrebalance"})] == ["g"]
        assert a.error is Errors.NONE
        close(shard)

    run(scenario())
