"""How brokers follow ZooKeeper: a notification reads only what it names, a stale read never takes
a broker back, the periodic full read finds what a lost watch missed (and says so), and nothing
on a broker's event loop blocks on ZooKeeper. Three in-process brokers over a real ZooKeeper."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient, TransactionRequest

from kbroker.metadata.delta import MetadataDelta
from kbroker.metadata.image import MetadataImage, PartitionState, TopicMetadata
from kbroker.metadata.zk import sync as zk_sync
from kbroker.metadata.zk import znodes as zn
from kbroker.metadata.zk.reader import ZkReader, ZnodeVersions

from tests.cluster.conftest import start_brokers, stop_brokers, wait_for

TIMEOUT = 60


@pytest.fixture
def cluster(connect_string):
    brokers = start_brokers(connect_string)
    yield brokers
    stop_brokers(brokers)


def _inner(broker):
    return broker._inner.broker


def _create(broker, name, partitions, replication_factor=1):
    host, port = broker.listeners["PLAINTEXT"]
    admin = AdminClient({"bootstrap.servers": f"{host}:{port}"})
    admin.create_topics([NewTopic(name, partitions, replication_factor)])[name].result(TIMEOUT)


def _sees(broker, name, partitions):
    topic = _inner(broker).controller.image.topic(name)
    return topic is not None and topic.num_partitions == partitions and all(
        not topic.state(i).missing for i in range(partitions))


def _isr_change(zk, name, index):
    """A transaction that moves the partition's leader epoch up by one together with the ISR
    change notification naming it, as a leader's ISR write does; (transaction, new epoch)."""
    path = zn.partition_state_path(name, index)
    data, stat = zk.get(path)
    state = zn.PartitionState.decode(data, stat.version)
    transaction = zk.transaction()
    transaction.set_data(path, zn.PartitionState(state.leader, state.leader_epoch + 1,
                                                 state.isr, state.controller_epoch).encode(),
                         stat.version)
    transaction.create(zn.ISR_CHANGE_PREFIX, zn.encode_isr_change([(name, index)]),
                       sequence=True)
    return transaction, state.leader_epoch + 1


def test_a_new_topic_costs_the_other_brokers_a_few_reads_whatever_the_cluster_holds(cluster):
    _create(cluster[1], "big", 2000)
    wait_for(lambda: all(_sees(b, "big", 2000) for b in cluster.values()),
             "every broker to see big", TIMEOUT)
    sync = _inner(cluster[3]).cluster.sync
    time.sleep(0.5)  # the creation's last notifications handled
    reads_before = sync.reads
    started = time.monotonic()
    _create(cluster[1], "small", 1)
    wait_for(lambda: _sees(cluster[3], "small", 1), "broker 3 to see small", TIMEOUT)
    seen_after = time.monotonic() - started
    time.sleep(0.5)
    # The listing of /brokers/topics, the new topic's znode, config and one state, the
    # watches re-armed: a handful, not the 2,000 partitions of big.
    assert sync.reads - reads_before < 30, sync.reads - reads_before
    assert seen_after < 5


def test_an_isr_change_is_read_for_the_partitions_it_names_only(cluster, clients):
    _create(cluster[1], "moved", 500)
    wait_for(lambda: all(_sees(b, "moved", 500) for b in cluster.values()),
             "every broker to see moved", TIMEOUT)
    sync = _inner(cluster[2]).cluster.sync
    time.sleep(0.5)
    reads_before = sync.reads
    transaction, epoch = _isr_change(clients(), "moved", 7)
    transaction.commit()
    wait_for(lambda: _inner(cluster[2]).controller.image.topic("moved").state(7).leader_epoch
             == epoch, "broker 2 to read the new state", TIMEOUT)
    time.sleep(0.3)
    assert sync.reads - reads_before < 10, sync.reads - reads_before


def test_a_state_older_than_the_image_is_never_taken(clients):
    """A notification handled late reads a znode that is older than what the image holds (the
    broker's own write got there first): the image keeps the newer state."""
    zk = clients()
    zk.create(zn.partition_state_path("t", 0), zn.PartitionState(1, 3, (1,), 1).encode(),
              makepath=True)
    newer = PartitionState(2, 4, (2,), version=5)
    image = MetadataImage.build("c", [TopicMetadata("t", uuid.uuid4(), ((1, 2),), {},
                                                    (newer,))])
    reader = ZkReader(zk, "c", 1, ZnodeVersions())
    assert asyncio.run(reader.read_states(image, [("t", 0)])) == {}
    older = image.apply(MetadataDelta(states={("t", 0): PartitionState(1, 3, (1,), -1)}))
    assert asyncio.run(reader.read_states(older, [("t", 0)]))[("t", 0)].leader_epoch == 3


def test_the_full_read_finds_what_a_lost_watch_missed_and_says_so(connect_string, clients,
                                                                  monkeypatch, caplog):
    monkeypatch.setattr(zk_sync, "FULL_READ_INTERVAL_S", 1.0)
    monkeypatch.setattr(zk_sync, "SETTLE_S", 0.1)
    brokers = start_brokers(connect_string)
    try:
        _create(brokers[1], "quiet", 2)
        wait_for(lambda: all(_sees(b, "quiet", 2) for b in brokers.values()),
                 "every broker to see quiet", TIMEOUT)
        # A state changed with no notification: no watch fires (as if one had been lost).
        zk = clients()
        path = zn.partition_state_path("quiet", 1)
        data, stat = zk.get(path)
        state = zn.PartitionState.decode(data, stat.version)
        with caplog.at_level("WARNING", logger="kbroker.cluster"):
            zk.set(path, zn.PartitionState(state.leader, state.leader_epoch + 5, state.isr,
                                           state.controller_epoch).encode(), stat.version)
            wait_for(lambda: all(_inner(b).controller.image.topic("quiet").state(1).leader_epoch
                                 == state.leader_epoch + 5 for b in brokers.values()),
                     "the full read to bring the state", TIMEOUT)
        reports = [r.getMessage() for r in caplog.records if "full read" in r.getMessage()]
        assert reports and all("quiet-1" in r for r in reports), reports
        assert all(_inner(b).cluster.sync.differences >= 1 for b in brokers.values())
    finally:
        stop_brokers(brokers)


BLOCKING = {KazooClient: ("get", "set", "create", "delete", "exists", "get_children",
                          "ensure_path", "start", "stop", "close", "sync"),
            TransactionRequest: ("commit",)}


def test_no_zookeeper_call_blocks_a_brokers_event_loop(connect_string, monkeypatch):
    """kazoo's blocking calls are only made on threads that run no event loop (kazoo's own,
    or a thread the loop hands them to)."""
    offenders = []
    lock = threading.Lock()

    def guarded(original, name):
        def call(*args, **kwargs):
            if asyncio._get_running_loop() is not None:
                import traceback
                with lock:
                    offenders.append(f"{name}: {''.join(traceback.format_stack(limit=6))}")
            return original(*args, **kwargs)
        return call

    for cls, names in BLOCKING.items():
        for name in names:
            monkeypatch.setattr(cls, name, guarded(getattr(cls, name), f"{cls.__name__}.{name}"))
    brokers = start_brokers(connect_string)
    try:
        _create(brokers[1], "orders", 20, 3)
        wait_for(lambda: all(_sees(b, "orders", 20) for b in brokers.values()),
                 "every broker to see orders", TIMEOUT)
        host, port = brokers[2].listeners["PLAINTEXT"]
        admin = AdminClient({"bootstrap.servers": f"{host}:{port}"})
        from confluent_kafka.admin import ConfigResource
        resource = ConfigResource(ConfigResource.Type.TOPIC, "orders",
                                  set_config={"retention.ms": "60000"})
        admin.alter_configs([resource])[resource].result(TIMEOUT)
        victim = _inner(brokers[1]).controller.image.topic("orders").state(0).leader
        brokers.pop(victim).stop()
        wait_for(lambda: all(_inner(b).controller.image.topic("orders").state(0).leader
                             not in (victim, -1) for b in brokers.values()),
                 "a new leader", TIMEOUT)
    finally:
        stop_brokers(brokers)
    assert offenders == [], "\n".join(offenders[:5])


def test_watches_come_back_after_a_dropped_connection(zookeeper, chroot, monkeypatch):
    """kazoo drops every watch when its connection drops, even when the session survives (it
    sends no SetWatches on reconnect). A fault run once saw the controller miss, after a 2 s cut
    of its ZooKeeper link, a broker's re-registration and then its controlled shutdown, until
    the full read a minute later. After a reconnect every watch is re-armed."""
    from tools.cluster_faults.proxy import ProxyLoop
    from tools.kafka_ref.run_kafka import free_port

    monkeypatch.setattr(zk_sync, "FULL_READ_INTERVAL_S", 600.0)  # no safety net in this test
    proxies = ProxyLoop()
    port = free_port()
    proxies.add("zk", port, int(zookeeper.connect.rsplit(":", 1)[1]))
    brokers = start_brokers(f"127.0.0.1:{port}{chroot}")
    try:
        proxies.cut("zk")
        time.sleep(1.0)  # well within the 6 s session: every broker keeps its session
        proxies.restore("zk")
        wait_for(lambda: all(_inner(b).cluster.client.connected for b in brokers.values()),
                 "every broker to reconnect", TIMEOUT)
        _create(brokers[1], "after-the-cut", 2)
        wait_for(lambda: all(_sees(b, "after-the-cut", 2) for b in brokers.values()),
                 "every broker to see a topic created after the cut", 20)
        assert all(_inner(b).cluster.sync.differences == 0 for b in brokers.values())
    finally:
        stop_brokers(brokers)
        proxies.close()


def test_a_controller_round_zookeeper_does_not_answer_is_one_warning_line(connect_string,
                                                                           monkeypatch, caplog):
    """ZooKeeper too slow for a controller round (seen at 100,000 partitions: trimming ISR
    change notifications timed out) is an operator's one-line WARNING and the next round
    retries; not an ERROR with a traceback."""
    import logging

    from kazoo.handlers.threading import KazooTimeoutError

    from kbroker.metadata.zk import duties

    brokers = start_brokers(connect_string, ids=(1,))
    try:
        stalls = []

        async def zookeeper_does_not_answer(client):
            stalls.append(client)
            if len(stalls) == 1:
                raise KazooTimeoutError("no answer")

        caplog.set_level(logging.INFO, logger="kbroker.controller")
        monkeypatch.setattr(duties.notifications, "trim", zookeeper_does_not_answer)
        wait_for(lambda: len(stalls) >= 2, "a round after the one ZooKeeper failed", TIMEOUT)
        lines = [r for r in caplog.records if r.name == "kbroker.controller"
                 and r.levelno >= logging.WARNING]
        assert [(r.levelname, r.getMessage(), r.exc_info) for r in lines] == [
            ("WARNING", "controller round failed: ZooKeeper did not answer "
                        "(KazooTimeoutError); retrying", None)]
    finally:
        stop_brokers(brokers)


def test_an_isr_change_whose_read_fails_is_read_again(cluster, clients, monkeypatch, caplog):
    """Reading the states an ISR change notification names can fail (ZooKeeper did not answer
    in time, seen at 30,000 x RF 3): the retry reads the same notification again, so the change
    arrives without waiting for the periodic full read, and no lost watch is reported."""
    from kbroker.metadata.zk.reader import ZkReader as Reader

    _create(cluster[1], "retried", 4)
    wait_for(lambda: all(_sees(b, "retried", 4) for b in cluster.values()),
             "every broker to see retried", TIMEOUT)
    failures = []
    read_states = Reader.read_states

    async def zookeeper_times_out_once(self, image, partitions):
        if not failures and ("retried", 2) in partitions:
            failures.append(partitions)
            raise TimeoutError("ZooKeeper answered none of 1 request(s) in 15.0 s")
        return await read_states(self, image, partitions)

    monkeypatch.setattr(Reader, "read_states", zookeeper_times_out_once)
    transaction, epoch = _isr_change(clients(), "retried", 2)
    with caplog.at_level("WARNING", logger="kbroker.cluster"):
        transaction.commit()
        # Well before the first periodic full read (60 s after start).
        wait_for(lambda: all(_inner(b).controller.image.topic("retried").state(2).leader_epoch
                             == epoch for b in cluster.values()),
                 "every broker to read the new state", 10)
    assert failures
    assert not [r for r in caplog.records if "lost watch" in r.getMessage()]


def test_isr_notifications_trimmed_before_the_first_read_are_not_missed(connect_string, clients,
                                                                       monkeypatch, caplog):
    """A broker that has seen no ISR change notification yet, and then finds as many as the
    controller keeps, cannot tell whether older ones were trimmed before it read them (a burst
    of ISR changes right after start-up, seen at 30,000 x RF 3): it re-reads everything then,
    rather than wait for the periodic full read to call it a lost watch."""
    monkeypatch.setattr(zk_sync, "KEEP_ISR_NOTIFICATIONS", 3)
    brokers = start_brokers(connect_string, ids=(1, 2))
    try:
        _create(brokers[1], "burst", 5)
        wait_for(lambda: all(_sees(b, "burst", 5) for b in brokers.values()),
                 "every broker to see burst", TIMEOUT)
        sync = _inner(brokers[2]).cluster.sync
        assert sync._last_seen.get(zn.ISR_CHANGE) is None
        lock = _inner(brokers[2]).controller._lock

        async def hold():
            await lock.acquire()

        async def release():
            lock.release()

        brokers[2].call(hold())  # broker 2's sync cannot read until released
        zk = clients()
        epochs = {}
        for index in range(5):
            transaction, epochs[index] = _isr_change(zk, "burst", index)
            transaction.commit()
        for oldest in sorted(zk.get_children(zn.ISR_CHANGE))[:2]:  # the controller's trim
            zk.delete(f"{zn.ISR_CHANGE}/{oldest}")
        with caplog.at_level("WARNING", logger="kbroker.cluster"):
            brokers[2].call(release())
            wait_for(lambda: all(_inner(brokers[2]).controller.image.topic("burst").state(i)
                                 .leader_epoch == epochs[i] for i in range(5)),
                     "broker 2 to read every change, the trimmed ones too", 10)
        assert not [r for r in caplog.records if "lost watch" in r.getMessage()]
    finally:
        stop_brokers(brokers)
