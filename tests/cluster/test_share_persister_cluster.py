"""The share persister across three brokers over a real ZooKeeper: a broker that does not lead a
share partition's ``__share_group_state`` partition initializes, writes and reads its state
through the leader (the inter-broker APIs 83-87), another broker reads the same state, and when
the leader is killed no acknowledged write is lost: the new leader (a follower of the replicated
state partition) answers with every batch written before, and takes new writes."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kbroker.coordinator.share.persister import SharePartitionKey
from kbroker.coordinator.share.persister import StateBatch as B
from kbroker.protocol.errors import Errors
from tests.cluster.conftest import start_brokers, stop_brokers, wait_for

TIMEOUT = 60
AV, ACK, ARC = 0, 2, 4


@pytest.fixture
def brokers(connect_string):
    started = start_brokers(connect_string, lambda broker_id: {
        "share.coordinator.state.topic.num.partitions": 3,
        "share.coordinator.state.topic.replication.factor": 3,
        "share.coordinator.state.topic.min.isr": 2})
    yield started
    stop_brokers(started)


def _inner(broker):
    return broker._inner.broker


def _call(broker, coroutine_of):
    """Run ``coroutine_of(persister)`` on the broker's own loop."""
    return broker.call(coroutine_of(_inner(broker).share_persister), 60)


def _topic_id(brokers, name):
    admin = AdminClient({"bootstrap.servers": next(iter(brokers.values()))._inner.bootstrap_servers})
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])[name].result(30)
    return wait_for(lambda: all(
        _inner(b).controller.image.topic(name) is not None for b in brokers.values())
        and _inner(next(iter(brokers.values()))).controller.image.topic(name).topic_id,
        f"every broker to know {name}", TIMEOUT)


def test_state_through_the_coordinator_survives_its_loss(brokers):
    topic_id = _topic_id(brokers, "orders")
    key = SharePartitionKey(f"sg-{uuid.uuid4().hex[:6]}", topic_id, 0)
    first = next(iter(brokers.values()))
    # The first call creates __share_group_state (from whichever broker makes it).
    assert _call(first, lambda p: p.read_summary(key, 0)).error is Errors.NONE
    coordinator = _inner(first).share_coordinator

    def leader():
        found = coordinator.coordinator_of(key)
        return found if found in brokers else None
    old_leader = wait_for(leader, "a leader of the key's state partition", TIMEOUT)
    caller, reader = [i for i in brokers if i != old_leader]
    index = coordinator.partition_for(key)
    assert index not in _inner(brokers[caller]).share_coordinator.runtime.shards

    assert _call(brokers[caller], lambda p: p.initialize(key, 1, 0)).error is Errors.NONE
    assert _call(brokers[caller], lambda p: p.read(key, 1)).error is Errors.NONE
    written = []
    for n in range(5):
        batch = B(n * 10, n * 10 + 9, ACK if n % 2 else AV, n + 1)
        result = _call(brokers[caller], lambda p: p.write(key, 1, 1, 0, [batch], -1))
        assert result.error is Errors.NONE, result
        written.append(batch)
    read = _call(brokers[reader], lambda p: p.read(key, 1))
    assert (read.error, read.state_epoch, read.start_offset, read.batches) == \
        (Errors.NONE, 1, 0, written)
    fenced = _call(brokers[reader], lambda p: p.write(key, 1, 0, 0, [], -1))
    assert fenced.error is Errors.FENCED_LEADER_EPOCH

    brokers[old_leader].stop()  # no controlled shutdown: leadership moves by the failure
    started = time.monotonic()
    read = _call(brokers[caller], lambda p: p.read(key, 1))
    assert (read.error, read.batches) == (Errors.NONE, written), read
    new_leader = coordinator_of_live(brokers, caller, key)
    assert new_leader != old_leader
    batch = B(50, 59, ARC, 2)
    assert _call(brokers[reader], lambda p: p.write(key, 1, 1, 0, [batch], -1)).error \
        is Errors.NONE
    read = _call(brokers[caller], lambda p: p.read(key, 1))
    assert read.batches == written + [batch]
    assert time.monotonic() - started < TIMEOUT


def coordinator_of_live(brokers, via, key):
    return _inner(brokers[via]).share_coordinator.coordinator_of(key)
