"""Share groups (KIP-932), the group coordinator's side, against a real broker over real sockets:
ShareGroupHeartbeat on the wire (join, initialization of the share partitions through the
persister, then the assignment; partitions shared by two members; Kafka's errors; leave) and a
real Java KafkaShareConsumer (kafka-clients 4.4) joining and getting its assignment.

The broker runs in this process so that the test can hand its group coordinator an in-memory
persister (tests/coordinator/share_persister_double.py) in place of the share coordinator.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from kbroker.testing.inprocess import KafkaBroker
from tests.coordinator.share_persister_double import InMemoryPersister
from tests.integration.clients import Wire, ensure_topic, wait_until

ROOT = Path(__file__).resolve().parents[2]
JAVA_JAR = ROOT / "compat_tests" / "java" / "target" / "kbroker-java-driver.jar"
SHARE_JOIN = Path(__file__).resolve().parent / "share_java" / "ShareJoin.java"
SHARE_HB = 76
BROKER = {"group.share.heartbeat.interval.ms": 200,
          "group.share.min.heartbeat.interval.ms": 100,
          "group.share.assignment.interval.ms": 0,
          "offsets.topic.num.partitions": 1}


@pytest.fixture
def share_broker():
    with KafkaBroker(BROKER) as kafka:
        persister = InMemoryPersister()
        kafka.broker.group_coordinator.share_persister = persister
        yield kafka, persister


def hb(wire, group, member, epoch, topics=None, **fields):
    from kbroker.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest as Q
    return wire.call(SHARE_HB, 1, Q(group_id=group, member_id=member, member_epoch=epoch,
                                    subscribed_topic_names=topics, **fields))


def assigned(response) -> dict:
    if response.assignment is None:
        return {}
    return {t.topic_id: sorted(t.partitions) for t in response.assignment.topic_partitions}


def share_group(kafka, group):
    from kbroker.protocol.errors import KafkaError
    try:
        shard = kafka.broker.group_coordinator.shard_for(group)
    except KafkaError:  # __consumer_offsets not created yet
        return None
    return shard.share_groups.get(group)


def test_heartbeat_initializes_then_assigns(share_broker):
    kafka, persister = share_broker
    bootstrap = kafka.bootstrap_servers
    ensure_topic(bootstrap, "sq", 2)
    with Wire(bootstrap) as wire:
        wire.api_versions()
        assert wire.versions[SHARE_HB] == (1, 1)
        r = hb(wire, "g1", "m1", 0, ["sq"])
        assert (r.error_code, r.member_epoch, r.heartbeat_interval_ms) == (0, 1, 200)
        assert r.member_id == "m1" and assigned(r) == {}     # not initialized yet: nothing
        wait_until(lambda: len([c for c in persister.calls if c[0] == "initialize"]) == 2,
                   message="the persister initializes both share partitions")
        inits = sorted((c[1].partition, c[2], c[3]) for c in persister.calls
                       if c[0] == "initialize")
        assert inits == [(0, 1, -1), (1, 1, -1)]          # state epoch = group epoch
        topic_id = next(c[1].topic_id for c in persister.calls)
        assert all(c[1].group_id == "g1" for c in persister.calls)
        wait_until(lambda: share_group(kafka, "g1").initialized)
        r = hb(wire, "g1", "m1", 1)
        assert r.error_code == 0 and r.member_epoch == 2 and assigned(r) == {topic_id: [0, 1]}
        r2 = hb(wire, "g1", "m2", 0, ["sq"])
        r = hb(wire, "g1", "m1", 2)
        both = assigned(r2)[topic_id] + assigned(r)[topic_id]
        assert sorted(both) == [0, 1] and r.member_epoch == r2.member_epoch == 3
        # three members, two partitions: one partition goes to two members
        r3 = hb(wire, "g1", "m3", 0, ["sq"])
        assert len(assigned(r3)[topic_id]) == 1
        # Kafka's errors
        r = hb(wire, "g1", "m1", 99)
        assert r.error_code == 110 and "greater member epoch (99)" in r.error_message  # FENCED
        r = hb(wire, "g1", "nobody", 1)
        assert r.error_code == 25                                             # UNKNOWN_MEMBER
        r = hb(wire, "nope", "m1", 1)
        assert (r.error_code, r.error_message) == (69, "Share group nope not found.")
        r = hb(wire, "g1", "m9", 0)
        assert (r.error_code, r.error_message) == (
            42, "SubscribedTopicNames must be set in first request.")     # INVALID_REQUEST
        r = hb(wire, "g1", "", 0, ["sq"])
        assert (r.error_code, r.error_message) == (42, "MemberId can't be empty.")
        r = hb(wire, "g1", "m1", -2)
        assert (r.error_code, r.error_message) == (42, "MemberEpoch is invalid.")
        r = hb(wire, "g1", "m1", 0, ["sq"], rack_id="")
        assert (r.error_code, r.error_message) == (42, "RackId can't be empty.")
        # leave
        for m in ("m2", "m3"):
            r = hb(wire, "g1", m, -1)
            assert (r.error_code, r.member_epoch) == (0, -1)
        assert set(share_group(kafka, "g1").members) == {"m1"}


def test_share_id_against_other_group_types(share_broker):
    kafka, _ = share_broker
    bootstrap = kafka.bootstrap_servers
    ensure_topic(bootstrap, "sq2", 1)
    from kbroker.protocol.messages.consumer_group_heartbeat import \
        ConsumerGroupHeartbeatRequest as C
    with Wire(bootstrap) as wire:
        wire.api_versions()
        assert hb(wire, "shared", "m1", 0, ["sq2"]).error_code == 0
        r = wire.call(68, 0, C(group_id="shared", member_id="c1", member_epoch=0,
                               rebalance_timeout_ms=5000, subscribed_topic_names=["sq2"],
                               topic_partitions=[]))
        assert (r.error_code, r.error_message) == (69, "Group shared is not a consumer group.")
        r = wire.call(68, 0, C(group_id="plain", member_id="c1", member_epoch=0,
                               rebalance_timeout_ms=5000, subscribed_topic_names=["sq2"],
                               topic_partitions=[]))
        assert r.error_code == 0
        r = hb(wire, "plain", "m1", 0, ["sq2"])
        assert (r.error_code, r.error_message) == (69, "Group plain is not a share group.")


@pytest.mark.skipif(shutil.which("java") is None, reason="needs a JDK")
def test_java_share_consumer_joins_and_gets_its_assignment(share_broker):
    if not JAVA_JAR.exists():
        pytest.fail(f"{JAVA_JAR} is missing: build it with mvn -f compat_tests/java/pom.xml "
                    f"package (make test does)")
    kafka, persister = share_broker
    bootstrap = kafka.bootstrap_servers
    ensure_topic(bootstrap, "jq", 3)
    group = f"java-{uuid.uuid4().hex[:8]}"
    process = subprocess.Popen(["java", "-cp", str(JAVA_JAR), str(SHARE_JOIN), bootstrap, group,
                                "jq", "15"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    try:
        def member():
            g = share_group(kafka, group)
            if g is None or not g.members:
                return None
            m = next(iter(g.members.values()))
            return m if sum(len(p) for p in m.assigned.values()) == 3 else None
        m = wait_until(member, timeout=60, message="the Java share consumer gets all 3 partitions")
        assert m.client_id == "share-join" and m.subscribed == ("jq",)
        assert sorted(next(iter(m.assigned.values()))) == [0, 1, 2]
        out, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert "polling" in out and "closed" in out, out
    # close() sent the leave heartbeat: the group is empty again
    wait_until(lambda: share_group(kafka, group).members == {}, timeout=10)
