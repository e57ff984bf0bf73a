"""The ZooKeeper metadata store against a real server: Kafka's znode layout and JSON, conditional
writes that fence a stale writer, chroot."""

from __future__ import annotations

import json
import uuid

import pytest

from kbroker.config.broker import BrokerConfig
from kbroker.metadata import zk_znodes as zn
from kbroker.metadata.image import TopicMetadata
from kbroker.metadata.store import StaleMetadataError
from kbroker.metadata.zk_errors import ControllerEpochMovedError, NodeAlreadyExistsError
from kbroker.metadata.zk_controller import ClusterController
from kbroker.metadata.zk_store import ZkMetadataStore
from kbroker.protocol.errors import Errors, KafkaError


def _json(client, path):
    data, _ = client.get(path)
    return json.loads(data)


def _topic(name="orders", replicas=((1, 2, 3), (2, 3, 1)), configs=None):
    return TopicMetadata(name, uuid.uuid4(), replicas, configs or {"retention.ms": "1000"})


def test_cluster_id_is_created_once_in_kafkas_format(clients):
    a = ZkMetadataStore(clients(), node_id=1)
    b = ZkMetadataStore(clients(), node_id=2)
    assert a.cluster_id == b.cluster_id and len(a.cluster_id) == 22
    assert _json(clients(), "/cluster/id") == {"version": "1", "id": a.cluster_id}


def test_cluster_id_mismatch_is_refused(clients):
    ZkMetadataStore(clients(), node_id=1, cluster_id="AAAAAAAAAAAAAAAAAAAAAA")
    with pytest.raises(ValueError, match="does not match"):
        ZkMetadataStore(clients(), node_id=2, cluster_id="BBBBBBBBBBBBBBBBBBBBBB")


def test_topic_znodes_match_kafkas_zkdata(clients):
    store = ZkMetadataStore(clients(), node_id=1)
    topic = _topic()
    store.create_topic(topic)
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
    store = ZkMetadataStore(clients(), node_id=1)
    topic = _topic()
    store.create_topic(topic)
    store.set_broker_configs({"log.retention.ms": "5"}, cluster_default=True)
    store.set_broker_configs({"log.cleaner.threads": "2"}, cluster_default=False)
    image = ZkMetadataStore(clients(), node_id=1).load()
    loaded = image.topic("orders")
    assert loaded.topic_id == topic.topic_id
    assert loaded.assignments == topic.assignments
    assert dict(loaded.configs) == {"retention.ms": "1000"}
    assert image.broker_configs(cluster_default=True) == {"log.retention.ms": "5"}
    assert image.broker_configs(cluster_default=False) == {"log.cleaner.threads": "2"}
    zk = clients()
    assert _json(zk, "/config/brokers/<default>")["config"] == {"log.retention.ms": "5"}
    assert _json(zk, "/config/brokers/1")["config"] == {"log.cleaner.threads": "2"}


def test_config_changes_leave_kafkas_change_notifications(clients):
    store = ZkMetadataStore(clients(), node_id=1)
    store.create_topic(_topic())
    store.set_topic_configs("orders", {"cleanup.policy": "compact"})
    store.set_broker_configs({"a": "b"}, cluster_default=True)
    zk = clients()
    changes = sorted(zk.get_children("/config/changes"))
    assert [c[:len("config_change_")] for c in changes] == ["config_change_"] * 2
    assert [_json(zk, f"/config/changes/{c}") for c in changes] == [
        {"version": 2, "entity_path": "topics/orders"},
        {"version": 2, "entity_path": "brokers/<default>"}]
    assert _json(zk, "/config/topics/orders")["config"] == {"cleanup.policy": "compact"}


def test_add_partitions_writes_assignment_and_new_states(clients):
    store = ZkMetadataStore(clients(), node_id=1)
    store.create_topic(_topic(replicas=((1,),)))
    store.set_assignments("orders", [(1,), (2,), (3,)])
    zk = clients()
    assert _json(zk, "/brokers/topics/orders")["partitions"] == {"0": [1], "1": [2], "2": [3]}
    assert _json(zk, "/brokers/topics/orders/partitions/2/state")["leader"] == 3


def test_delete_topic_removes_every_znode(clients):
    store = ZkMetadataStore(clients(), node_id=1)
    store.create_topic(_topic())
    store.delete_topic("orders")
    zk = clients()
    assert zk.get_children("/brokers/topics") == []
    assert zk.exists("/config/topics/orders") is None
    assert zk.get_children("/admin/delete_topics") == []
    assert store.load().topic("orders") is None


def test_interrupted_delete_is_finished_at_load(clients):
    store = ZkMetadataStore(clients(), node_id=1)
    store.create_topic(_topic())
    clients().create("/admin/delete_topics/orders")  # a crash right after marking it
    image = ZkMetadataStore(clients(), node_id=1).load()
    assert image.topic("orders") is None
    assert clients().exists("/brokers/topics/orders") is None


def test_stale_writer_is_fenced_by_znode_version(clients):
    a = ZkMetadataStore(clients(), node_id=1)
    a.create_topic(_topic())
    b = ZkMetadataStore(clients(), node_id=2)
    a.load()
    b.load()  # both read /config/topics/orders at version 0
    b.set_topic_configs("orders", {"retention.ms": "2"})
    with pytest.raises(StaleMetadataError, match="/config/topics/orders changed since it was read"):
        a.set_topic_configs("orders", {"retention.ms": "1"})
    assert _json(clients(), "/config/topics/orders")["config"] == {"retention.ms": "2"}
    # The refused transaction left nothing behind: one change notification, b's.
    assert len(clients().get_children("/config/changes")) == 1
    a.load()  # after a fresh read the write goes through
    a.set_topic_configs("orders", {"retention.ms": "3"})
    assert _json(clients(), "/config/topics/orders")["config"] == {"retention.ms": "3"}


def test_creating_an_existing_topic_is_refused(clients):
    a = ZkMetadataStore(clients(), node_id=1)
    a.create_topic(_topic())
    with pytest.raises(NodeAlreadyExistsError, match="already exists"):
        ZkMetadataStore(clients(), node_id=2).create_topic(_topic())


def test_a_topic_another_broker_created_meanwhile_is_topic_already_exists(clients):
    zk = clients()
    controller = ClusterController(ZkMetadataStore(zk, node_id=1), 1, zk,
                                   BrokerConfig({"broker.id": 1}))
    ZkMetadataStore(clients(), node_id=2).create_topic(_topic())  # not in 1's image yet
    with pytest.raises(KafkaError) as refused:
        controller.create_topic("orders", 2, {}, assignments=((1, 2, 3), (2, 3, 1)))
    assert refused.value.code == Errors.TOPIC_ALREADY_EXISTS.code
    assert refused.value.message == "Topic 'orders' already exists."


def test_missing_partition_states_are_written_and_existing_ones_kept(clients):
    store = ZkMetadataStore(clients(), node_id=1)
    topic = _topic(replicas=((1, 2), (2, 1), (1, 2)))
    store.create_topic(topic)
    zk = clients()
    # Partition 1's state moved on (a leader change); partition 2's creator died before
    # writing it.
    store.set_partition_state("orders", 1, zn.PartitionState(1, 3, (1,), 0, 0), fenced=False)
    zk.delete("/brokers/topics/orders/partitions/2/state")
    zk.delete("/brokers/topics/orders/partitions/2")
    store.create_missing_states("orders", range(3), topic.assignments)
    assert _json(zk, "/brokers/topics/orders/partitions/1/state")["leader_epoch"] == 3
    assert _json(zk, "/brokers/topics/orders/partitions/2/state")["isr"] == [1, 2]
    # Once all exist, writing them again is a no-op, not an error.
    store.create_missing_states("orders", range(3), topic.assignments)
    assert _json(zk, "/brokers/topics/orders/partitions/2/state")["leader_epoch"] == 0


def test_partition_state_update_is_conditional(clients):
    store = ZkMetadataStore(clients(), node_id=1)
    store.create_topic(_topic())
    state = store.partition_state("orders", 0)
    assert (state.leader, state.isr, state.zk_version) == (1, (1, 2, 3), 0)
    # The leader's own ISR change (not the controller's: fenced by the znode version only).
    shrunk = store.set_partition_state("orders", 0, zn.PartitionState(1, 0, (1, 2), 0, 0),
                                       fenced=False)
    assert shrunk.zk_version == 1
    # A leader still holding version 0 (it missed the shrink) cannot write its stale view.
    with pytest.raises(StaleMetadataError, match="changed since it was read"):
        store.set_partition_state("orders", 0, zn.PartitionState(1, 0, (1, 2, 3), 0, 0),
                                  fenced=False)
    assert _json(clients(), "/brokers/topics/orders/partitions/0/state")["isr"] == [1, 2]
    # Every state write leaves a notification that makes the brokers re-read.
    assert clients().get_children("/isr_change_notification")


def test_controller_state_writes_need_the_controller(clients):
    store = ZkMetadataStore(clients(), node_id=1)
    store.create_topic(_topic())
    with pytest.raises(StaleMetadataError, match="not the controller"):
        store.set_partition_state("orders", 0, zn.PartitionState(2, 1, (2, 3), 0, 0))
    assert _json(clients(), "/brokers/topics/orders/partitions/0/state")["leader"] == 1


def test_controller_epoch_fences_an_old_controller(clients):
    zk = clients()
    zk.create("/controller_epoch", b"1")
    old = ZkMetadataStore(clients(), node_id=1)
    old.fence(controller_epoch=1, epoch_zk_version=0)
    old.create_topic(_topic("t1"))
    assert _json(zk, "/brokers/topics/t1/partitions/0/state")["controller_epoch"] == 1
    zk.set("/controller_epoch", b"2", version=0)  # another broker won the next election
    with pytest.raises(ControllerEpochMovedError, match="controller epoch"):
        old.create_topic(_topic("t2"))
    with pytest.raises(ControllerEpochMovedError, match="controller epoch"):
        old.set_topic_configs("t1", {"x": "y"})
    assert zk.exists("/brokers/topics/t2") is None
    assert _json(zk, "/config/topics/t1")["config"] == {"retention.ms": "1000"}


def test_producer_id_blocks_never_overlap_across_brokers(clients):
    a = ZkMetadataStore(clients(), node_id=1)
    b = ZkMetadataStore(clients(), node_id=2)
    firsts = [a.allocate_producer_id_block(1000), b.allocate_producer_id_block(1000),
              a.allocate_producer_id_block(1000)]
    assert firsts == [0, 1000, 2000]
    assert _json(clients(), "/latest_producer_id_block") == {
        "version": 1, "broker": 1, "block_start": "2000", "block_end": "2999"}


def test_chroot_keeps_everything_under_it(clients, raw, chroot):
    store = ZkMetadataStore(clients(), node_id=1)
    store.create_topic(_topic())
    assert raw.exists(f"{chroot}/brokers/topics/orders")
    assert raw.exists(f"{chroot}/cluster/id")
    assert raw.exists("/brokers/topics/orders") is None
