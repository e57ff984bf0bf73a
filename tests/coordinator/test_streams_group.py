"""Streams groups (KIP-1071) on the coordinator runtime: the topology and its internal topics,
epochs, reconciliation (a task goes to its new owner only once the old owner revoked it), bad
input with Kafka's errors, and rebuilding the group from its records (a restart)."""

from __future__ import annotations

import asyncio

import pytest

from kbroker.coordinator.group.streams.group import StreamsGroupState as G
from kbroker.coordinator.group.streams.heartbeat import HeartbeatRequest, heartbeat
from kbroker.coordinator.group.streams.member import MemberState, TaskTuple
from kbroker.coordinator.group.streams.topology import Status
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.protocol.messages.streams_group_heartbeat import StreamsGroupHeartbeatRequest as Q
from tests.coordinator.consumer_fakes import make_consumer_shard, reload_consumer_shard

STREAMS = {"group.streams.initial.rebalance.delay.ms": 0,
           "group.streams.assignment.interval.ms": 0}


def topology(epoch=0, changelog_partitions=0):
    """Word count: subtopology 0 reads ``in`` and writes the repartition topic, 1 reads it and
    keeps a store with a changelog."""
    return Q.Topology(epoch=epoch, subtopologies=[
        Q.Subtopology(subtopology_id="0", source_topics=["in"],
                      repartition_sink_topics=["app-rep"]),
        Q.Subtopology(subtopology_id="1",
                      repartition_source_topics=[Q.TopicInfo(name="app-rep")],
                      state_changelog_topics=[Q.TopicInfo(name="app-store-changelog",
                                                          partitions=changelog_partitions)])])


async def hb(shard, member="m1", epoch=0, owned=None, process=None, **kw):
    if epoch == 0:
        kw.setdefault("rebalance_timeout_ms", 30000)
        kw.setdefault("topology", topology())
    req = HeartbeatRequest(group_id=kw.pop("group", "app"), member_id=member, member_epoch=epoch,
                           owned=owned, process_id=process or f"process-{member}", **kw)
    return await shard.runtime.write(0, lambda s: heartbeat(s, req))


def owned(result) -> TaskTuple:
    t = result.tasks
    return TaskTuple.of(t.active, t.standby, t.warmup)


def active(result) -> dict:
    return {s: sorted(p) for s, p in result.tasks.active.items()}


def run(coro):
    return asyncio.run(coro)


def test_missing_source_topics_then_internal_topics_then_tasks():
    async def main():
        shard = make_consumer_shard(**STREAMS)
        r = await hb(shard)
        assert [s for s, _ in r.status] == [Status.MISSING_SOURCE_TOPICS]
        assert r.status[0][1] == "Source topics in are missing."
        assert r.tasks is not None and r.tasks.is_empty
        assert shard.groups["app"].state is G.NOT_READY
        shard.controller.add_topic("in", 3)
        r = await hb(shard, epoch=r.member_epoch, owned=TaskTuple())
        assert [s for s, _ in r.status] == [Status.MISSING_INTERNAL_TOPICS]
        assert {n: t.partitions for n, t in r.topics_to_create.items()} == {
            "app-rep": 3, "app-store-changelog": 3}
        shard.controller.add_topic("app-rep", 3)
        shard.controller.add_topic("app-store-changelog", 3)
        r = await hb(shard, epoch=r.member_epoch, owned=TaskTuple())
        assert r.status == [] and r.topics_to_create == {}
        assert active(r) == {"0": [0, 1, 2], "1": [0, 1, 2]}
        group = shard.groups["app"]
        assert group.state is G.STABLE
        assert group.validated_topology_epoch == 0
        shard.runtime.unload(0)
    run(main())


async def _ready_shard():
    shard = make_consumer_shard(**STREAMS)
    for name in ("in", "app-rep", "app-store-changelog"):
        shard.controller.add_topic(name, 4)
    return shard


def test_second_member_gets_tasks_only_after_revocation():
    async def main():
        shard = await _ready_shard()
        a = await hb(shard, member="a")
        assert active(a) == {"0": [0, 1, 2, 3], "1": [0, 1, 2, 3]}
        b = await hb(shard, member="b")
        # b's tasks are still a's: b waits for them.
        assert b.tasks.is_empty
        assert shard.groups["app"].members["b"].state is MemberState.UNRELEASED_TASKS
        # a learns it must give up half of its tasks, and stays at its epoch meanwhile.
        a2 = await hb(shard, member="a", epoch=a.member_epoch, owned=owned(a))
        assert a2.member_epoch == a.member_epoch
        assert shard.groups["app"].members["a"].state is MemberState.UNREVOKED_TASKS
        kept = a2.tasks
        assert sum(len(p) for p in kept.active.values()) == 4
        # a revokes: it moves to the new epoch; then b gets what a released.
        a3 = await hb(shard, member="a", epoch=a2.member_epoch, owned=owned(a2))
        assert a3.member_epoch == b.member_epoch
        b2 = await hb(shard, member="b", epoch=b.member_epoch, owned=TaskTuple())
        assert sum(len(p) for p in b2.tasks.active.values()) == 4
        mine = {(s, p) for s, ps in b2.tasks.active.items() for p in ps}
        theirs = {(s, p) for s, ps in kept.active.items() for p in ps}
        assert not mine & theirs
        assert shard.groups["app"].state is G.STABLE
        shard.runtime.unload(0)
    run(main())


def test_leave_and_fence_and_unknown_member():
    async def main():
        shard = await _ready_shard()
        a = await hb(shard, member="a")
        with pytest.raises(KafkaError) as e:
            await hb(shard, member="a", epoch=a.member_epoch + 5, owned=owned(a))
        assert e.value.error is Errors.FENCED_MEMBER_EPOCH
        with pytest.raises(KafkaError) as e:
            await hb(shard, member="zz", epoch=1, owned=TaskTuple())
        assert e.value.error is Errors.UNKNOWN_MEMBER_ID
        with pytest.raises(KafkaError) as e:
            await hb(shard, member="zz", epoch=1, group="nope", owned=TaskTuple())
        assert e.value.error is Errors.GROUP_ID_NOT_FOUND
        epoch = shard.groups["app"].group_epoch
        left = await hb(shard, member="a", epoch=-1)
        assert left.member_epoch == -1
        group = shard.groups["app"]
        assert group.group_epoch == epoch + 1 and not group.members
        assert group.state is G.EMPTY
        shard.runtime.unload(0)
    run(main())


def test_topology_changes_and_invalid_topologies():
    async def main():
        shard = await _ready_shard()
        await hb(shard, member="a")
        other = Q.Topology(epoch=0, subtopologies=[
            Q.Subtopology(subtopology_id="0", source_topics=["in"])])
        with pytest.raises(KafkaError) as e:
            await hb(shard, member="b", topology=other)
        assert e.value.error is Errors.INVALID_REQUEST
        assert e.value.message == "Topology updates are not supported yet."
        loop = Q.Topology(epoch=0, subtopologies=[
            Q.Subtopology(subtopology_id="0",
                          repartition_source_topics=[Q.TopicInfo(name="x")],
                          repartition_sink_topics=["y"]),
            Q.Subtopology(subtopology_id="1",
                          repartition_source_topics=[Q.TopicInfo(name="y")],
                          repartition_sink_topics=["x"])])
        with pytest.raises(KafkaError) as e:
            await hb(shard, member="c", group="loop", topology=loop)
        assert e.value.error is Errors.STREAMS_INVALID_TOPOLOGY
        hostile = Q.Topology(epoch=0, subtopologies=[
            Q.Subtopology(subtopology_id="0", source_topics=["in"], copartition_groups=[
                Q.CopartitionGroup(source_topics=[0, 7])])])
        with pytest.raises(KafkaError) as e:
            await hb(shard, member="d", group="hostile", topology=hostile)
        assert e.value.error is Errors.STREAMS_INVALID_TOPOLOGY
        shard.runtime.unload(0)
    run(main())


def test_records_rebuild_the_group():
    async def main():
        shard = await _ready_shard()
        a = await hb(shard, member="a")
        b = await hb(shard, member="b")
        a2 = await hb(shard, member="a", epoch=a.member_epoch, owned=owned(a))
        await hb(shard, member="a", epoch=a2.member_epoch, owned=owned(a2))
        await hb(shard, member="b", epoch=b.member_epoch, owned=TaskTuple())
        fresh = reload_consumer_shard(shard)
        before, after = shard.groups["app"], fresh.groups["app"]
        assert after.members == before.members
        assert after.target == before.target
        assert after.topology == before.topology
        assert (after.group_epoch, after.assignment_epoch, after.metadata_hash,
                after.validated_topology_epoch, after.last_assignment_configs) == (
            before.group_epoch, before.assignment_epoch, before.metadata_hash,
            before.validated_topology_epoch, before.last_assignment_configs)
        shard.runtime.unload(0)
    run(main())


def test_standby_replicas_from_the_group_config():
    async def main():
        shard = await _ready_shard()
        shard.test_group_configs["app"] = {"streams.num.standby.replicas": "1"}  # as the image stores it
        a = await hb(shard, member="a")
        b = await hb(shard, member="b")
        for _ in range(3):
            a = await hb(shard, member="a", epoch=a.member_epoch, owned=owned(a)) \
                if a.tasks is not None else a
            b = await hb(shard, member="b", epoch=b.member_epoch, owned=owned(b)) \
                if b.tasks is not None else b
        group = shard.groups["app"]
        assert group.last_assignment_configs == {"num.standby.replicas": "1"}
        standby = {m: t.standby for m, t in group.target.items()}
        assert standby["a"] and standby["b"]  # stateful subtopology 1 has standbys
        shard.runtime.unload(0)
    run(main())


def test_static_member_temporary_leave_and_rejoin_keeps_its_tasks():
    async def main():
        shard = await _ready_shard()
        a = await hb(shard, member="a", instance_id="i-a")
        b = await hb(shard, member="b", instance_id="i-b")
        for _ in range(3):
            a = await hb(shard, member="a", epoch=a.member_epoch, owned=owned(a),
                         instance_id="i-a") if a.tasks is not None else \
                await hb(shard, member="a", epoch=a.member_epoch, instance_id="i-a")
            b = await hb(shard, member="b", epoch=b.member_epoch, owned=owned(b),
                         instance_id="i-b") if b.tasks is not None else \
                await hb(shard, member="b", epoch=b.member_epoch, instance_id="i-b")
        group = shard.groups["app"]
        assert group.state is G.STABLE
        epoch, tasks_b = group.group_epoch, group.members["b"].assigned.active_ids()
        left = await hb(shard, member="b", epoch=-2, instance_id="i-b")
        assert left.member_epoch == -2
        assert shard.groups["app"].group_epoch == epoch  # no rebalance
        # Another instance may not take the instance id while it is held...
        with pytest.raises(KafkaError) as e:
            await hb(shard, member="a2", instance_id="i-a")
        assert e.value.error is Errors.UNRELEASED_INSTANCE_ID
        # ... the one that left comes back as a new member with the same tasks.
        b2 = await hb(shard, member="b2", instance_id="i-b", process="process-b")
        group = shard.groups["app"]
        assert "b" not in group.members and group.members["b2"].instance_id == "i-b"
        assert group.group_epoch == epoch
        assert {s: frozenset(p) for s, p in b2.tasks.active.items()} == dict(tasks_b)
        # The old member id is fenced.
        with pytest.raises(KafkaError) as e:
            await hb(shard, member="b", epoch=b.member_epoch, instance_id="i-b")
        assert e.value.error is Errors.FENCED_INSTANCE_ID
        shard.runtime.unload(0)
    run(main())


def test_task_offsets_are_kept_and_checked():
    async def main():
        shard = await _ready_shard()
        a = await hb(shard, member="a", task_offsets=[("1", 0, 42)], task_end_offsets=[])
        group = shard.groups["app"]
        assert group.offsets_of("a") == ({"1": {0: 42}}, {})
        with pytest.raises(KafkaError) as e:
            await hb(shard, member="a", epoch=a.member_epoch, owned=owned(a),
                     task_offsets=[("1", 0, 1), ("1", 0, 2)])
        assert e.value.error is Errors.INVALID_REQUEST
        assert e.value.message == ("Task offsets contain a duplicate entry for subtopology 1 "
                                   "and partition 0.")
        # A heartbeat without them keeps the last ones.
        await hb(shard, member="a", epoch=a.member_epoch, owned=owned(a))
        assert shard.groups["app"].offsets_of("a") == ({"1": {0: 42}}, {})
        shard.runtime.unload(0)
    run(main())


def test_missing_client_tags_status():
    async def main():
        shard = await _ready_shard()
        shard.test_group_configs["app"] = {"streams.rack.aware.assignment.tags": "zone"}  # as the image stores it
        r = await hb(shard, member="a", client_tags={"rack": "r1"})
        assert (Status.MISSING_CLIENT_TAGS,
                "Missing required client tags for rack-aware standby assignment: [zone]. "
                "Configure them via 'client.tag.<tagKey>' in your Streams config.") in r.status
        assert shard.groups["app"].last_assignment_configs == {
            "num.standby.replicas": "0", "rack.aware.assignment.tags": "zone"}
        r = await hb(shard, member="b", client_tags={"zone": "z1"})
        assert all(s != Status.MISSING_CLIENT_TAGS for s, _ in r.status)
        shard.runtime.unload(0)
    run(main())


def test_shutdown_request_reaches_every_member_until_the_group_empties():
    async def main():
        shard = await _ready_shard()
        a = await hb(shard, member="a")
        b = await hb(shard, member="b")
        await hb(shard, member="a", epoch=a.member_epoch, owned=owned(a),
                 shutdown_application=True)
        r = await hb(shard, member="b", epoch=b.member_epoch, owned=TaskTuple())
        assert (Status.SHUTDOWN_APPLICATION, "Streams group member a encountered a fatal error "
                "and requested a shutdown for the entire application.") in r.status
        group = shard.groups["app"]
        await hb(shard, member="a", epoch=-1)
        await hb(shard, member="b", epoch=-1)
        assert group.shutdown_request_member_id is None and not group.members
        shard.runtime.unload(0)
    run(main())


def test_initial_rebalance_delay_then_assignment():
    async def main():
        shard = make_consumer_shard(**{**STREAMS, "group.streams.initial.rebalance.delay.ms": 100})
        for name in ("in", "app-rep", "app-store-changelog"):
            shard.controller.add_topic(name, 2)
        a = await hb(shard, member="a")
        assert (Status.ASSIGNMENT_DELAYED,
                "Assignment delayed due to the configured initial rebalance delay.") in a.status
        assert a.tasks.is_empty
        await asyncio.sleep(0.3)  # the delayed assignment is computed by its timer
        group = shard.groups["app"]
        assert group.assignment_epoch == group.group_epoch
        r = await hb(shard, member="a", epoch=a.member_epoch, owned=TaskTuple())
        assert r.status == [] and active(r) == {"0": [0, 1], "1": [0, 1]}
        shard.runtime.unload(0)
    run(main())
