"""Consumer groups (KIP-848) on the coordinator runtime: heartbeats, epochs, reconciliation
(revoke before assign; a partition goes to its new owner only once released), static members,
leaving and fencing, regexes, and rebuilding everything from the records (a restart)."""

from __future__ import annotations

import asyncio

import pytest

from kbroker.coordinator.group.consumer.group import ConsumerGroupState as G
from kbroker.coordinator.group.consumer.heartbeat import HeartbeatRequest, heartbeat
from kbroker.coordinator.group.consumer.member import MemberState
from kbroker.protocol.errors import Errors, KafkaError
from tests.coordinator.consumer_fakes import make_consumer_shard, reload_consumer_shard


async def hb(shard, group="g", member="m1", epoch=0, topics=None, owned=None, **kw):
    if epoch == 0:
        kw.setdefault("rebalance_timeout_ms", 30000)
        if topics is None and kw.get("subscribed_topic_regex") is None:
            topics = ["t"]
        if owned is None:
            owned = []
    req = HeartbeatRequest(group_id=group, member_id=member, member_epoch=epoch,
                           subscribed_topic_names=topics, owned=owned, **kw)
    return await shard.runtime.write(0, lambda s: heartbeat(s, req))


def owned_of(response):
    return [(t, sorted(p)) for t, p in (response.assignment or {}).items()]


def parts(response, topic_id):
    return sorted((response.assignment or {}).get(topic_id, ()))


def run(coro):
    return asyncio.run(coro)


def test_first_member_gets_every_partition():
    async def main():
        shard = make_consumer_shard()
        t = shard.controller.add_topic("t", 4)
        r = await hb(shard)
        assert r.member_epoch == 2  # a group starts at epoch 1, its first member bumps it
        assert parts(r, t) == [0, 1, 2, 3]
        assert r.heartbeat_interval_ms == 5000
        group = shard.groups["g"]
        assert group.state is G.STABLE and group.group_epoch == 2 == group.assignment_epoch
        # A plain heartbeat changes nothing and carries no assignment.
        r2 = await hb(shard, epoch=2, topics=None, owned=None)
        assert r2.member_epoch == 2 and r2.assignment is None
        shard.runtime.unload(0)
    run(main())


def test_second_member_revokes_before_assignment():
    async def main():
        shard = make_consumer_shard()
        t = shard.controller.add_topic("t", 4)
        a = await hb(shard, member="a")
        b = await hb(shard, member="b")
        # b is at the new epoch but gets nothing a still owns: UNRELEASED.
        assert b.member_epoch == 3 and parts(b, t) == []
        group = shard.groups["g"]
        assert group.members["b"].state is MemberState.UNRELEASED_PARTITIONS
        assert group.state is G.RECONCILING
        # a must revoke two partitions: it stays at epoch 2 until it reports them gone.
        a2 = await hb(shard, member="a", epoch=2, owned=owned_of(a))
        assert a2.member_epoch == 2 and len(parts(a2, t)) == 2
        assert group.members["a"].state is MemberState.UNREVOKED_PARTITIONS
        b2 = await hb(shard, member="b", epoch=3, owned=[])
        assert parts(b2, t) == [] and b2.member_epoch == 3
        a3 = await hb(shard, member="a", epoch=2, owned=owned_of(a2))
        assert a3.member_epoch == 3
        assert a3.assignment is None  # unchanged since the revocation
        b3 = await hb(shard, member="b", epoch=3, owned=[])
        assert sorted(parts(a2, t) + parts(b3, t)) == [0, 1, 2, 3]
        assert len(parts(b3, t)) == 2
        assert group.state is G.STABLE
        shard.runtime.unload(0)
    run(main())


def test_epoch_fencing():
    async def main():
        shard = make_consumer_shard()
        shard.controller.add_topic("t", 2)
        await hb(shard, member="a")
        with pytest.raises(KafkaError) as err:
            await hb(shard, member="a", epoch=7, topics=None)
        assert err.value.error is Errors.FENCED_MEMBER_EPOCH
        with pytest.raises(KafkaError) as err:
            await hb(shard, member="zz", epoch=3, topics=None)
        assert err.value.error is Errors.UNKNOWN_MEMBER_ID
        with pytest.raises(KafkaError) as err:
            await hb(shard, group="nope", member="a", epoch=3, topics=None)
        assert err.value.error is Errors.GROUP_ID_NOT_FOUND
        shard.runtime.unload(0)
    run(main())


def test_leave_bumps_the_epoch_and_frees_partitions():
    async def main():
        shard = make_consumer_shard()
        t = shard.controller.add_topic("t", 4)
        a = await hb(shard, member="a")
        b = await hb(shard, member="b")
        left = await hb(shard, member="a", epoch=-1, topics=None)
        assert left.member_epoch == -1
        group = shard.groups["g"]
        assert list(group.members) == ["b"] and group.group_epoch == 4
        b2 = await hb(shard, member="b", epoch=b.member_epoch, owned=[])
        assert parts(b2, t) == [0, 1, 2, 3] and b2.member_epoch == 4
        shard.runtime.unload(0)
    run(main())


def test_static_member_temporary_leave_and_rejoin_keeps_assignment():
    async def main():
        shard = make_consumer_shard()
        t = shard.controller.add_topic("t", 4)
        a = await hb(shard, member="a", instance_id="i1")
        b = await hb(shard, member="b", instance_id="i2")
        a = await hb(shard, member="a", epoch=a.member_epoch, owned=owned_of(a), instance_id="i1")
        a = await hb(shard, member="a", epoch=a.member_epoch, owned=owned_of(a), instance_id="i1")
        b = await hb(shard, member="b", epoch=b.member_epoch, owned=[], instance_id="i2")
        epoch = shard.groups["g"].group_epoch
        kept = sorted(shard.groups["g"].members["a"].assigned[t])
        assert len(kept) == 2
        with pytest.raises(KafkaError) as err:  # the instance id is still in use
            await hb(shard, member="a2", instance_id="i1")
        assert err.value.error is Errors.UNRELEASED_INSTANCE_ID
        left = await hb(shard, member="a", epoch=-2, topics=None, instance_id="i1")
        assert left.member_epoch == -2
        back = await hb(shard, member="a2", instance_id="i1")
        assert parts(back, t) == kept
        group = shard.groups["g"]
        assert group.group_epoch == epoch  # no rebalance
        assert "a" not in group.members and group.static_members["i1"] == "a2"
        shard.runtime.unload(0)
    run(main())


def test_regex_subscription_picks_up_new_topics():
    async def main():
        shard = make_consumer_shard()
        t1 = shard.controller.add_topic("orders-1", 2)
        t3 = shard.controller.add_topic("other", 2)
        # The regex is resolved off the heartbeat path (a shard operation of its own, Kafka's
        # order): the joining heartbeat assigns the literal topic only, a later one the rest.
        r = await hb(shard, member="a", topics=["other"], subscribed_topic_regex="orders-.*")
        assert owned_of(r) == [(t3, [0, 1])]
        assert "orders-.*" not in shard.groups["g"].resolved
        for _ in range(20):  # the scheduled resolution runs
            await asyncio.sleep(0)
        assert shard.groups["g"].resolved["orders-.*"].topics == {"orders-1"}
        r = await hb(shard, member="a", epoch=r.member_epoch, topics=None, owned=owned_of(r))
        assert parts(r, t1) == [0, 1] and len(r.assignment) == 2
        with pytest.raises(KafkaError) as err:
            await hb(shard, member="b", topics=None, subscribed_topic_regex="orders-(")
        assert err.value.error is Errors.INVALID_REGULAR_EXPRESSION
        # A topic created later: the group's regexes are resolved again.
        t2 = shard.controller.add_topic("orders-2", 3)
        shard.topic_changes.version += 1
        shard.topic_changes.created_version = shard.topic_changes.version
        from kbroker.coordinator.group.consumer import subscription
        from kbroker.coordinator.runtime import CoordinatorResult, now_ms
        await shard.runtime.write(0, lambda s: CoordinatorResult(
            subscription.refresh_regexes(s, "g", now_ms() + 20_000)))
        group = shard.groups["g"]
        assert group.resolved["orders-.*"].topics == {"orders-1", "orders-2"}
        r2 = await hb(shard, member="a", epoch=r.member_epoch, topics=None, owned=owned_of(r))
        assert parts(r2, t2) == [0, 1, 2]
        shard.runtime.unload(0)
    run(main())


def test_records_rebuild_the_group():
    async def main():
        shard = make_consumer_shard()
        shard.controller.add_topic("t", 4)
        a = await hb(shard, member="a")
        b = await hb(shard, member="b", instance_id="i2")
        await hb(shard, member="a", epoch=a.member_epoch, owned=owned_of(a))
        fresh = reload_consumer_shard(shard)
        before, after = shard.groups["g"], fresh.groups["g"]
        assert after.members == before.members
        assert after.target == before.target
        assert after.partition_epochs == before.partition_epochs
        assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch,
                                                               before.assignment_epoch)
        assert after.static_members == {"i2": "b"}
        assert after.state is before.state
        shard.runtime.unload(0)
    run(main())


# --- online migration ----------------------------------------------------------------------------

def _subscription(topics, owned=()):
    from kbroker.protocol.messages.consumer_protocol_subscription import \
        ConsumerProtocolSubscription as S
    body = S(topics=list(topics), user_data=None, owned_partitions=[
        S.TopicPartition(topic=t, partitions=list(p)) for t, p in owned], generation_id=-1,
        rack_id=None)
    return (3).to_bytes(2, "big") + body.to_bytes(3)


def _assignment(parts):
    from kbroker.coordinator.group.consumer.classic_protocol import decode_assignment
    a = decode_assignment(parts)
    return {tp.topic: sorted(tp.partitions) for tp in a.assigned_partitions}


async def _resolve(value):
    while hasattr(value, "__await__"):
        value = await value
    return value


def _classic_join(shard, member_id, topics=("t",), version=9, instance=None, owned=()):
    from kbroker.coordinator.group.join import JoinRequest, join
    req = JoinRequest(group_id="g", member_id=member_id, group_instance_id=instance,
                      protocol_type="consumer",
                      protocols=[("range", _subscription(topics, owned))],
                      session_timeout_ms=10000, rebalance_timeout_ms=10000, client_id="c",
                      client_host="/h", version=version)
    return shard.runtime.write(0, lambda s: join(s, req))


def test_rolling_upgrade_and_downgrade():
    async def main():
        from kbroker.coordinator.group import heartbeat as classic_heartbeat, sync
        shard = make_consumer_shard(**{"group.initial.rebalance.delay.ms": 0})
        t = shard.controller.add_topic("t", 4)
        # A classic group, Stable with an assignment.
        j1 = await _resolve(await _classic_join(shard, "", version=3))
        assert j1.error is Errors.NONE
        classic = shard.groups["g"]
        from kbroker.coordinator.group.consumer.classic_protocol import encode_assignment
        plan = {j1.member_id: encode_assignment({t: {0, 1, 2, 3}}, shard.image, 3)}
        synced = await _resolve(await shard.runtime.write(0, lambda s: sync.sync(
            s, "g", classic.generation, j1.member_id, None, None, None, plan)))
        assert synced.error is Errors.NONE
        generation = classic.generation
        # The first consumer-protocol member upgrades the group, keeping its generation.
        c = await hb(shard, member="c1")
        group = shard.groups["g"]
        assert group.group_type == "consumer"  # it replaced the classic group
        assert group.members[j1.member_id].uses_classic_protocol
        assert group.group_epoch == generation + 1
        # The classic members learn they must rejoin once the target moved.
        err = await shard.runtime.write(0, lambda s: classic_heartbeat.heartbeat(
            s, "g", generation, j1.member_id, None))
        assert err is Errors.REBALANCE_IN_PROGRESS
        rj = await _resolve(await _classic_join(shard, j1.member_id,
                                                owned=[("t", [0, 1, 2, 3])]))
        assert rj.error is Errors.NONE and rj.leader == ""
        # The classic member leaves: the group stays a consumer group with c1 alone.
        for mid in (j1.member_id,):
            from kbroker.coordinator.group import leave
            top, errs = await shard.runtime.write(0, lambda s, m=mid: leave.leave(
                s, "g", [(m, None, "test")]))
            assert errs == [Errors.NONE]
        assert list(shard.groups["g"].members) == ["c1"]
        # A classic member joins, then the consumer member leaves: back to a classic group.
        mr = await _resolve(await _classic_join(shard, "", version=9))
        assert mr.error is Errors.MEMBER_ID_REQUIRED
        cj = await _resolve(await _classic_join(shard, mr.member_id, version=9))
        assert cj.error is Errors.NONE
        await hb(shard, member="c1", epoch=-1, topics=None)
        assert shard.groups["g"].group_type == "classic" and shard.groups["g"].protocol_type == "consumer"
        shard.runtime.unload(0)
    run(main())



def test_a_group_config_outside_the_brokers_bounds_is_capped_to_them():
    """Kafka's GroupConfig.evaluate: a stored value the broker's (since changed) bounds no longer
    allow takes the nearest bound; a group without one takes the broker's value."""
    from kbroker.coordinator.group.consumer import settings
    shard = make_consumer_shard(**{"group.consumer.min.heartbeat.interval.ms": 1000,
                                   "group.consumer.max.heartbeat.interval.ms": 8000})
    shard.test_group_configs["low"] = {"consumer.heartbeat.interval.ms": "10"}
    shard.test_group_configs["high"] = {"consumer.heartbeat.interval.ms": "90000"}
    shard.test_group_configs["ok"] = {"consumer.heartbeat.interval.ms": "1500"}
    assert settings.heartbeat_interval_ms(shard, "low") == 1000
    assert settings.heartbeat_interval_ms(shard, "high") == 8000
    assert settings.heartbeat_interval_ms(shard, "ok") == 1500
    assert settings.heartbeat_interval_ms(shard, "none") == shard.config.get(
        "group.consumer.heartbeat.interval.ms")


def test_an_uncommitted_heartbeat_is_reverted_at_the_cost_of_its_group():
    """A membership write waiting for its commit journals one copy of its own group, never the
    other groups of the shard (timeline maps), and a failed commit puts the group back."""
    async def main():
        shard = make_consumer_shard()
        shard.controller.add_topic("t", 4)
        for i in range(50):
            await hb(shard, group=f"other-{i}", member=f"m{i}")
        await hb(shard)
        before = shard.durable_state()
        shard.partition.hold_commits = True
        pending = asyncio.ensure_future(hb(shard, member="m2"))  # a second member joins
        for _ in range(5):
            await asyncio.sleep(0)
        assert len(shard.groups["g"].members) == 2  # replayed, not committed
        # Undo entries: one copy of group "g" (and nothing per other group).
        assert len(shard.timeline) == 1, shard.timeline._journal
        shard.partition.fail(KafkaError(Errors.NOT_LEADER_OR_FOLLOWER))
        with pytest.raises(KafkaError):
            await pending
        after = shard.durable_state()
        # metadata_refresh is in memory (when the group's topics were last read), not durable.
        for state in (before, after):
            state[3]["g"][1].pop("metadata_refresh")  # (group type, durable view)
        assert after == before
        assert list(shard.groups["g"].members) == ["m1"] and len(shard.timeline) == 0
        shard.runtime.unload(0)
    run(main())


def test_an_upgrade_that_fails_to_commit_gives_the_classic_group_back():
    """One map holds every group: the upgrade's consumer group replaces the live classic group
    through the journal, so a failed commit puts the same classic object (members, generation)
    back, and the classic protocol goes on as before."""
    async def main():
        from kbroker.coordinator.group import heartbeat as classic_heartbeat, sync
        from kbroker.coordinator.group.consumer.classic_protocol import encode_assignment
        shard = make_consumer_shard(**{"group.initial.rebalance.delay.ms": 0})
        t = shard.controller.add_topic("t", 2)
        j1 = await _resolve(await _classic_join(shard, "", version=3))
        classic = shard.groups["g"]
        plan = {j1.member_id: encode_assignment({t: {0, 1}}, shard.image, 3)}
        synced = await _resolve(await shard.runtime.write(0, lambda s: sync.sync(
            s, "g", classic.generation, j1.member_id, None, None, None, plan)))
        assert synced.error is Errors.NONE
        before = shard.durable_state()
        shard.partition.hold_commits = True
        pending = asyncio.ensure_future(hb(shard, member="c1"))
        for _ in range(5):
            await asyncio.sleep(0)
        assert shard.groups["g"].group_type == "consumer"  # replayed, not committed
        shard.partition.fail(KafkaError(Errors.NOT_LEADER_OR_FOLLOWER))
        with pytest.raises(KafkaError):
            await pending
        assert shard.groups["g"] is classic and list(classic.members) == [j1.member_id]
        assert shard.durable_state() == before and len(shard.timeline) == 0
        shard.partition.hold_commits = False
        err = await shard.runtime.write(0, lambda s: classic_heartbeat.heartbeat(
            s, "g", classic.generation, j1.member_id, None))
        assert err is Errors.NONE
        shard.runtime.unload(0)
    run(main())
