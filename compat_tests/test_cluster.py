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
