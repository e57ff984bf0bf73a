"""Cluster mode, a broker killed at each step of a topic creation it was making (a real
``os._exit`` in a broker process, tests/metadata/crashing_broker.py): before the commit nothing
is in ZooKeeper; from the commit on, the other broker follows the topic at once and the crashed
broker, restarted, makes its partitions (start-up reconciles its log dirs with ZooKeeper) and
catches up. The same pipeline, and the same repair, as a single node's."""

from __future__ import annotations

import json

import pytest

from kbroker.protocol.errors import Errors
from tests.broker_process import BrokerProcess
from tests.cluster.conftest import SESSION_TIMEOUT_MS, wait_for
from tests.integration.clients import Wire
from tests.metadata.helpers import create_topic

TIMEOUT = 60


def _settings(connect_string, broker_id):
    return {"zookeeper.connect": connect_string, "broker.id": broker_id,
            "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
            "controlled.shutdown.enable": "false"}


def _partition_dirs(broker, topic):
    return {p.name for p in broker.data_dir.iterdir() if p.is_dir()
            and p.name.rsplit("-", 1)[0] == topic}


@pytest.mark.parametrize("step", ["decided", "committed", "published", "reconciling"])
def test_a_broker_killed_mid_creation_is_repaired_when_it_returns(connect_string, clients,
                                                                  tmp_path, step):
    one = BrokerProcess(tmp_path / "one", _settings(connect_string, 1),
                        crash_at=(step, "creating topic orders"))
    two = BrokerProcess(tmp_path / "two", _settings(connect_string, 2))
    try:
        one.start()
        two.start()
        wait_for(lambda: len(clients().get_children("/brokers/ids")) == 2,
                 "both brokers to register", TIMEOUT)
        try:
            with Wire(one.bootstrap) as wire:
                create_topic(wire, "orders", 4)  # replication factor 1: placed over both
        except (OSError, EOFError, ConnectionError, AssertionError):
            pass
        assert one.wait_dead() == 137
        zk = clients()
        if step == "decided":
            assert zk.exists("/brokers/topics/orders") is None
        else:
            assert sorted(zk.get_children("/brokers/topics/orders/partitions")) == [
                "0", "1", "2", "3"]
        # The dead broker's registration goes with its session; then it may come back.
        wait_for(lambda: zk.exists("/brokers/ids/1") is None, "broker 1's session to expire",
                 TIMEOUT)
        one.crash_at = None
        one.start()
        with Wire(two.bootstrap) as wire:
            if step == "decided":
                assert wire.metadata(["orders"]).topics[0].error_code == \
                    Errors.UNKNOWN_TOPIC_OR_PARTITION.code
                assert _partition_dirs(one, "orders") == set()
                return
        placed = json.loads(zk.get("/brokers/topics/orders")[0])["partitions"]
        mine = {f"orders-{p}" for p, replicas in placed.items() if 1 in replicas}
        wait_for(lambda: _partition_dirs(one, "orders") == mine,
                 "broker 1 to make its partitions of orders", TIMEOUT)
        wait_for(lambda: all(_lead_or_follow(b, "orders", 4) for b in (one, two)),
                 "every partition led, on both brokers", TIMEOUT)
    finally:
        one.kill()
        two.kill()


def _lead_or_follow(broker, topic, partitions) -> bool:
    with Wire(broker.bootstrap) as wire:
        described = wire.metadata([topic]).topics[0]
    return described.error_code == 0 and len(described.partitions) == partitions and all(
        p.error_code == 0 for p in described.partitions)
