"""Broker registration and controller election against a real ZooKeeper: Kafka's registration
JSON, ephemeral znodes that vanish with the session, re-registration, election and epoch bump,
and a deposed controller fenced from writing."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from kazoo.client import KazooClient

from kbroker.metadata.delta import MetadataDelta
from kbroker.metadata.image import PartitionState, TopicMetadata
from kbroker.metadata.store import FencedError
from kbroker.metadata.topic_policy import initial_states
from kbroker.metadata.zk import znodes as zn
from kbroker.metadata.zk.election import ControllerElection
from kbroker.metadata.zk.registration import BrokerIdInUse, BrokerRegistration
from kbroker.metadata.zk.store import ZkMetadataStore
from kbroker.testing.waiting import wait_for

# BrokerIdZNode.encode (Kafka 3.x, version 5) writes exactly these keys (rack when set).
KAFKA_V5_KEYS = {"version", "host", "port", "endpoints", "jmx_port", "timestamp",
                 "listener_security_protocol_map", "features", "rack"}


def _wait_for(condition, what, timeout=30.0):
    wait_for(condition, what, timeout, 0.05)


def _expire_session(client, zookeeper):
    """Expire ``client``'s session the classic way: a second connection with the same session id
    and password closes it, and the server deletes the session's ephemeral znodes."""
    session_id, password = client.client_id
    twin = KazooClient(zookeeper.connect, client_id=(session_id, password))
    twin.start(timeout=10)
    twin.stop()
    twin.close()


def _endpoints(port):
    return [zn.Endpoint("PLAINTEXT", "127.0.0.1", port),
            zn.Endpoint("REPLICATION", "127.0.0.1", port + 1)]


def test_registration_is_kafkas_v5_json(clients):
    zk = clients()
    BrokerRegistration(zk, 1, _endpoints(9092), rack="rack-a").register()
    data, stat = clients().get("/brokers/ids/1")
    value = json.loads(data)
    assert set(value) == KAFKA_V5_KEYS
    assert value["version"] == 5
    assert (value["host"], value["port"]) == ("127.0.0.1", 9092)
    assert value["endpoints"] == ["PLAINTEXT://127.0.0.1:9092", "REPLICATION://127.0.0.1:9093"]
    assert value["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT",
                                                       "REPLICATION": "PLAINTEXT"}
    assert value["rack"] == "rack-a" and value["jmx_port"] == -1 and value["features"] == {}
    assert isinstance(value["timestamp"], str) and value["timestamp"].isdigit()
    assert stat.ephemeralOwner == zk.client_id[0]  # ephemeral, owned by the broker's session
    assert zn.decode_broker_registration(data) == (_endpoints(9092), "rack-a")


def test_registration_disappears_when_the_session_ends(clients):
    zk = clients()
    BrokerRegistration(zk, 2, _endpoints(9092)).register()
    observer = clients()
    assert observer.get_children("/brokers/ids") == ["2"]
    zk.stop()
    assert observer.get_children("/brokers/ids") == []


def test_a_second_broker_with_the_same_id_is_refused(clients):
    BrokerRegistration(clients(), 3, _endpoints(9092)).register()
    with pytest.raises(BrokerIdInUse, match="broker.id 3 is already registered"):
        BrokerRegistration(clients(), 3, _endpoints(9094)).register()


def test_a_lost_session_re_registers(clients, zookeeper):
    zk = clients()
    registration = BrokerRegistration(zk, 4, _endpoints(9092))
    registration.register()
    old_session = zk.client_id[0]
    observer = clients()
    _expire_session(zk, zookeeper)
    _wait_for(lambda: registration.registrations == 2, "re-registration")
    _, stat = observer.get("/brokers/ids/4")
    assert stat.ephemeralOwner == zk.client_id[0] != old_session


def test_first_broker_wins_the_election_and_bumps_the_epoch(clients):
    elections = []
    for broker_id in (1, 2, 3):
        election = ControllerElection(clients(), broker_id)
        election.start()
        elections.append(election)
    _wait_for(lambda: all(e.active_controller is not None for e in elections), "an election")
    winners = [e for e in elections if e.is_controller]
    assert len(winners) == 1 and winners[0].epoch == 1
    observer = clients()
    assert json.loads(observer.get("/controller")[0])["brokerid"] == winners[0].broker_id
    assert observer.get("/controller_epoch")[0] == b"1"
    assert {e.active_controller for e in elections} == {winners[0].broker_id}
    value = json.loads(observer.get("/controller")[0])
    assert set(value) == {"version", "brokerid", "timestamp"} and value["version"] == 1


def test_controller_loss_elects_another_and_fences_the_old_one(clients, zookeeper):
    first_client = clients()
    first_store = asyncio.run(ZkMetadataStore.open(first_client, 1))
    first = ControllerElection(first_client, 1, first_store)
    first.start()
    _wait_for(lambda: first.is_controller, "broker 1 to become controller")
    second_client = clients()
    second = ControllerElection(second_client, 2,
                                asyncio.run(ZkMetadataStore.open(second_client, 2)))
    second.start()
    _wait_for(lambda: second.active_controller == 1, "broker 2 to see the controller")
    assert not second.is_controller

    _expire_session(first_client, zookeeper)  # e.g. broker 1 paused beyond its session timeout
    _wait_for(lambda: second.is_controller, "broker 2 to take over")
    assert second.epoch == 2
    assert clients().get("/controller_epoch")[0] == b"2"
    _wait_for(lambda: not first.is_controller, "broker 1 to resign")
    _wait_for(lambda: first_client.connected, "broker 1's new session")
    # The deposed controller may no longer decide who leads (topic and config changes stay
    # open to it, as to any broker's admin client: they are not the controller's to fence).
    third = asyncio.run(ZkMetadataStore.open(clients(), 3))
    asyncio.run(third.commit(MetadataDelta(created={"late": TopicMetadata(
        "late", uuid.uuid4(), ((1, 2),), {}, initial_states(((1, 2),), 0))})))
    with pytest.raises(FencedError, match="not the controller"):
        asyncio.run(first_store.commit(MetadataDelta(
            states={("late", 0): PartitionState(2, 1, (2,), 0, 1)})))
    assert json.loads(clients().get("/brokers/topics/late/partitions/0/state")[0])["leader"] == 1
    first.stop()
    second.stop()
