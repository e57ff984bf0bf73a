"""Fixtures for tests against a REAL Apache ZooKeeper server (installed by
scripts/install-test-deps.sh; a missing install fails with the command that fixes it).

One server per test session; each test works under its own chroot, so tests never see each
other's znodes.
"""

from __future__ import annotations

import itertools
import uuid

import pytest

from kbroker.cluster.zookeeper import ZooKeeperNotInstalled, start_zookeeper
from kbroker.metadata.zk import client as zk_client
from kbroker.testing import KafkaBroker
from kbroker.testing.waiting import wait_for  # noqa: F401  (the cluster tests import it from here)

# The shortest session ZooKeeper grants at its default 2 s tick (2 ticks): session-loss tests
# wait about this long.
SESSION_TIMEOUT_MS = 4000
# Brokers die by closing their session (immediate), never by expiry: a session longer than the
# shortest keeps a loaded machine (2 shared cores) from expiring a live broker.
BROKER_SESSION_TIMEOUT_MS = 3 * SESSION_TIMEOUT_MS
_chroots = itertools.count()


def start_broker(connect_string: str, broker_id: int,
                 session_timeout_ms: int = BROKER_SESSION_TIMEOUT_MS, **settings) -> KafkaBroker:
    """An in-process broker of the test's ZooKeeper cluster; stopping it is a crash (no
    controlled shutdown, nothing moved first) and leaders never rebalance back, unless
    ``settings`` say otherwise."""
    return KafkaBroker({"zookeeper.connect": connect_string, "broker.id": broker_id,
                        "zookeeper.session.timeout.ms": session_timeout_ms,
                        "controlled.shutdown.enable": "false",
                        "auto.leader.rebalance.enable": "false", **settings}).start()


def start_brokers(connect_string: str, settings_of=lambda broker_id: {},
                  session_timeout_ms: int = BROKER_SESSION_TIMEOUT_MS, ids=(1, 2, 3)
                  ) -> dict[int, KafkaBroker]:
    """Brokers ``ids`` (``start_broker``, with ``settings_of(broker_id)``), returned once every
    one has seen them all register; if that fails, those started are stopped."""
    brokers = {}
    try:
        for broker_id in ids:
            brokers[broker_id] = start_broker(connect_string, broker_id, session_timeout_ms,
                                              **settings_of(broker_id))
        wait_for(lambda: all(len(b._inner.broker.metadata.brokers) == len(ids)
                             for b in brokers.values()),
                 f"every broker to see {len(ids)} live brokers", 60)
    except BaseException:
        stop_brokers(brokers)
        raise
    return brokers


def metadata_view(broker: KafkaBroker, topic: str) -> tuple:
    """What one broker's Metadata answer says: (live broker ids, controller id,
    {partition: (leader, replicas, isr)})."""
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": broker._inner.bootstrap_servers}).list_topics(
        topic, timeout=10)
    partitions = md.topics[topic].partitions if topic in md.topics else {}
    return (sorted(md.brokers), md.controller_id,
            {p: (v.leader, tuple(v.replicas), tuple(v.isrs)) for p, v in partitions.items()})


def stop_brokers(brokers: dict) -> None:
    for broker in brokers.values():
        broker.stop()  # a broker a test stopped already returns at once


@pytest.fixture(scope="session")
def zookeeper():
    try:
        server = start_zookeeper()
    except ZooKeeperNotInstalled as e:
        pytest.fail(str(e), pytrace=False)
    yield server
    server.stop()


@pytest.fixture
def chroot(zookeeper):
    return f"/kbroker-test-{next(_chroots)}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def connect_string(zookeeper, chroot):
    return zookeeper.connect + chroot


@pytest.fixture
def clients(connect_string):
    """A factory of started kazoo clients inside the test's chroot; all stopped at the end."""
    made = []

    def make(session_timeout_ms=SESSION_TIMEOUT_MS):
        client = zk_client.connect(connect_string, session_timeout_ms)
        made.append(client)
        return client

    yield make
    for client in made:
        try:
            client.stop()
            client.close()
        except Exception:
            pass


@pytest.fixture
def raw(zookeeper):
    """A client at the real root, to look at what a chroot hides."""
    from kazoo.client import KazooClient
    client = KazooClient(zookeeper.connect)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()
