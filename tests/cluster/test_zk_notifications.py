"""Change notifications age out as on Kafka (ZkNodeChangeNotificationListener): against a real
ZooKeeper, a notification older than the expiration is deleted once the path's children change,
a fresh one is kept, two brokers purging the same path at once both succeed, and a broker of a
cluster purges what its own config change wrote."""

from __future__ import annotations

import asyncio
import threading
import time

from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   NewTopic)

from kbroker.metadata.zk import notifications as zk_notifications
from kbroker.metadata.zk import znodes as zn
from kbroker.metadata.zk.notifications import CHANGE_EXPIRATION_MS, NotificationPurger
from kbroker.metadata.zk.store import ZkMetadataStore
from kbroker.testing import KafkaBroker

from tests.cluster.conftest import SESSION_TIMEOUT_MS, wait_for


def _notify(zk, prefix, count):
    """``count`` sequential notifications; their children's names, sorted."""
    return sorted(zk.create(prefix, b"x", sequence=True).rsplit("/", 1)[1]
                  for _ in range(count))


_PREFIXES = {zn.CONFIG_CHANGES: zn.CONFIG_CHANGE_PREFIX,
             zn.ACL_CHANGES: f"{zn.ACL_CHANGES}/{zn.ACL_CHANGE_SEQUENCE}",
             zn.EXTENDED_ACL_CHANGES: f"{zn.EXTENDED_ACL_CHANGES}/{zn.ACL_CHANGE_SEQUENCE}"}


def _ctime(zk, parent, children):
    return min(zk.exists(f"{parent}/{child}").ctime for child in children)


def _newer_than(zk, parent, children):
    """Wait until ZooKeeper's clock (1 ms resolution) is past every one of ``children``'s
    ctimes, so what is created next is strictly younger."""
    last = max(zk.exists(f"{parent}/{child}").ctime for child in children)
    while True:
        probe = zk.create(f"{parent}/probe", b"", ephemeral=True)
        ctime = zk.exists(probe).ctime
        zk.delete(probe)
        if ctime > last:
            return
        time.sleep(0.002)


def test_notifications_older_than_the_expiration_are_purged_and_fresh_ones_kept(clients):
    zk = clients()
    asyncio.run(ZkMetadataStore.open(zk, 1))  # the persistent paths
    old = {parent: _notify(zk, prefix, 3) for parent, prefix in _PREFIXES.items()}
    for parent, children in old.items():
        _newer_than(zk, parent, children)
    fresh = {parent: _notify(zk, prefix, 2) for parent, prefix in _PREFIXES.items()}
    # "Now" is exactly the expiration after the first fresh notification: the fresh ones are
    # not past it (Kafka purges when now - ctime > changeExpirationMs), every older one is.
    now = [min(_ctime(zk, parent, children) for parent, children in fresh.items())
           + CHANGE_EXPIRATION_MS]
    purger = NotificationPurger(zk, clock_ms=lambda: now[0])
    assert asyncio.run(purger.purge()) == 9
    for parent in old:
        assert sorted(zk.get_children(parent)) == fresh[parent]
    # An ISR change notification is not this listener's (the controller trims those).
    isr = _notify(zk, zn.ISR_CHANGE_PREFIX, 1)
    assert asyncio.run(purger.purge()) == 0
    assert zk.get_children(zn.ISR_CHANGE) == isr

    # Later, the fresh ones are old too, but as on Kafka nothing is purged until a path's
    # children change again: then everything expired under that path goes, the new one stays.
    now[0] += 10 * CHANGE_EXPIRATION_MS
    assert asyncio.run(purger.purge()) == 0
    _newer_than(zk, zn.CONFIG_CHANGES, fresh[zn.CONFIG_CHANGES])
    newest = _notify(zk, zn.CONFIG_CHANGE_PREFIX, 1)
    now[0] = _ctime(zk, zn.CONFIG_CHANGES, newest) + CHANGE_EXPIRATION_MS
    assert asyncio.run(purger.purge()) == 2
    assert zk.get_children(zn.CONFIG_CHANGES) == newest
    assert sorted(zk.get_children(zn.ACL_CHANGES)) == fresh[zn.ACL_CHANGES]


def test_two_brokers_purging_the_same_notifications_at_once_both_succeed(clients):
    zk = clients()
    asyncio.run(ZkMetadataStore.open(zk, 1))
    _notify(zk, zn.CONFIG_CHANGE_PREFIX, 300)
    far_future = int(time.time() * 1000) + 10 * CHANGE_EXPIRATION_MS
    purgers = [NotificationPurger(clients(), clock_ms=lambda: far_future) for _ in range(2)]
    start, deleted, errors = threading.Barrier(2), [], []

    def purge(purger):
        start.wait()
        try:
            deleted.append(asyncio.run(purger.purge()))
        except Exception as exc:  # the assertion below names it
            errors.append(exc)

    threads = [threading.Thread(target=purge, args=(p,)) for p in purgers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert zk.get_children(zn.CONFIG_CHANGES) == []
    # Each notification was deleted once, by one broker or the other.
    assert sum(deleted) == 300


def test_a_cluster_broker_purges_the_notification_its_config_change_wrote(connect_string,
                                                                        clients, monkeypatch):
    monkeypatch.setattr(zk_notifications, "CHANGE_EXPIRATION_MS", 0)
    broker = KafkaBroker({"zookeeper.connect": connect_string, "broker.id": 1,
                          "zookeeper.session.timeout.ms": 3 * SESSION_TIMEOUT_MS,
                          "controlled.shutdown.enable": "false"}).start()
    try:
        host, port = broker.listeners["PLAINTEXT"]
        admin = AdminClient({"bootstrap.servers": f"{host}:{port}"})
        admin.create_topics([NewTopic("orders", 1, 1)])["orders"].result(30)
        zk = clients()
        seen = []
        zk.ChildrenWatch(zn.CONFIG_CHANGES, lambda children: seen.extend(children))
        resource = ConfigResource(ConfigResource.Type.TOPIC, "orders", incremental_configs=[
            ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([resource])[resource].result(30)
        wait_for(lambda: seen, "the config change notification", 30)
        wait_for(lambda: zk.get_children(zn.CONFIG_CHANGES) == [],
                 "the broker to purge its expired notification", 30)
        # The change itself stays.
        description = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC,
                                                             "orders")])
        configs = next(iter(description.values())).result(30)
        assert configs["retention.ms"].value == "60000"
    finally:
        broker.stop()


def test_a_burst_is_purged_a_batch_per_round(clients):
    zk = clients()
    asyncio.run(ZkMetadataStore.open(zk, 1))
    _notify(zk, zn.CONFIG_CHANGE_PREFIX, 5)
    far_future = int(time.time() * 1000) + 10 * CHANGE_EXPIRATION_MS
    purger = NotificationPurger(zk, paths=[zn.CONFIG_CHANGES], clock_ms=lambda: far_future,
                                batch=2)
    # Each round reads and deletes at most two; the path stays due until a round sees it all.
    assert [asyncio.run(purger.purge()) for _ in range(5)] == [2, 2, 1, 0, 0]
    assert zk.get_children(zn.CONFIG_CHANGES) == []
