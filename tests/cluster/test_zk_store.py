"""The ZooKeeper metadata store against a real server: Kafka's znode layout and JSON, deltas
committed as conditional transactions that fence a stale writer, chroot."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from kbroker.metadata.controller import Controller, NewTopic
from kbroker.metadata.delta import Assignment, MetadataDelta
from kbroker.metadata.image import MISSING_STATE, BrokerInfo, PartitionState, TopicMetadata
from kbroker.metadata.store import AlreadyExistsError, FencedError, StaleMetadataError
from kbroker.metadata.topic_policy import initial_states
from kbroker.metadata.zk import znodes as zn
from kbroker.metadata.zk.store import ZkMetadataStore
from kbroker.protocol.errors import Errors, KafkaError

run = asyncio.run


def _json(client, path):
    data, _ = client.get(path)
    return json.loads(data)


def _topic(name="orders", replicas=((1, 2, 3), (2, 3, 1)), configs=None):
    return TopicMetadata(name, uuid.uuid4(), replicas, configs or {"retention.ms": "1000"},
                         initial_states(replicas, 0))


def opened(clients, node_id=1, cluster_id=None) -> ZkMetadataStore:
    return run(ZkMetadataStore.open(clients(), node_id, cluster_id))


def commit(store, **changes):
    return run(store.commit(MetadataDelta(**changes)))


def create(store, topic):
    return commit(store, created={topic.name: topic})


def as_controller(store, clients) -> None:
    """Make ``store`` the controller's (as a won election does), at the current epoch."""
    zk = clients()
    zk.ensure_path("/controller_epoch")
    _, stat = zk.get("/controller_epoch")
    store.fence(1, stat.version)


def test_cluster_id_is_created_once_in_kafkas_format(clients):
    a, b = opened(clients, 1), opened(clients, 2)
    assert a.cluster_id == b.cluster_id and len(a.cluster_id) == 22
    assert _json(clients(), "/cluster/id") == {"version": "1", "id": a.cluster_id}


def test_cluster_id_mismatch_is_refused(clients):
    opened(clients, 1, "AAAAAAAAAAAAAAAAAAAAAA")
    with pytest.raises(ValueError, match="does not match"):
        opened(clients, 2, "BBBBBBBBBBBBBBBBBBBBBB")


def test_topic_znodes_match_kafkas_zkdata(clients):
    store = opened(clients)
    topic = _topic()
    stored = create(store, topic).delta.created["orders"]
    assert [s.version for s in stored.states] == [0, 0]
    zk = clients()
    # TopicZNode.encode (Kafka 3.x): version 2, partitions, adding/removing replicas, topic_id.
    assert _json(zk, "/brokers/topics/orders") == {
        "version": 2, "partitions": {"0": [1, 2, 3], "1": [2, 3, 1]},
        "adding_replicas": {}, "removing_replicas": {},
        "topic_id": zn.topic_id_to_kafka(topic.topic_id)}
    # Kafka's Uuid.toString: 22 characters of URL-safe base64.
    assert len(_json(zk, "/brokers/topics/orders")["topic_id"]) == 22
    # TopicPartitionStateZNode.encode: exactly these keys.
    state = _json(zk, "/brokers/topics/orders/partitions/1/state")
    assert state == {"version": 1, "leader": 2, "leader_epoch": 0, "controller_epoch": 0,
                     "isr": [2, 3, 1]}
    # ConfigEntityZNode.encode
    assert _json(zk, "/config/topics/orders") == {"version": 1,
                                                  "config": {"retention.ms": "1000"}}
    assert sorted(zk.get_children("/brokers/topics/orders/partitions")) == ["0", "1"]


def test_load_reads_back_what_was_written(clients):
    store = opened(clients)
    topic = _topic()
    create(store, topic)
    commit(store, broker_configs={"cluster": {"log.retention.ms": "5"},
                                  "broker": {"log.cleaner.threads": "2"}})
    image = run(opened(clients).load())
    loaded = image.topic("orders")
    assert loaded.topic_id == topic.topic_id
    assert loaded.assignments == topic.assignments
    assert dict(loaded.configs) == {"retention.ms": "1000"}
    assert [(s.leader, s.isr, s.version) for s in loaded.states] == [
        (1, (1, 2, 3), 0), (2, (2, 3, 1), 0)]
    assert image.broker_configs(cluster_default=True) == {"log.retention.ms": "5"}
    assert image.broker_configs(cluster_default=False) == {"log.cleaner.threads": "2"}
    zk = clients()
    assert _json(zk, "/config/brokers/<default>")["config"] == {"log.retention.ms": "5"}
    assert _json(zk, "/config/brokers/1")["config"] == {"log.cleaner.threads": "2"}


def test_config_changes_leave_kafkas_change_notifications(clients):
    store = opened(clients)
    create(store, _topic())
    commit(store, topic_configs={"orders": {"cleanup.policy": "compact"}})
    commit(store, broker_configs={"cluster": {"a": "b"}})
    zk = clients()
    changes = sorted(zk.get_children("/config/changes"))
    assert [c[:len("config_change_")] for c in changes] == ["config_change_"] * 2
    assert [_json(zk, f"/config/changes/{c}") for c in changes] == [
        {"version": 2, "entity_path": "topics/orders"},
        {"version": 2, "entity_path": "brokers/<default>"}]
    assert _json(zk, "/config/topics/orders")["config"] == {"cleanup.policy": "compact"}


def test_add_partitions_writes_assignment_and_new_states(clients):
    store = opened(clients)
    create(store, _topic(replicas=((1,),)))
    new = {("orders", p): PartitionState(p + 1, 0, (p + 1,), MISSING_STATE.version)
           for p in (1, 2)}
    stored = commit(store, assignments={"orders": Assignment(((1,), (2,), (3,)))}, states=new)
    assert {k: s.version for k, s in stored.delta.states.items()} == {("orders", 1): 0,
                                                                      ("orders", 2): 0}
    zk = clients()
    assert _json(zk, "/brokers/topics/orders")["partitions"] == {"0": [1], "1": [2], "2": [3]}
    assert _json(zk, "/brokers/topics/orders/partitions/2/state")["leader"] == 3


def test_delete_topic_removes_every_znode(clients):
    store = opened(clients)
    create(store, _topic())
    commit(store, deleted=frozenset({"orders"}))
    zk = clients()
    assert zk.get_children("/brokers/topics") == []
    assert zk.exists("/config/topics/orders") is None
    assert zk.get_children("/admin/delete_topics") == []
    assert run(store.load()).topic("orders") is None


def test_interrupted_delete_is_finished_at_load(clients):
    store = opened(clients)
    create(store, _topic())
    clients().create("/admin/delete_topics/orders")  # a crash right after marking it
    image = run(opened(clients).load())
    assert image.topic("orders") is None
    assert clients().exists("/brokers/topics/orders") is None


def test_stale_writer_is_fenced_by_znode_version(clients):
    a = opened(clients, 1)
    create(a, _topic())
    b = opened(clients, 2)
    run(a.load())
    run(b.load())  # both read /config/topics/orders at version 0
    commit(b, topic_configs={"orders": {"retention.ms": "2"}})
    with pytest.raises(StaleMetadataError, match="/config/topics/orders changed since it was read"):
        commit(a, topic_configs={"orders": {"retention.ms": "1"}})
    assert _json(clients(), "/config/topics/orders")["config"] == {"retention.ms": "2"}
    # The refused transaction left nothing behind: one change notification, b's.
    assert len(clients().get_children("/config/changes")) == 1
    fresh = run(a.reread(MetadataDelta(topic_configs={"orders": {}})))
    assert dict(fresh.created["orders"].configs) == {"retention.ms": "2"}
    commit(a, topic_configs={"orders": {"retention.ms": "3"}})  # after a fresh read it goes
    assert _json(clients(), "/config/topics/orders")["config"] == {"retention.ms": "3"}


def test_creating_an_existing_topic_is_refused(clients):
    create(opened(clients, 1), _topic())
    with pytest.raises(AlreadyExistsError, match="already exists"):
        create(opened(clients, 2), _topic())


def test_a_topic_another_broker_created_meanwhile_is_topic_already_exists(clients):
    store = opened(clients, 1)
    image = run(store.load()).with_brokers([BrokerInfo(n, {}) for n in (1, 2, 3)], None)
    controller = Controller(store, 1, image)
    create(opened(clients, 2), _topic())  # not in 1's image yet
    with pytest.raises(KafkaError) as refused:
        run(controller.create_topic(NewTopic("orders", assignments=[(1, 2, 3), (2, 3, 1)])))
    assert refused.value.code == Errors.TOPIC_ALREADY_EXISTS.code
    assert refused.value.message == "Topic 'orders' already exists."


def test_missing_partition_states_are_written_and_existing_ones_kept(clients):
    store = opened(clients)
    topic = _topic(replicas=((1, 2), (2, 1), (1, 2)))
    create(store, topic)
    as_controller(store, clients)
    zk = clients()
    # Partition 1's state moved on (a leader change); partition 2's creator died before
    # writing it.
    commit(store, states={("orders", 1): PartitionState(1, 3, (1,), 0, 0)}, isr_only=True)
    zk.delete("/brokers/topics/orders/partitions/2/state")
    zk.delete("/brokers/topics/orders/partitions/2")
    missing = {("orders", p): s for p, s in enumerate(topic.states)}
    commit(store, states=missing)
    assert _json(zk, "/brokers/topics/orders/partitions/1/state")["leader_epoch"] == 3
    assert _json(zk, "/brokers/topics/orders/partitions/2/state")["isr"] == [1, 2]
    # Once all exist, writing them again is a no-op, not an error.
    commit(store, states=missing)
    assert _json(zk, "/brokers/topics/orders/partitions/2/state")["leader_epoch"] == 0


def test_partition_state_update_is_conditional(clients):
    store = opened(clients)
    create(store, _topic())
    state = run(store.load()).topic("orders").state(0)
    assert (state.leader, state.isr, state.version) == (1, (1, 2, 3), 0)
    # The leader's own ISR change (not the controller's: fenced by the znode version only).
    shrunk = commit(store, states={("orders", 0): PartitionState(1, 0, (1, 2), 0, 0)},
                    isr_only=True)
    assert shrunk.delta.states[("orders", 0)].version == 1
    # A leader still holding version 0 (it missed the shrink) cannot write its stale view.
    stale = commit(store, states={("orders", 0): PartitionState(1, 0, (1, 2, 3), 0, 0)},
                   isr_only=True)
    assert dict(stale.delta.states) == {}
    assert isinstance(stale.refused[("orders", 0)], StaleMetadataError)
    assert "changed since it was read" in str(stale.refused[("orders", 0)])
    assert _json(clients(), "/brokers/topics/orders/partitions/0/state")["isr"] == [1, 2]
    # Every state write leaves a notification naming it: the brokers read that partition.
    (note,) = clients().get_children("/isr_change_notification")
    assert _json(clients(), f"/isr_change_notification/{note}")["partitions"] == [
        {"topic": "orders", "partition": 0}]


def test_batched_isr_changes_are_written_or_refused_each_on_its_own(clients):
    # Leaders' ISR changes go to ZooKeeper in batches (the controller's change_isr queue): the
    # one that lost its conditional write is refused alone; the others are written.
    store = opened(clients)
    create(store, _topic())
    commit(store, states={("orders", 1): PartitionState(2, 0, (2, 3), 0, 0)}, isr_only=True)
    both = commit(store, isr_only=True, states={
        ("orders", 0): PartitionState(1, 0, (1, 2), 0, 0),
        ("orders", 1): PartitionState(2, 0, (2,), 0, 0)})  # still at version 0: stale
    assert both.delta.states[("orders", 0)].version == 1
    assert set(both.delta.states) == {("orders", 0)}
    assert set(both.refused) == {("orders", 1)}
    assert _json(clients(), "/brokers/topics/orders/partitions/0/state")["isr"] == [1, 2]
    assert _json(clients(), "/brokers/topics/orders/partitions/1/state")["isr"] == [2, 3]


def test_leaders_isr_changes_go_to_zookeeper_in_few_commits(clients):
    # A restarted follower catches up on every partition at once: its leaders' ISR changes
    # must not become one commit (ZooKeeper transaction, image, reconciliation) each.
    count = 300
    store = opened(clients, 1)
    topic = _topic(replicas=((1, 2, 3),) * count)
    create(store, topic)
    commit(opened(clients, 2), states={("orders", 0): PartitionState(1, 0, (1, 3), 0, 0)},
           isr_only=True)  # partition 0 moved on behind this broker's back
    image = run(store.load()).with_brokers([BrokerInfo(n, {}) for n in (1, 2, 3)], None)
    controller = Controller(store, 1, image)
    commits = []
    store_commit = store.commit

    async def counted(delta):
        commits.append(len(delta.states))
        return await store_commit(delta)

    store.commit = counted

    async def scenario():
        return await asyncio.gather(*(
            controller.change_isr("orders", p, PartitionState(1, 0, (1, 2), 0, 0))
            for p in range(count)), return_exceptions=True)

    results = run(scenario())
    assert isinstance(results[0], StaleMetadataError)
    assert all(r.isr == (1, 2) and r.version == 1 for r in results[1:]), results[1:5]
    assert sum(commits) == count and len(commits) <= 3, commits
    assert controller.image.topic("orders").state(count - 1).isr == (1, 2)
    assert _json(clients(), "/brokers/topics/orders/partitions/0/state")["isr"] == [1, 3]


def test_controller_state_writes_need_the_controller(clients):
    store = opened(clients)
    create(store, _topic())
    with pytest.raises(FencedError, match="not the controller"):
        commit(store, states={("orders", 0): PartitionState(2, 1, (2, 3), 0, 0)})
    assert _json(clients(), "/brokers/topics/orders/partitions/0/state")["leader"] == 1


def test_a_lost_state_race_refuses_only_that_partition(clients):
    store = opened(clients)
    create(store, _topic(replicas=[(1, 2)] * 4))
    as_controller(store, clients)
    # Another writer moved partition 2 on: this controller's write names an old version.
    clients().set("/brokers/topics/orders/partitions/2/state",
                  zn.PartitionState(2, 1, (2,), 1).encode())
    stored = commit(store, states={("orders", p): PartitionState(2, 1, (2, 1), 0, 1)
                                   for p in range(4)})
    assert set(stored.refused) == {("orders", 2)}
    assert set(stored.delta.states) == {("orders", 0), ("orders", 1), ("orders", 3)}


def test_controller_epoch_fences_an_old_controller(clients):
    zk = clients()
    zk.create("/controller_epoch", b"1")
    old = opened(clients)
    old.fence(controller_epoch=1, epoch_zk_version=0)
    t1 = _topic("t1")
    create(old, TopicMetadata("t1", t1.topic_id, t1.assignments, t1.configs,
                              initial_states(t1.assignments, 1)))
    assert _json(zk, "/brokers/topics/t1/partitions/0/state")["controller_epoch"] == 1
    zk.set("/controller_epoch", b"2", version=0)  # another broker won the next election
    with pytest.raises(FencedError, match="controller epoch"):
        create(old, _topic("t2"))
    with pytest.raises(FencedError, match="controller epoch"):
        commit(old, topic_configs={"t1": {"x": "y"}})
    assert zk.exists("/brokers/topics/t2") is None
    assert _json(zk, "/config/topics/t1")["config"] == {"retention.ms": "1000"}


def test_producer_id_blocks_never_overlap_across_brokers(clients):
    a, b = opened(clients, 1), opened(clients, 2)
    firsts = [run(a.allocate_producer_ids(1000)), run(b.allocate_producer_ids(1000)),
              run(a.allocate_producer_ids(1000))]
    assert firsts == [0, 1000, 2000]
    assert _json(clients(), "/latest_producer_id_block") == {
        "version": 1, "broker": 1, "block_start": "2000", "block_end": "2999"}


def test_chroot_keeps_everything_under_it(clients, raw, chroot):
    create(opened(clients), _topic())
    assert raw.exists(f"{chroot}/brokers/topics/orders")
    assert raw.exists(f"{chroot}/cluster/id")
    assert raw.exists("/brokers/topics/orders") is None
