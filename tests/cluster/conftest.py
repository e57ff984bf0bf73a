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
from kbroker.metadata import zk_client
from kbroker.testing.waiting import wait_for  # noqa: F401  (the cluster tests import it from here)

# The shortest session ZooKeeper grants at its default 2 s tick (2 ticks): session-loss tests
# wait about this long.
SESSION_TIMEOUT_MS = 4000
_chroots = itertools.count()


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
