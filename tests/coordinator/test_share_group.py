"""Share groups (KIP-932) on the coordinator runtime: joining, Kafka's errors, the share-partition
initialization that gates the assignment, partitions shared by several members, leaving,
session expiry, and the group rebuilt from its records (a restart)."""

from __future__ import annotations

import asyncio

import pytest

from kbroker.coordinator.group.share import assignor
from kbroker.coordinator.group.share.group import ShareGroupState
from kbroker.coordinator.group.share.heartbeat import HeartbeatRequest, heartbeat
from kbroker.coordinator.group.share.initialize import initialized
from kbroker.protocol.errors import Errors, KafkaError
from tests.coordinator.consumer_fakes import make_consumer_shard, reload_consumer_shard

SHARE = {"group.share.assignment.interval.ms": 0}


async def hb(shard, member="m1", epoch=0, topics=("in",), group="sg", **kw):
    req = HeartbeatRequest(group_id=group, member_id=member, member_epoch=epoch,
                           subscribed=list(topics) if topics is not None else None, **kw)
    return await shard.runtime.write(0, lambda s: heartbeat(s, req))


async def init_all(shard, result, group="sg"):
    """What the broker does with the persister's answer: record the partitions initialized."""
    topics = {t: set(p) for t, p in result.initialize.topics.items()}
    await shard.runtime.write(0, lambda s: initialized(s, group, topics))


def parts(result) -> dict:
    return {t: sorted(p) for t, p in (result.assignment or {}).items()}


def run(coro):
    return asyncio.run(coro)


def test_join_initializes_then_assigns_every_partition():
    async def main():
        shard = make_consumer_shard(**SHARE)
        tid = shard.controller.add_topic("in", 3)
        r = await hb(shard)
        assert r.member_epoch == 2 and parts(r) == {}      # epochs start at 1; nothing initialized
        assert r.initialize.topics == {tid: frozenset({0, 1, 2})}
        group = shard.groups["sg"]
        assert set(group.initializing) == {tid} and group.state is ShareGroupState.STABLE
        await init_all(shard, r)
        assert group.initializing == {} and group.initialized[tid].partitions == {0, 1, 2}
        r = await hb(shard, epoch=2, topics=None)
        assert r.member_epoch == 3 and parts(r) == {tid: [0, 1, 2]}
        assert r.initialize is None
        r = await hb(shard, epoch=3, topics=None)           # nothing changed: no assignment
        assert r.member_epoch == 3 and r.assignment is None
        shard.runtime.unload(0)
    run(main())


def test_more_members_than_partitions_share_them():
    async def main():
        shard = make_consumer_shard(**SHARE)
        tid = shard.controller.add_topic("in", 1)
        r = await hb(shard, "a")
        await init_all(shard, r)
        a = await hb(shard, "a", r.member_epoch, None)
        b = await hb(shard, "b")
        c = await hb(shard, "c")
        a = await hb(shard, "a", a.member_epoch, None)
        assert a.assignment is None                          # unchanged: not sent again
        assert parts(b) == parts(c) == {tid: [0]}
        members = shard.groups["sg"].members
        assert all(dict(m.assigned) == {tid: {0}} for m in members.values())
        assert members["a"].member_epoch == members["c"].member_epoch == c.member_epoch
        shard.runtime.unload(0)
    run(main())


def test_assignor_balances_and_sticks():
    t = "t"
    out = assignor.assign({"a": {t}, "b": {t}}, {t: set(range(4))}, {})
    assert sorted(len(v[t]) for v in out.values()) == [2, 2]
    assert out["a"][t] | out["b"][t] == set(range(4))
    again = assignor.assign({"a": {t}, "b": {t}, "c": {t}}, {t: set(range(4))}, out)
    assert sorted(len(v.get(t, ())) for v in again.values()) == [1, 1, 2]
    for m in ("a", "b"):
        assert again[m][t] <= out[m][t]                       # kept what they could
    three = assignor.assign({m: {t} for m in "abcde"}, {t: {0, 1}}, {})
    # 5 members, 2 partitions: each partition goes to ceil(5 / 2) = 3 members
    assert sorted(len(v[t]) for v in three.values()) == [1, 1, 1, 1, 2]
    assert sorted(sum(p in v[t] for v in three.values()) for p in (0, 1)) == [3, 3]
    hetero = assignor.assign({"a": {"x"}, "b": {"x", "y"}}, {"x": {0, 1}, "y": {0}}, {})
    assert hetero["b"]["y"] == {0} and len(hetero["a"]["x"]) == 1


def test_errors():
    async def main():
        shard = make_consumer_shard(**SHARE, **{"group.share.max.size": 1})
        shard.controller.add_topic("in", 1)
        with pytest.raises(KafkaError) as e:
            await hb(shard, epoch=1)
        assert e.value.error is Errors.GROUP_ID_NOT_FOUND
        assert e.value.message == "Share group sg not found."
        r = await hb(shard, "a")
        with pytest.raises(KafkaError) as e:
            await hb(shard, "b")
        assert e.value.error is Errors.GROUP_MAX_SIZE_REACHED
        with pytest.raises(KafkaError) as e:
            await hb(shard, "zz", 1, None)
        assert e.value.error is Errors.GROUP_MAX_SIZE_REACHED   # Kafka checks size first
        with pytest.raises(KafkaError) as e:
            await hb(shard, "a", r.member_epoch + 1, None)
        assert e.value.error is Errors.FENCED_MEMBER_EPOCH
        shard.runtime.unload(0)
        shard = make_consumer_shard(**SHARE)
        await hb(shard, "a")
        with pytest.raises(KafkaError) as e:
            await hb(shard, "b", 1, None)
        assert e.value.error is Errors.UNKNOWN_MEMBER_ID
        shard.runtime.unload(0)
    run(main())


def test_share_id_is_not_a_consumer_group_and_back():
    async def main():
        from kbroker.coordinator.group.consumer.heartbeat import HeartbeatRequest as CReq
        from kbroker.coordinator.group.consumer.heartbeat import heartbeat as cheartbeat
        shard = make_consumer_shard(**SHARE)
        shard.controller.add_topic("in", 1)
        await hb(shard, "a")
        req = CReq(group_id="sg", member_id="c", member_epoch=0, rebalance_timeout_ms=1000,
                   subscribed_topic_names=["in"])
        with pytest.raises(KafkaError) as e:
            await shard.runtime.write(0, lambda s: cheartbeat(s, req))
        assert e.value.error is Errors.GROUP_ID_NOT_FOUND
        assert e.value.message == "Group sg is not a consumer group."
        req = CReq(group_id="cg", member_id="c", member_epoch=0, rebalance_timeout_ms=1000,
                   subscribed_topic_names=["in"])
        await shard.runtime.write(0, lambda s: cheartbeat(s, req))
        with pytest.raises(KafkaError) as e:
            await hb(shard, "a", group="cg")
        assert e.value.error is Errors.GROUP_ID_NOT_FOUND
        assert e.value.message == "Group cg is not a share group."
        shard.runtime.unload(0)
    run(main())


def test_leave_and_reload():
    async def main():
        shard = make_consumer_shard(**SHARE)
        tid = shard.controller.add_topic("in", 2)
        r = await hb(shard, "a")
        await init_all(shard, r)
        a = await hb(shard, "a", r.member_epoch, None)
        b = await hb(shard, "b")
        a = await hb(shard, "a", a.member_epoch, None)
        assert parts(a)[tid] != parts(b)[tid]
        fresh = reload_consumer_shard(shard)
        group, again = shard.groups["sg"], fresh.groups["sg"]
        assert again.members == group.members and again.target == group.target
        assert again.group_epoch == group.group_epoch
        assert again.initialized[tid].partitions == {0, 1}
        left = await hb(shard, "b", -1, None)
        assert left.member_epoch == -1
        assert set(shard.groups["sg"].members) == {"a"}
        a = await hb(shard, "a", a.member_epoch, None)
        assert parts(a) == {tid: [0, 1]}
        await hb(shard, "a", -1, None)
        assert shard.groups["sg"].state is ShareGroupState.EMPTY
        shard.runtime.unload(0)
    run(main())


def test_session_expiry_fences_the_member():
    async def main():
        shard = make_consumer_shard(**SHARE, **{"group.share.session.timeout.ms": 200,
                                                "group.share.min.session.timeout.ms": 100,
                                                "group.share.heartbeat.interval.ms": 50,
                                                "group.share.min.heartbeat.interval.ms": 10})
        shard.controller.add_topic("in", 1)
        await hb(shard, "a")
        await asyncio.sleep(0.5)
        assert shard.groups["sg"].members == {}
        shard.runtime.unload(0)
    run(main())


def test_deleted_topic_leaves_the_state_metadata():
    async def main():
        from kbroker.coordinator.group.share.initialize import forget_deleted_topics
        from kbroker.coordinator.runtime import CoordinatorResult
        shard = make_consumer_shard(**SHARE)
        tid = shard.controller.add_topic("in", 2)
        other = shard.controller.add_topic("keep", 1)
        r = await hb(shard, topics=("in", "keep"))
        await init_all(shard, r)
        group = shard.groups["sg"]
        assert set(group.initialized) == {tid, other}
        await shard.runtime.write(0, lambda s: CoordinatorResult(forget_deleted_topics(s, {tid})))
        assert set(group.initialized) == {other}
        assert set(reload_consumer_shard(shard).groups["sg"].initialized) == {other}
        shard.runtime.unload(0)
    run(main())
