"""Group configs (KIP-848, the GROUP resource) in a cluster: ``/config/groups/<group>`` holding
{"version":1,"config":{...}} with a ``/config/changes`` notification naming ``groups/<group>``
(the layout of Kafka's other config entities: Kafka 3.x's ZooKeeper mode has no group configs),
followed by every broker's sync; the broker that coordinates the group applies them."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from kbroker.metadata.delta import MetadataDelta
from kbroker.metadata.zk.store import ZkMetadataStore
from kbroker.protocol.errors import Errors
from tests.cluster.conftest import start_brokers, stop_brokers, wait_for

SETTINGS = {"offsets.topic.num.partitions": "3", "offsets.topic.replication.factor": "3",
            "group.consumer.min.heartbeat.interval.ms": "1000"}


def _json(zk, path):
    data, _ = zk.get(path)
    return json.loads(data)


def _entity_paths(zk) -> list[str]:
    return sorted(_json(zk, f"/config/changes/{c}")["entity_path"]
                  for c in zk.get_children("/config/changes"))


def test_group_config_znodes_and_notifications(clients):
    store = asyncio.run(ZkMetadataStore.open(clients(), 1))
    zk = clients()
    configs = {"consumer.heartbeat.interval.ms": "1500"}
    asyncio.run(store.commit(MetadataDelta(group_configs={"g1": configs,
                                                          "my group/*": configs})))
    assert _json(zk, "/config/groups/g1") == {"version": 1, "config": configs}
    assert _json(zk, "/config/groups/my%20group%2F%2A") == {"version": 1, "config": configs}
    assert _entity_paths(zk) == ["groups/g1", "groups/my%20group%2F%2A"]
    loaded = asyncio.run(store.load()).group_configs
    assert {g: dict(c) for g, c in loaded.items()} == {"g1": configs, "my group/*": configs}

    # An empty set deletes the znode (and says so); deleting what is not there writes nothing.
    asyncio.run(store.commit(MetadataDelta(group_configs={"g1": {}, "never": {}})))
    assert not zk.exists("/config/groups/g1")
    assert _entity_paths(zk) == ["groups/g1", "groups/g1", "groups/my%20group%2F%2A"]
    assert set(asyncio.run(store.load()).group_configs) == {"my group/*"}


@pytest.fixture
def cluster(connect_string):
    brokers = start_brokers(connect_string, lambda broker_id: SETTINGS)
    yield brokers
    stop_brokers(brokers)


def _admin(broker):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": broker._inner.bootstrap_servers})


def _alter(broker, group, name, value, op=None):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=op or AlterConfigOpType.SET)])
    admin = _admin(broker)  # kept: the result needs its client alive
    return admin.incremental_alter_configs([resource])[resource].result(20)


def _described(broker, group, name):
    from confluent_kafka.admin import ConfigResource, ResourceType
    resource = ConfigResource(ResourceType.GROUP, group)
    admin = _admin(broker)
    entry = admin.describe_configs([resource])[resource].result(20)[name]
    return entry.value, entry.source


def _heartbeat_interval(brokers, group, member=None):
    """The heartbeat interval the group's coordinator hands out (joining, or ``member``'s
    next heartbeat); (interval, member) once the coordinator answers."""
    from tests.integration.clients import Wire
    from tests.integration.test_consumer_groups import _heartbeat
    from tests.metadata.helpers import find_group_coordinator

    with Wire(brokers[1]._inner.bootstrap_servers) as wire:
        (coordinator,) = find_group_coordinator(wire, group).coordinators
    if coordinator.error_code:
        return None
    with Wire(brokers[coordinator.node_id]._inner.bootstrap_servers) as wire:
        if member is None:
            r = _heartbeat(wire, group_id=group, member_epoch=0, rebalance_timeout_ms=1000,
                           topic_partitions=[], subscribed_topic_names=["gc-none"])
        else:
            r = _heartbeat(wire, group_id=group, member_id=member[0], member_epoch=member[1])
    if r.error_code:
        return None
    return r.heartbeat_interval_ms, (r.member_id, r.member_epoch)


def test_a_config_set_on_one_broker_is_described_and_applied_everywhere(cluster, clients):
    from confluent_kafka.admin import AlterConfigOpType
    group = f"g-{uuid.uuid4().hex[:6]}"
    _alter(cluster[1], group, "consumer.heartbeat.interval.ms", "1500")
    assert _json(clients(), f"/config/groups/{group}") == {
        "version": 1, "config": {"consumer.heartbeat.interval.ms": "1500"}}
    wait_for(lambda: _described(cluster[3], group, "consumer.heartbeat.interval.ms")
             == ("1500", 8), "broker 3 to describe the group config", 30)

    # The coordinator of the group (whichever broker it is) hands out the configured interval.
    joined = wait_for(lambda: _heartbeat_interval(cluster, group), "the coordinator", 60)
    assert joined[0] == 1500

    # Changed through another broker: the member's next heartbeat gets the new interval.
    _alter(cluster[2], group, "consumer.heartbeat.interval.ms", "2500")
    wait_for(lambda: (r := _heartbeat_interval(cluster, group, joined[1])) and r[0] == 2500,
             "the coordinator to hand out the new interval", 30)

    # Deleting the last config deletes the znode; every broker describes the default again.
    _alter(cluster[3], group, "consumer.heartbeat.interval.ms", None, AlterConfigOpType.DELETE)
    assert not clients().exists(f"/config/groups/{group}")
    wait_for(lambda: all(_described(b, group, "consumer.heartbeat.interval.ms")[0] == "5000"
                         for b in cluster.values()), "every broker to describe the default", 30)


def test_bad_group_configs_get_kafkas_errors_and_nothing_is_written(cluster, clients):
    from confluent_kafka import KafkaException
    group = "g-bad"
    for name, value, error, text in (
            ("consumer.heartbeat.interval.ms", "x", Errors.INVALID_CONFIG, "Not a number"),
            ("consumer.heartbeat.interval.ms", "500", Errors.INVALID_CONFIG,
             "must be in the range 1000 to 15000 inclusive"),  # Kafka 4.4's GroupConfig words
            ("consumer.nope", "1", Errors.INVALID_CONFIG, "Unknown group config name")):
        with pytest.raises(KafkaException) as err:
            _alter(cluster[2], group, name, value)
        assert err.value.args[0].code() == error.code and text in str(err.value)
    assert not clients().exists(f"/config/groups/{group}")


def _inner(broker):
    return broker._inner.broker


def test_znodes_written_by_hand_are_followed_and_the_full_read_is_the_safety_net(
        connect_string, clients, monkeypatch, caplog):
    """A group config another writer put in ZooKeeper with its notification is read from the
    notification; one written with none (a lost watch) is found by the periodic full read."""
    from kbroker.metadata.zk import sync as zk_sync
    monkeypatch.setattr(zk_sync, "FULL_READ_INTERVAL_S", 1.0)
    monkeypatch.setattr(zk_sync, "SETTLE_S", 0.1)
    brokers = start_brokers(connect_string, lambda broker_id: SETTINGS, ids=(1, 2))
    try:
        zk = clients()
        zk.ensure_path("/config/groups")
        zk.create("/config/groups/noted", b'{"version":1,"config":'
                                          b'{"consumer.session.timeout.ms":"50000"}}')
        zk.create("/config/changes/config_change_", b'{"version":2,"entity_path":"groups/noted"}',
                  sequence=True)
        wait_for(lambda: all(dict(_inner(b).controller.image.group_config("noted"))
                             == {"consumer.session.timeout.ms": "50000"}
                             for b in brokers.values()), "the notification to be read", 30)
        with caplog.at_level("WARNING", logger="kbroker.cluster"):
            zk.delete("/config/groups/noted")  # no notification
            wait_for(lambda: all("noted" not in _inner(b).controller.image.group_configs
                                 for b in brokers.values()), "the full read", 30)
        reports = [r.getMessage() for r in caplog.records if "full read" in r.getMessage()]
        assert reports and all("group configs ['noted']" in r for r in reports), reports
    finally:
        stop_brokers(brokers)
