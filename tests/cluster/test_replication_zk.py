"""Replication end to end: three brokers over a real ZooKeeper, a stock client (librdkafka)
producing idempotently with acks=all to a topic with replication factor 3 and
min.insync.replicas=2. Every acknowledged message is on every in-sync replica (byte-identical
logs), and survives the loss of the leader."""

from __future__ import annotations

import logging
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer

from confluent_kafka.admin import AdminClient, NewTopic

from kbroker.metadata import state_change
from tests.cluster.conftest import (SESSION_TIMEOUT_MS, metadata_view, start_brokers,
                                    stop_brokers, wait_for)

TIMEOUT = 30


@pytest.fixture
def cluster(connect_string, request):
    """Brokers 1-3 over the test's ZooKeeper chroot; stopping one is a crash (no controlled
    shutdown), so leadership moves only by the controller's election."""
    brokers = start_brokers(connect_string, lambda broker_id: getattr(request, "param", {}),
                            SESSION_TIMEOUT_MS)
    yield brokers, None
    stop_brokers(brokers)


def _wait_for(condition, what, timeout=TIMEOUT):
    return wait_for(condition, what, timeout)


def _same_everywhere(brokers, topic):
    views = [metadata_view(b, topic) for b in brokers]
    return views[0] if views[0][2] and all(v == views[0] for v in views) else None


def _create(broker, topic, partitions, replication_factor, config):
    admin = AdminClient({"bootstrap.servers": broker._inner.bootstrap_servers})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions,
                                            replication_factor=replication_factor,
                                            config=config)])
    futures[topic].result(TIMEOUT)  # the admin client is alive until here: it is referenced


def _produce(bootstrap: str, topic: str, values) -> list:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "message.timeout.ms": 30000})
    acked, failed = [], []

    def on_delivery(err, msg):
        (failed if err else acked).append(err or msg.value())

    for value in values:
        producer.produce(topic, value, partition=0, on_delivery=on_delivery)
    producer.flush(TIMEOUT)
    assert not failed, failed
    return acked


def _consume_all(bootstrap: str, topic: str, count: int) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    out = []
    deadline = time.monotonic() + TIMEOUT
    try:
        while len(out) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                out.append(msg.value())
    finally:
        consumer.close()
    return out


def _replica(broker, topic):
    return broker._inner.broker.replicas.get(topic, 0)


def _log_bytes(broker, topic) -> bytes:
    directory = broker._inner.data_dir / f"{topic}-0"
    return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))


def test_acks_all_writes_are_on_every_replica_and_survive_the_leader(cluster, caplog):
    caplog.set_level(logging.INFO, logger=state_change.LOGGER)
    brokers, _ = cluster
    _create(brokers[1], "replicated", 1, 3, config={"min.insync.replicas": "2"})
    _, _, partitions = _wait_for(lambda: _same_everywhere(brokers.values(), "replicated"),
                                 "agreement on the topic")
    leader = partitions[0][0]
    bootstrap = brokers[leader]._inner.bootstrap_servers

    first = [f"a-{i}".encode() for i in range(300)]
    assert len(_produce(bootstrap, "replicated", first)) == 300
    # Acknowledged means committed: the leader's HW covers it and every ISR member has it.
    assert _replica(brokers[leader], "replicated").high_watermark == 300
    _wait_for(lambda: all(_replica(b, "replicated").log_end_offset == 300
                          for b in brokers.values()), "followers at the leader's end")
    _wait_for(lambda: all(_replica(b, "replicated").high_watermark == 300
                          for b in brokers.values()), "followers to learn the HW")
    logs = {node: _log_bytes(b, "replicated") for node, b in brokers.items()}
    assert logs[leader] and all(data == logs[leader] for data in logs.values())

    # The leader dies; a follower from the ISR takes over and nothing acknowledged is lost.
    brokers.pop(leader).stop()
    survivors = list(brokers.values())

    def new_leader():
        view = _same_everywhere(survivors, "replicated")
        return view and view[2][0][0] in brokers and view[2][0][0]

    successor = _wait_for(new_leader, "a new leader")
    bootstrap = brokers[successor]._inner.bootstrap_servers
    second = [f"b-{i}".encode() for i in range(100)]
    assert len(_produce(bootstrap, "replicated", second)) == 100
    consumed = _consume_all(bootstrap, "replicated", 400)
    assert consumed == first + second
    # The state-change log tells the story (issue 36): the election, and the new leader.
    changes = [r.getMessage() for r in caplog.records if r.name == state_change.LOGGER]
    assert any(f": replicated-0: leader {leader}, leader epoch " in line
               and f" -> leader {successor}, " in line for line in changes), changes
    assert any(line.startswith(f"broker {successor}: leader of replicated-0 (was follower of "
                               f"{leader} at epoch ") for line in changes), changes


@pytest.mark.parametrize("cluster", [{"replica.lag.time.max.ms": "1500"}], indirect=True)
def test_a_dead_follower_leaves_the_isr_and_min_isr_holds(cluster):
    brokers, _ = cluster
    _create(brokers[1], "shrink", 1, 3, config={"min.insync.replicas": "2"})
    _, _, partitions = _wait_for(lambda: _same_everywhere(brokers.values(), "shrink"),
                                 "agreement on the topic")
    leader, replicas, _ = partitions[0]
    follower = next(r for r in replicas if r != leader)
    brokers.pop(follower).stop()
    # The controller removes a dead broker from the ISR (or the leader shrinks it after the
    # lag time); either way writes go on with 2 of 3.
    _wait_for(lambda: (v := _same_everywhere(brokers.values(), "shrink"))
              and follower not in v[2][0][2], "the ISR without the dead follower")
    bootstrap = brokers[leader]._inner.bootstrap_servers
    assert len(_produce(bootstrap, "shrink", [b"x"] * 50)) == 50
