"""The cluster column: the matrix's core rows for every client against a three-broker kbroker
cluster (``kbroker cluster up``: a real ZooKeeper and three broker processes), topics at
replication factor 3 with ``min.insync.replicas=2``.

What a single broker cannot show: the client routes each partition's requests to its leader
(leaders are spread over the brokers), ``acks=all`` is answered only once the in-sync replicas
have the batch, the group coordinator and the transaction coordinator live on whichever broker
leads their internal-topic partition (internal topics at RF 3), and the client follows all of that
from Metadata alone. One session cluster for every cell (each cell its own topics), so the added
time is a handful of driver runs per client.
"""

from __future__ import annotations

import os

import pytest

from compat_tests import harness, reference
from compat_tests.harness import Spec
from compat_tests.test_produce_consume import explicit_timestamps
from kbroker.protocol import messages
from tests.integration.clients import FIND_COORDINATOR, Wire, wait_until

REPLICAS = 3
MIN_ISR = 2


def create_topic(cluster, topic: str, partitions: int, leader: int | None = None) -> None:
    """RF 3, min.insync.replicas 2, through confluent's AdminClient (the reference side); waits
    until every partition has a leader and a full ISR, so the cell judges the client, not a
    replica still catching up. ``leader``: one partition whose leader is this broker (its
    preferred replica)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    config = {"min.insync.replicas": str(MIN_ISR)}
    if leader is None:
        new = NewTopic(topic, partitions, REPLICAS, config=config)
    else:
        others = [b["id"] for b in cluster.brokers if b["id"] != leader]
        new = NewTopic(topic, 1, -1, replica_assignment=[[leader, *others]],
                       config=config)
    futures = admin.create_topics([new], operation_timeout=20, request_timeout=30)
    futures[topic].result(timeout=40)
    leaders = replicated(cluster, topic, partitions)
    assert len(set(leaders)) > 1 or partitions == 1, f"{topic}: every leader on {leaders}"
    assert leader is None or leaders == [leader], f"{topic}: leader {leaders}, wanted {leader}"


def transaction_coordinator(cluster, transactional_id: str) -> int:
    """The broker coordinating ``transactional_id`` (FindCoordinator; creating
    __transaction_state on the first ask, COORDINATOR_NOT_AVAILABLE until it is there)."""
    cls = messages.request_class(FIND_COORDINATOR)
    with Wire(cluster.address(cluster.brokers[0]["id"])) as wire:
        def found():
            r = wire.call(FIND_COORDINATOR, 3, cls(key=transactional_id, key_type=1))
            return r.node_id if r.error_code == 0 else None
        return wait_until(found, 30, 0.2, f"the transaction coordinator of {transactional_id}")


def replicated(cluster, topic: str, partitions: int) -> list[int]:
    """Each partition's leader once Metadata shows it with 3 replicas, all in sync."""
    with Wire(cluster.address(cluster.brokers[0]["id"])) as wire:
        def ready():
            t = wire.metadata([topic]).topics[0]
            if t.error_code or len(t.partitions) != partitions:
                return None
            if not all(p.error_code == 0 and p.leader_id >= 0 and len(p.replica_nodes) == REPLICAS
                       and len(p.isr_nodes) == REPLICAS for p in t.partitions):
                return None
            return [p.leader_id for p in sorted(t.partitions, key=lambda p: p.partition_index)]
        return wait_until(ready, 30, 0.2, f"{topic}: leaders and a full ISR of {REPLICAS}")


@pytest.mark.compat("cluster: produce acks=all idempotent, consume")
def test_cluster_produce_consume(cluster, driver, cell):
    cell.need(driver)
    topic = harness.unique("cl-pc", driver.name)
    create_topic(cluster, topic, partitions=3)
    bootstrap = cluster.bootstrap_servers
    spec = Spec(count=12, timestamp=explicit_timestamps(driver))
    started = harness.now_ms()
    # The contract's defaults are acks=all and enable.idempotence=true: said here so it stays so.
    produced = harness.produce(driver, bootstrap, topic, spec, acks="all",
                               idempotent="true").ok()
    window = (started, harness.now_ms())
    consumed = harness.consume(driver, bootstrap, topic, spec.count).ok()
    problems = harness.compare(spec, driver, produced, consumed.records, window)
    assert not problems, "; ".join(problems[:5])
    spread = {r["partition"] for r in consumed.records}
    assert len(spread) > 1, f"12 keyed records all landed in partitions {spread} of 3"


@pytest.mark.compat("cluster: groups: commit and resume")
def test_cluster_commit_and_resume(cluster, driver, cell):
    cell.need(driver, "groups")
    topic, group = harness.unique("cl-grp", driver.name), harness.unique("g", driver.name)
    create_topic(cluster, topic, partitions=2)
    bootstrap = cluster.bootstrap_servers
    sent = [f"r{i}" for i in range(10)]
    reference.produce(bootstrap, topic, [(i % 2, v, None) for i, v in enumerate(sent)])
    first = harness.consume(driver, bootstrap, topic, 4, timeout=40, group=group).ok()
    later = [f"s{i}" for i in range(6)]
    reference.produce(bootstrap, topic, [(i % 2, v, None) for i, v in enumerate(later)])
    sent += later
    second = harness.consume(driver, bootstrap, topic, len(sent) - len(first.records),
                             timeout=40, group=group).ok()
    a = [r["value"] for r in first.records]
    b = [r["value"] for r in second.records]
    assert not set(a) & set(b), f"re-read after the restart: {sorted(set(a) & set(b))}"
    assert sorted(a + b) == sorted(sent), f"lost: {sorted(set(sent) - set(a) - set(b))}"
    cell.note(f"first member read {len(a)}, the restarted one {len(b)}")


@pytest.mark.compat("cluster: transactions")
def test_cluster_transactions(cluster, driver, cell):
    cell.need(driver, "transactions")
    topic = harness.unique("cl-txn", driver.name)
    transactional_id = harness.unique("txn-id", driver.name)
    # The cluster case: the partition's leader is not the transaction coordinator, so the
    # transaction spans brokers (AddPartitionsToTxn, the leader's verification, the markers).
    coordinator = transaction_coordinator(cluster, transactional_id)
    leader = next(b["id"] for b in cluster.brokers if b["id"] != coordinator)
    create_topic(cluster, topic, partitions=1, leader=leader)
    bootstrap = cluster.bootstrap_servers
    aborted = Spec(count=3, value_prefix="aborted-", headers=False, null_key_every=0)
    committed = Spec(count=3, value_prefix="committed-", headers=False, null_key_every=0)
    for spec, result in ((aborted, "abort"), (committed, "commit")):
        run = harness.produce(driver, bootstrap, topic, spec, timeout=20,
                              transactional_id=transactional_id, transaction=result).ok()
        assert {"event": "transaction", "result": result} in run.events, run.describe()
    want_committed = [f"committed-{i}" for i in range(3)]
    got = harness.consume(driver, bootstrap, topic, 3, isolation="read_committed").ok()
    assert [r["value"] for r in got.records] == want_committed
    got = harness.consume(driver, bootstrap, topic, 6, isolation="read_uncommitted").ok()
    assert [r["value"] for r in got.records] == [f"aborted-{i}" for i in range(3)] + \
        want_committed
    cell.note(f"transaction coordinator broker {coordinator}, partition leader broker {leader}")


@pytest.mark.skipif("java" not in (os.environ.get("COMPAT_CLIENTS") or "java").split(","),
                    reason="COMPAT_CLIENTS leaves out java, whose driver runs Kafka Streams")
@pytest.mark.compat("cluster: transactions", client="kafka-streams")
def test_cluster_kafka_streams_exactly_once_v2(cluster, cell):
    """The Kafka Streams row: the exactly_once_v2 count of test_transactions.py on the cluster.
    Its input, output and the app's own changelog are at RF 3 with min.insync.replicas 2 (the
    changelog through the brokers' default.replication.factor); the app's transactions span
    the brokers that lead those partitions, its consumer group lives on another."""
    from compat_tests.drivers.registry import BY_NAME
    java = BY_NAME["java"]
    unavailable = java.unavailable()
    assert unavailable is None, unavailable
    source, sink = harness.unique("cl-streams-in"), harness.unique("cl-streams-out")
    create_topic(cluster, source, partitions=2)
    create_topic(cluster, sink, partitions=2)
    counts = {"alpha": 7, "beta": 12, "gamma": 3, "delta": 9, "epsilon": 1}
    keys = [k for k, n in counts.items() for _ in range(n)]
    bootstrap = cluster.bootstrap_servers
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, key in enumerate(keys):
        producer.produce(source, key=key.encode(), value=f"v{i}".encode())
    assert producer.flush(30) == 0

    run = harness.run(java, "streams-count", bootstrap, timeout=150, input=source, output=sink,
                      application_id=harness.unique("cl-streams-app"), expect=len(keys),
                      timeout_ms=120_000)
    assert run.rc == 0, f"{run.error_text()}\n{run.describe()}"
    assert_counted_once(bootstrap, sink, counts)
    leaders = replicated(cluster, sink, 2) + replicated(cluster, source, 2)
    cell.note(f"{len(keys)} records counted exactly once; input and output led by brokers "
              f"{sorted(set(leaders))}")


@pytest.mark.skipif("java" not in (os.environ.get("COMPAT_CLIENTS") or "java").split(","),
                    reason="COMPAT_CLIENTS leaves out java, whose driver runs Kafka Streams")
@pytest.mark.compat("cluster: streams protocol, coordinator killed", client="kafka-streams")
def test_cluster_kafka_streams_streams_protocol_coordinator_killed(cluster, cell):
    """Kafka Streams with group.protocol=streams (KIP-1071), exactly_once_v2, while the broker
    coordinating its streams group is killed (kill -9): the group's topology, members and tasks,
    replicated in __consumer_offsets, are loaded by the partition's new leader; the app finds
    it, keeps its tasks and counts every record exactly once, the ones produced after the kill
    too."""
    import time

    from confluent_kafka import Consumer, Producer, TopicPartition

    from compat_tests.drivers.registry import BY_NAME
    java = BY_NAME["java"]
    unavailable = java.unavailable()
    assert unavailable is None, unavailable
    source, sink = harness.unique("cl-kip1071-in"), harness.unique("cl-kip1071-out")
    app = harness.unique("cl-kip1071-app")
    create_topic(cluster, source, partitions=2)
    create_topic(cluster, sink, partitions=2)
    counts = {"alpha": 7, "beta": 12, "gamma": 3, "delta": 9, "epsilon": 1}
    keys = [k for k, n in counts.items() for _ in range(n)]
    before, after = keys[::2], keys[1::2]
    bootstrap = cluster.bootstrap_servers

    def produce(batch, first):
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
                             "enable.idempotence": True})
        for i, key in enumerate(batch, first):
            producer.produce(source, key=key.encode(), value=f"v{i}".encode())
        assert producer.flush(60) == 0

    produce(before, 0)
    app_run = harness.start(java, "streams-count", bootstrap, "--property",
                            "group.protocol=streams", timeout=200, input=source, output=sink,
                            application_id=app, expect=len(keys), timeout_ms=180_000)
    killed = None
    try:
        app_run.wait_for(lambda: app_run.events("running"), 120, "the app RUNNING")
        # the first records counted and committed: they show in the output's committed view
        reader = Consumer({"bootstrap.servers": bootstrap, "group.id": harness.unique("r"),
                           "isolation.level": "read_committed", "enable.auto.commit": False})
        reader.assign([TopicPartition(sink, p, 0) for p in range(2)])
        try:
            wait_until(lambda: (m := reader.poll(0.5)) is not None and m.error() is None, 60,
                       0.1, "the app's first committed counts")
        finally:
            reader.close()
        killed = group_coordinator(cluster, app)
        cluster.kill(killed)
        started = time.monotonic()
        produce(after, len(before))
        run = app_run.wait()
        settled_s = time.monotonic() - started
        moved_to = group_coordinator(cluster, app)
    finally:
        app_run.terminate()
        if killed is not None:
            cluster.restart(killed)
    assert run.rc == 0, f"{run.error_text()}\n{run.describe()}"
    assert_counted_once(bootstrap, sink, counts)
    assert moved_to != killed
    cell.note(f"coordinator {killed} killed, the streams group moved to {moved_to}; "
              f"{len(keys)} records counted exactly once, the last {settled_s:.0f} s after "
              f"the kill")


def assert_counted_once(bootstrap: str, sink: str, counts: dict[str, int]) -> None:
    """The streams-count app's committed output: each key's counts exactly 1..N, in order."""
    from compat_tests.test_transactions import read_committed_to_end

    out = read_committed_to_end(bootstrap, sink, 2)
    by_key: dict[str, list[str]] = {}
    for key, value in out:
        by_key.setdefault(key, []).append(value)
    assert by_key == {k: [str(i) for i in range(1, n + 1)] for k, n in counts.items()}
    assert len(out) == sum(counts.values())


def group_coordinator(cluster, group: str) -> int:
    cls = messages.request_class(FIND_COORDINATOR)
    alive = next(b["id"] for b in cluster.brokers if cluster.alive(b["id"]))
    with Wire(cluster.address(alive)) as wire:
        def found():
            r = wire.call(FIND_COORDINATOR, 3, cls(key=group, key_type=0))
            return r.node_id if r.error_code == 0 else None
        return wait_until(found, 30, 0.2, f"the group coordinator of {group}")


@pytest.mark.compat("cluster: consumer protocol, coordinator killed")
def test_cluster_consumer_protocol_coordinator_killed(cluster, driver, cell):
    """A consumer-protocol member consumes while the broker coordinating its group is killed
    (kill -9): the group's state, replicated in __consumer_offsets, is loaded by the new leader
    of its partition and the member carries on at its epoch; nothing produced is missed."""
    import threading
    import time
    cell.need(driver, "groups.consumer-protocol")
    topic, group = harness.unique("cl-cp", driver.name), harness.unique("g", driver.name)
    create_topic(cluster, topic, partitions=3)
    bootstrap = cluster.bootstrap_servers
    sent: list[str] = []
    stop = threading.Event()

    def produce():
        n = 0
        while not stop.is_set():
            batch = [(p, f"k{n}-p{p}", None) for p in range(3)]
            try:
                reference.produce(bootstrap, topic, batch)
                sent.extend(v for _, v, _ in batch)
            except Exception:  # noqa: BLE001 - a round lost to the kill is not counted as sent
                pass
            n += 1
            time.sleep(0.3)

    producer = threading.Thread(target=produce)
    producer.start()
    member = harness.start(driver, "consume", bootstrap, "--property", "group.protocol=consumer",
                           timeout=150, topic=topic, count=1_000_000, group=group,
                           from_beginning=True, timeout_ms=150_000)
    killed = None
    try:
        member.wait_for(lambda: len(member.events("record")) > 3, 60, "the member's records")
        killed = group_coordinator(cluster, group)
        cluster.kill(killed)
        mark = len(sent)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            got = {r["value"] for r in member.events("record")}
            if len(sent) > mark + 30 and set(sent[:mark + 30]) <= got:
                break
            time.sleep(0.3)
        moved_to = group_coordinator(cluster, group)
    finally:
        stop.set()
        producer.join(30)
        if killed is not None:
            cluster.restart(killed)
    deadline = time.monotonic() + 30
    while set(sent) - {r["value"] for r in member.events("record")} and \
            time.monotonic() < deadline:
        time.sleep(0.3)
    member.stop()
    missing = sorted(set(sent) - {r["value"] for r in member.events("record")})
    assert not missing, f"{len(missing)} records never consumed: {missing[:8]}"
    assert moved_to != killed
    cell.note(f"coordinator {killed} killed, the group moved to {moved_to}; {len(sent)} records, "
              f"0 missed")
