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
from tests import java_source
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
        # built on the broker's loop (the coordinators are built on first use)
        kafka.call(_on_loop(lambda: kafka.broker.coordinators.ensure()))
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
    return shard.find_group(group, "share")


def test_heartbeat_initializes_then_assigns(share_broker):
    kafka, persister = share_broker
    bootstrap = kafka.bootstrap_servers
    ensure_topic(bootstrap, "sq", 2)
    with Wire(bootstrap) as wire:
        wire.api_versions()
        assert wire.versions[SHARE_HB] == (1, 1)
        r = hb(wire, "g1", "m1", 0, ["sq"])
        assert (r.error_code, r.member_epoch, r.heartbeat_interval_ms) == (0, 2, 200)
        assert r.member_id == "m1" and assigned(r) == {}     # not initialized yet: nothing
        wait_until(lambda: len([c for c in persister.calls if c[0] == "initialize"]) == 2,
                   message="the persister initializes both share partitions")
        inits = sorted((c[1].partition, c[2], c[3]) for c in persister.calls
                       if c[0] == "initialize")
        assert inits == [(0, 2, -1), (1, 2, -1)]          # state epoch = group epoch
        topic_id = next(c[1].topic_id for c in persister.calls)
        assert all(c[1].group_id == "g1" for c in persister.calls)
        wait_until(lambda: share_group(kafka, "g1").initialized)
        r = hb(wire, "g1", "m1", 2)
        assert r.error_code == 0 and r.member_epoch == 3 and assigned(r) == {topic_id: [0, 1]}
        r2 = hb(wire, "g1", "m2", 0, ["sq"])
        r = hb(wire, "g1", "m1", 3)
        both = assigned(r2)[topic_id] + assigned(r)[topic_id]
        assert sorted(both) == [0, 1] and r.member_epoch == r2.member_epoch == 4
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
    process = subprocess.Popen([*java_source.command(SHARE_JOIN, str(JAVA_JAR)), bootstrap, group,
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


def test_describe_list_delete_as_kafka(share_broker):
    """What Kafka 4.4.0 answers, checked side by side (tests/integration/test_share_groups.py's
    expectations come from a real Kafka 4.4.0 broker given the same requests)."""
    from kbroker.protocol.messages.delete_groups import DeleteGroupsRequest as DG
    from kbroker.protocol.messages.describe_groups import DescribeGroupsRequest as D
    from kbroker.protocol.messages.join_group import JoinGroupRequest as J
    from kbroker.protocol.messages.list_groups import ListGroupsRequest as L
    from kbroker.protocol.messages.share_group_describe import ShareGroupDescribeRequest as SD
    kafka, persister = share_broker
    bootstrap = kafka.bootstrap_servers
    ensure_topic(bootstrap, "dq", 2)
    with Wire(bootstrap) as wire:
        wire.api_versions()
        r = hb(wire, "sg", "m1", 0, ["dq"])
        assert r.member_epoch == 2 and r.heartbeat_interval_ms == 200  # Kafka: epochs from 1
        wait_until(lambda: share_group(kafka, "sg").initialized)
        r = hb(wire, "sg", "m1", r.member_epoch)
        topic_id = next(iter(assigned(r)))
        r = wire.call(77, 1, SD(group_ids=["sg", "nope", ""]))
        g, nope, empty = r.groups
        assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch,
                g.assignor_name) == (0, "Stable", 3, 3, "simple")
        (m,) = g.members
        assert (m.member_id, m.member_epoch, m.client_id, m.client_host, m.rack_id,
                m.subscribed_topic_names) == ("m1", 3, "kbroker-tests", "/127.0.0.1", None,
                                              ["dq"])
        assert [(t.topic_id, t.topic_name, t.partitions)
                for t in m.assignment.topic_partitions] == [(topic_id, "dq", [0, 1])]
        assert (nope.error_code, nope.error_message) == (69, "Group nope not found.")
        assert empty.error_code == 24                                       # INVALID_GROUP_ID
        r = wire.call(11, 9, J(group_id="sg", session_timeout_ms=10000,
                               rebalance_timeout_ms=10000, member_id="", protocol_type="consumer",
                               protocols=[J.JoinGroupRequestProtocol(name="range",
                                                                     metadata=b"")]))
        assert r.error_code == 23                                  # INCONSISTENT_GROUP_PROTOCOL
        g = wire.call(15, 6, D(groups=["sg"])).groups[0]
        assert (g.error_code, g.error_message, g.group_state) == (
            69, "Group sg is not a classic group.", "Dead")
        listed = wire.call(16, 5, L(states_filter=[], types_filter=["share"])).groups
        assert [(x.group_id, x.protocol_type, x.group_state, x.group_type) for x in listed] == [
            ("sg", "share", "Stable", "share")]
        assert wire.call(16, 5, L(states_filter=[], types_filter=["consumer"])).groups == []
        from kbroker.protocol import messages
        OC, OF, LG = (messages.request_class(k) for k in (8, 9, 13))
        CD, SSD = messages.request_class(69), messages.request_class(89)
        r = wire.call(8, 9, OC(group_id="sg", generation_id_or_member_epoch=-1, member_id="",
                               topics=[OC.OffsetCommitRequestTopic(name="dq", partitions=[
                                   OC.OffsetCommitRequestPartition(partition_index=0,
                                                                   committed_offset=1)])]))
        assert r.topics[0].partitions[0].error_code == 69        # no offsets in a share group
        r = wire.call(9, 9, OF(groups=[OF.OffsetFetchRequestGroup(group_id="sg", topics=None)]))
        assert (r.groups[0].error_code, r.groups[0].topics) == (0, [])
        r = wire.call(13, 5, LG(group_id="sg", members=[LG.MemberIdentity(member_id="x")]))
        assert (r.error_code, [m.error_code for m in r.members]) == (0, [25])
        g = wire.call(69, 1, CD(group_ids=["sg"])).groups[0]
        assert (g.error_code, g.error_message) == (69, "Group sg is not a consumer group.")
        g = wire.call(89, 0, SSD(group_ids=["sg"])).groups[0]
        assert (g.error_code, g.error_message) == (69, "Group sg is not a streams group.")
        r = wire.call(42, 2, DG(groups_names=["sg"]))
        assert [(x.group_id, x.error_code) for x in r.results] == [("sg", 68)]  # NON_EMPTY
        assert hb(wire, "sg", "m1", -1).member_epoch == -1
        g = wire.call(77, 1, SD(group_ids=["sg"])).groups[0]
        assert (g.group_state, g.group_epoch, g.assignment_epoch) == ("Empty", 4, 4)
        before = [c for c in persister.calls if c[0] == "delete"]
        assert before == []
        r = wire.call(42, 2, DG(groups_names=["sg", "nope"]))
        assert sorted((x.group_id, x.error_code) for x in r.results) == [("nope", 69), ("sg", 0)]
        deleted = sorted(c[1].partition for c in persister.calls if c[0] == "delete")
        assert deleted == [0, 1]                       # its share partitions' state went first
        r = hb(wire, "sg", "m1", 1)
        assert (r.error_code, r.error_message) == (69, "Share group sg not found.")


def test_share_version_zero_turns_share_groups_off(share_broker):
    from kbroker.protocol.messages.share_group_describe import ShareGroupDescribeRequest as SD
    from kbroker.protocol.messages.update_features import UpdateFeaturesRequest as U
    kafka, _ = share_broker
    bootstrap = kafka.bootstrap_servers
    ensure_topic(bootstrap, "vq", 1)

    def update(level, upgrade_type):
        with Wire(bootstrap) as wire:
            wire.api_versions()
            return wire.call(57, 1, U(timeout_ms=10000, validate_only=False, feature_updates=[
                U.FeatureUpdateKey(feature="share.version", max_version_level=level,
                                   upgrade_type=upgrade_type)]))

    with Wire(bootstrap) as wire:
        r = wire.api_versions(4)
        assert ("share.version", 0, 2) in [(f.name, f.min_version, f.max_version)
                                           for f in r.supported_features]
        assert ("share.version", 2) in [(f.name, f.max_version_level)
                                        for f in r.finalized_features]
    assert update(0, 3).error_code == 0                                 # unsafe downgrade
    with Wire(bootstrap) as wire:
        r = wire.api_versions(4)
        assert "share.version" not in [f.name for f in r.finalized_features]
        assert wire.versions[SHARE_HB] == (1, 1)                        # still advertised
        r = hb(wire, "off", "m1", 0, ["vq"])
        assert (r.error_code, r.error_message) == (35, None)           # UNSUPPORTED_VERSION
        g = wire.call(77, 1, SD(group_ids=["off"])).groups[0]
        assert (g.error_code, g.error_message) == (35, None)
    assert update(2, 1).error_code == 0
    with Wire(bootstrap) as wire:
        wire.api_versions()
        assert hb(wire, "off", "m1", 0, ["vq"]).error_code == 0


def test_share_group_offsets_apis_as_kafka(share_broker):
    """DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets answered as
    a real Kafka 4.4.0 broker answers the same requests (the expectations were taken from it)."""
    from confluent_kafka import Producer

    from kbroker.protocol.messages.alter_share_group_offsets import \
        AlterShareGroupOffsetsRequest as AO
    from kbroker.protocol.messages.delete_share_group_offsets import \
        DeleteShareGroupOffsetsRequest as XO
    from kbroker.protocol.messages.describe_share_group_offsets import \
        DescribeShareGroupOffsetsRequest as DO
    kafka, persister = share_broker
    bootstrap = kafka.bootstrap_servers
    ensure_topic(bootstrap, "oq", 2)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(5):
        producer.produce("oq", value=b"v%d" % i, partition=0)
    assert producer.flush(10) == 0
    missing_text = "This server does not host this topic-partition."

    with Wire(bootstrap) as wire:
        wire.api_versions()

        def describe(group, topics=None):
            g = wire.call(90, 1, DO(groups=[DO.DescribeShareGroupOffsetsRequestGroup(
                group_id=group, topics=None if topics is None else [
                    DO.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=p)
                    for t, p in topics])])).groups[0]
            return g.error_code, [(t.topic_name, t.topic_id == uuid.UUID(int=0),
                                   [(p.partition_index, p.start_offset, p.lag, p.error_code)
                                    for p in t.partitions]) for t in g.topics]

        def alter(group, topics):
            r = wire.call(91, 0, AO(group_id=group, topics=[AO.AlterShareGroupOffsetsRequestTopic(
                topic_name=t, partitions=[AO.AlterShareGroupOffsetsRequestPartition(
                    partition_index=p, start_offset=o) for p, o in ps]) for t, ps in topics]))
            return r.error_code, r.error_message, sorted(
                (t.topic_name, [(p.partition_index, p.error_code, p.error_message)
                                for p in t.partitions]) for t in r.responses)

        def delete(group, names):
            r = wire.call(92, 0, XO(group_id=group, topics=[
                XO.DeleteShareGroupOffsetsRequestTopic(topic_name=n) for n in names]))
            return r.error_code, r.error_message, sorted(
                (t.topic_name, t.topic_id == uuid.UUID(int=0), t.error_code, t.error_message)
                for t in r.responses)

        r = hb(wire, "og", "m1", 0, ["oq"])
        wait_until(lambda: share_group(kafka, "og").initialized)
        # initialized at -1 (no share partition has loaded them yet): no offset, no lag
        assert describe("og") == (0, [("oq", False, [(0, -1, -1, 0), (1, -1, -1, 0)])])
        assert describe("og", [("oq", [0, 5])]) == (0, [("oq", False, [(0, -1, -1, 0),
                                                                      (5, -1, -1, 0)])])
        assert describe("og", [("zz", [0])]) == (0, [("zz", True, [(0, -1, -1, 0)])])
        assert describe("nogroup") == (0, [])
        assert alter("og", [("oq", [(0, 1)])]) == (68, "The group is not empty.", [])
        assert delete("og", ["oq"]) == (68, "The group is not empty.", [])
        hb(wire, "og", "m1", -1)
        assert alter("og", [("oq", [(0, 2), (7, 3)]), ("zz", [(0, 1)])]) == (0, None, [
            ("oq", [(0, 0, None), (7, 3, missing_text)]), ("zz", [(0, 3, missing_text)])])
        assert (0, 2) in [(c[1].partition, c[3]) for c in persister.calls if c[0] == "initialize"]
        assert alter("", [("oq", [(0, 0)])]) == (24, "The group id is invalid.", [])
        assert describe("og") == (0, [("oq", False, [(0, 2, 3, 0), (1, -1, -1, 0)])])  # 5-2-0
        assert alter("fresh", [("oq", [(1, 0)])])[0] == 0                # creates the group
        assert describe("fresh") == (0, [("oq", False, [(1, 0, 0, 0)])])
        assert delete("og", ["oq", "zz"]) == (0, None, [("oq", False, 0, None),
                                                        ("zz", True, 3, missing_text)])
        assert delete("og", ["oq"]) == (0, None, [
            ("oq", True, 3, "There is no offset information to delete.")])
        assert describe("og") == (0, [])
        assert delete("nogroup", ["oq"]) == (69, "Group nogroup not found.", [])
        assert delete("", ["oq"]) == (24, "The group id is invalid.", [])


def test_deleting_a_topic_forgets_its_share_state_metadata(share_broker):
    from confluent_kafka.admin import AdminClient
    kafka, _ = share_broker
    bootstrap = kafka.bootstrap_servers
    ensure_topic(bootstrap, "gone", 2)
    with Wire(bootstrap) as wire:
        wire.api_versions()
        assert hb(wire, "dg", "m1", 0, ["gone"]).error_code == 0
    wait_until(lambda: share_group(kafka, "dg").initialized)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics(["gone"])["gone"].result(20)
    wait_until(lambda: not share_group(kafka, "dg").initialized,
               message="the deleted topic leaves ShareGroupStatePartitionMetadata")


async def _on_loop(work):
    return work()
