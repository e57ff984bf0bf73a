"""Consumer groups (KIP-848, ``group.protocol=consumer``) with real clients: confluent-kafka
(librdkafka) and the Java consumer, against a real broker process.

Covered: joining and consuming, commit and resume, three members splitting partitions with
incremental moves (the broker never lets two members own a partition at once), a static member
restarting without a rebalance, a regex subscription picking up a topic created later, the group
rebuilt with its epochs and assignments after ``kill -9``, every bad input answered with Kafka's
error while the group's members carry on, and Kafka 4.4.0's DumpLogSegments decoding the records.

The broker runs with a 500 ms consumer heartbeat interval and short sessions, so that tests wait
for the protocol's own timing, never for fixed sleeps.
"""

from __future__ import annotations

import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError as CKafkaError, TopicPartition

from tests.integration.clients import Wire, ensure_topic, produce_confluent, wait_until

ROOT = Path(__file__).resolve().parents[2]
JAVA_JAR = ROOT / "compat_tests" / "java" / "target" / "kbroker-java-driver.jar"
BROKER = {"group.consumer.heartbeat.interval.ms": 500,
          "group.consumer.min.heartbeat.interval.ms": 100,
          "group.consumer.session.timeout.ms": 6000,
          "group.consumer.min.session.timeout.ms": 1000,
          "offsets.topic.num.partitions": 4}
HEARTBEAT, DESCRIBE, JOIN = 68, 69, 11


@pytest.fixture
def cg_broker(broker_factory):
    return broker_factory(BROKER)


def consumer(bootstrap, group, **extra):
    config = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
              "auto.offset.reset": "earliest", "enable.auto.commit": False}
    config.update(extra)
    return Consumer(config)


def describe(bootstrap, group):
    """The group as ConsumerGroupDescribe shows it: (state, epoch, assignment epoch,
    {member: (epoch, sorted [(topic, partition)])})."""
    from kbroker.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
    with Wire(bootstrap) as wire:
        response = wire.call(DESCRIBE, 1, ConsumerGroupDescribeRequest(group_ids=[group]))
    g = response.groups[0]
    members = {m.member_id: (m.member_epoch, sorted((tp.topic_name, p)
                                                    for tp in m.assignment.topic_partitions
                                                    for p in tp.partitions))
               for m in g.members}
    return g.error_code, g.group_state, g.group_epoch, g.assignment_epoch, members


class Member:
    """A confluent-kafka consumer polling in its own thread, recording what it reads."""

    def __init__(self, bootstrap, group, topics=None, pattern=None, **extra):
        self.consumer = consumer(bootstrap, group, **extra)
        self.records: list = []
        self.member_id = None
        self.stop_flag = threading.Event()
        self.consumer.subscribe([pattern] if pattern else topics)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop_flag.is_set():
            msg = self.consumer.poll(0.1)
            # Read here: librdkafka's handle is not used from two threads at once by the tests.
            self.member_id = self.consumer.memberid()
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() != CKafkaError._PARTITION_EOF:
                    self.records.append(("error", str(msg.error())))
                continue
            self.records.append((msg.topic(), msg.partition(), msg.offset(), msg.value()))
            self.consumer.commit(msg, asynchronous=True)

    def close(self):
        """Stop polling, commit what was read (librdkafka serves a synchronous commit through
        the poll, so only once the polling thread is done), leave the group."""
        self.stop_flag.set()
        self.thread.join(10)
        try:
            self.consumer.commit(asynchronous=False)
        except Exception:
            pass  # nothing new to commit
        self.consumer.close()

    def values(self):
        return [r[3] for r in self.records if r[0] != "error"]


def test_join_consume_commit_and_resume(cg_broker):
    topic, group = f"cg-{uuid.uuid4().hex[:6]}", "g-resume"
    ensure_topic(cg_broker.bootstrap, topic, 3)
    produce_confluent(cg_broker.bootstrap, topic, [f"a{i}".encode() for i in range(30)])
    first = Member(cg_broker.bootstrap, group, [topic])
    wait_until(lambda: len(first.values()) == 30, 20, message="the first member to read everything")
    first.close()
    error, state, epoch, _, members = describe(cg_broker.bootstrap, group)
    assert (error, state, members) == (0, "Empty", {})
    produce_confluent(cg_broker.bootstrap, topic, [f"b{i}".encode() for i in range(10)])
    second = Member(cg_broker.bootstrap, group, [topic])
    wait_until(lambda: len(second.values()) >= 10, 20, message="the second member to read the rest")
    time.sleep(1)
    second.close()
    assert sorted(second.values()) == sorted(f"b{i}".encode() for i in range(10))


def test_three_members_move_partitions_incrementally(cg_broker):
    topic, group = f"cg3-{uuid.uuid4().hex[:6]}", "g-three"
    ensure_topic(cg_broker.bootstrap, topic, 6)
    sent = []
    stop = threading.Event()

    def produce():
        n = 0
        while not stop.is_set():
            batch = [f"r{n}-{i}".encode() for i in range(6)]
            produce_confluent(cg_broker.bootstrap, topic, batch)
            sent.extend(batch)
            n += 1
            time.sleep(0.2)

    overlaps = []

    def watch():  # the broker must never let two members own a partition at once
        while not stop.is_set():
            _, _, _, _, members = describe(cg_broker.bootstrap, group)
            owned = [tp for _, parts in members.values() for tp in parts]
            if len(owned) != len(set(owned)):
                overlaps.append(members)
            time.sleep(0.05)

    producer = threading.Thread(target=produce, daemon=True)
    watcher = threading.Thread(target=watch, daemon=True)
    producer.start()
    members = [Member(cg_broker.bootstrap, group, [topic])]
    watcher.start()
    try:
        for _ in range(2):
            time.sleep(1)
            members.append(Member(cg_broker.bootstrap, group, [topic]))

        def split():
            error, state, epoch, assignment_epoch, described = describe(cg_broker.bootstrap,
                                                                        group)
            sizes = sorted(len(parts) for _, parts in described.values())
            return state == "Stable" and sizes == [2, 2, 2]
        wait_until(split, 30, message="three members with two partitions each")
    finally:
        stop.set()
        producer.join(10)
    wait_until(lambda: set(sent) <= {v for m in members for v in m.values()}, 20, message="every record consumed")
    watcher.join(5)
    for m in members:
        m.close()
    assert not overlaps, f"a partition had two owners: {overlaps[0]}"
    errors = [r for m in members for r in m.records if r[0] == "error"]
    assert not errors, errors


def test_static_member_restarts_without_rebalance(cg_broker):
    topic, group = f"cgs-{uuid.uuid4().hex[:6]}", "g-static"
    ensure_topic(cg_broker.bootstrap, topic, 4)
    a = Member(cg_broker.bootstrap, group, [topic], **{"group.instance.id": "i-a"})
    b = Member(cg_broker.bootstrap, group, [topic], **{"group.instance.id": "i-b"})

    def stable():
        _, state, _, _, described = describe(cg_broker.bootstrap, group)
        return state == "Stable" and sorted(len(p) for _, p in described.values()) == [2, 2]
    wait_until(stable, 30, message="two static members splitting four partitions")
    _, _, epoch, _, before = describe(cg_broker.bootstrap, group)
    parts_a = next(p for mid, (_, p) in before.items()
                   if mid == a.member_id)
    a.close()  # a static member leaves temporarily (epoch -2): its partitions wait for it
    a2 = Member(cg_broker.bootstrap, group, [topic], **{"group.instance.id": "i-a"})
    wait_until(lambda: a2.member_id in describe(cg_broker.bootstrap, group)[4]
               and stable(), 30, message="the restarted static member back in the group")
    _, _, epoch_after, _, after = describe(cg_broker.bootstrap, group)
    assert epoch_after == epoch, "the static member's restart moved the group epoch"
    assert after[a2.member_id][1] == parts_a
    a2.close()
    b.close()


def test_regex_subscription_picks_up_a_new_topic(cg_broker):
    prefix = f"rx{uuid.uuid4().hex[:6]}"
    ensure_topic(cg_broker.bootstrap, f"{prefix}-1", 2)
    member = Member(cg_broker.bootstrap, "g-regex", pattern=f"^{prefix}-.*")
    produce_confluent(cg_broker.bootstrap, f"{prefix}-1", [b"one"])
    wait_until(lambda: b"one" in member.values(), 20, message="the first topic's record")
    ensure_topic(cg_broker.bootstrap, f"{prefix}-2", 3)
    produce_confluent(cg_broker.bootstrap, f"{prefix}-2", [b"two"])
    # Regexes are re-resolved at most every 10 s (Kafka's interval) after a topic is created.
    wait_until(lambda: b"two" in member.values(), 40, message="the record of the topic created later")
    member.close()


def test_kill9_rebuilds_the_group(cg_broker):
    topic, group = f"cgk-{uuid.uuid4().hex[:6]}", "g-kill"
    ensure_topic(cg_broker.bootstrap, topic, 4)
    a = Member(cg_broker.bootstrap, group, [topic])
    b = Member(cg_broker.bootstrap, group, [topic])

    def stable():
        _, state, _, _, described = describe(cg_broker.bootstrap, group)
        return state == "Stable" and sorted(len(p) for _, p in described.values()) == [2, 2]
    wait_until(stable, 30, message="two members splitting four partitions")
    before = describe(cg_broker.bootstrap, group)
    a.stop_flag.set(), b.stop_flag.set()
    a.thread.join(5), b.thread.join(5)
    cg_broker.kill()
    cg_broker.start()
    assert describe(cg_broker.bootstrap, group) == before
    # The members carry on at their epochs: no rebalance.
    for m in (a, b):
        m.stop_flag.clear()
        m.thread = threading.Thread(target=m._run, daemon=True)
        m.thread.start()
    time.sleep(3)
    after = describe(cg_broker.bootstrap, group)
    assert after[2] == before[2] and after[4] == before[4]
    a.close()
    b.close()


def _heartbeat(wire, version=1, **fields):
    from kbroker.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
    fields.setdefault("member_id", uuid.uuid4().hex)
    return wire.call(HEARTBEAT, version, ConsumerGroupHeartbeatRequest(**fields))


def test_bad_input_gets_kafkas_errors_and_the_group_carries_on(cg_broker):
    from kbroker.protocol.errors import Errors
    topic, group = f"cgb-{uuid.uuid4().hex[:6]}", "g-bad"
    ensure_topic(cg_broker.bootstrap, topic, 2)
    member = Member(cg_broker.bootstrap, group, [topic])
    wait_until(lambda: describe(cg_broker.bootstrap, group)[1] == "Stable", 20, message="stable")
    join = dict(group_id=group, member_epoch=0, rebalance_timeout_ms=1000, topic_partitions=[])
    with Wire(cg_broker.bootstrap) as wire:
        r = _heartbeat(wire, subscribed_topic_regex="(unclosed", **join)
        assert r.error_code == Errors.INVALID_REGULAR_EXPRESSION.code
        assert "not a valid regular expression" in r.error_message
        r = _heartbeat(wire, subscribed_topic_regex="(?<=a)b", **join)  # Java regex, not RE2
        assert r.error_code == Errors.INVALID_REGULAR_EXPRESSION.code
        r = _heartbeat(wire, group_id=group, member_epoch=12345)
        assert r.error_code == Errors.UNKNOWN_MEMBER_ID.code
        # The member thread reads its id on its next poll, which may come after describe
        # already shows the group Stable.
        mid = wait_until(lambda: member.member_id, 10, message="the member's id")
        r = _heartbeat(wire, group_id=group, member_id=mid, member_epoch=12345)
        assert r.error_code == Errors.FENCED_MEMBER_EPOCH.code
        r = _heartbeat(wire, group_id=group, member_epoch=0, topic_partitions=[])
        assert r.error_code == Errors.INVALID_REQUEST.code  # no rebalance timeout
        r = _heartbeat(wire, subscribed_topic_names=["t"] * 100_000, server_assignor="sticky",
                       **join)
        assert r.error_code == Errors.UNSUPPORTED_ASSIGNOR.code
        r = _heartbeat(wire, member_id="", **join, subscribed_topic_names=[topic])
        assert r.error_code == Errors.INVALID_REQUEST.code  # v1: the client makes its id
        # A JoinGroup of another protocol type for the consumer group.
        from kbroker.protocol.messages.join_group import JoinGroupRequest
        j = wire.call(JOIN, 9, JoinGroupRequest(
            group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
            protocol_type="connect", protocols=[JoinGroupRequest.JoinGroupRequestProtocol(
                name="default", metadata=b"x")]))
        assert j.error_code == Errors.INCONSISTENT_GROUP_PROTOCOL.code
    # A consumer-protocol heartbeat for a classic group of another protocol.
    with Wire(cg_broker.bootstrap) as wire:
        from kbroker.protocol.messages.join_group import JoinGroupRequest
        req = JoinGroupRequest(group_id="g-connect", session_timeout_ms=10000,
                               rebalance_timeout_ms=10000, member_id="", protocol_type="connect",
                               protocols=[JoinGroupRequest.JoinGroupRequestProtocol(
                                   name="default", metadata=b"x")])
        first = wire.call(JOIN, 9, req)
        req.member_id = first.member_id
        assert wire.call(JOIN, 9, req).error_code == 0
        r = _heartbeat(wire, group_id="g-connect", subscribed_topic_names=[topic],
                       member_epoch=0, rebalance_timeout_ms=1000, topic_partitions=[])
        assert r.error_code == Errors.GROUP_ID_NOT_FOUND.code
        assert "does not use the consumer embedded protocol" in r.error_message
    # The real member carried on.
    produce_confluent(cg_broker.bootstrap, topic, [b"after"])
    wait_until(lambda: b"after" in member.values(), 20, message="the member to go on consuming")
    member.close()
    log = cg_broker.log()
    assert log.count("INVALID_REGULAR_EXPRESSION") == 2, "one log line per bad request"


def test_java_consumer_and_dump_log_segments(cg_broker):
    from tests.log.conftest import kafka_java
    assert JAVA_JAR.exists(), f"{JAVA_JAR} is missing: run scripts/install-test-deps.sh"
    topic, group = f"cgj-{uuid.uuid4().hex[:6]}", "g-java"
    ensure_topic(cg_broker.bootstrap, topic, 3)
    produce_confluent(cg_broker.bootstrap, topic, [f"j{i}".encode() for i in range(30)])
    out = subprocess.run(["java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-jar",
                          str(JAVA_JAR), "consume", "--bootstrap", cg_broker.bootstrap, "--topic",
                          topic, "--count", "30", "--group", group, "--from-beginning",
                          "--property", "group.protocol=consumer", "--timeout-ms", "30000"],
                         capture_output=True, text=True, timeout=90)
    assert out.returncode == 0, out.stderr[-2000:]
    assert '"consumed":30' in out.stdout
    # Kafka 4.4.0's own tool decodes every record we wrote for the group.
    segments = sorted(Path(cg_broker.data_dir).glob("__consumer_offsets-*/*.log"))
    dump = subprocess.run([*kafka_java("org.apache.kafka.tools.DumpLogSegments"),
                           "--offsets-decoder",
                           "--files", ",".join(map(str, segments))],
                          capture_output=True, text=True, timeout=120)
    assert dump.returncode == 0, dump.stderr[-2000:]
    # Record types: 1 OffsetCommit, 3 ConsumerGroupMetadata, 5 ...MemberMetadata,
    # 6 ...TargetAssignmentMetadata, 7 ...TargetAssignmentMember, 8 ...CurrentMemberAssignment.
    for record_type in (1, 3, 5, 6, 7, 8):
        assert f'key: {{"type":"{record_type}"' in dump.stdout, record_type
    assert "Error at offset" not in dump.stdout, dump.stdout[:3000]
    assert "Exception" not in dump.stdout + dump.stderr


def _consumer_groups_command(bootstrap, *args) -> str:
    import sys
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "kafka_ref" / "run_kafka.py"),
                          "run-class", "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
                          "--", "--bootstrap-server", bootstrap, *args],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def test_kafka_consumer_groups_command(cg_broker):
    """Kafka 4.4.0's kafka-consumer-groups.sh: list, describe (offsets, members, state),
    reset-offsets and delete of a consumer-protocol group."""
    topic, group = f"cgc-{uuid.uuid4().hex[:6]}", "g-cmd"
    ensure_topic(cg_broker.bootstrap, topic, 3)
    produce_confluent(cg_broker.bootstrap, topic, [f"c{i}".encode() for i in range(30)])
    member = Member(cg_broker.bootstrap, group, [topic], **{"client.id": "cmd-client"})
    wait_until(lambda: len(member.values()) == 30, 20, message="every record read")
    wait_until(lambda: describe(cg_broker.bootstrap, group)[1] == "Stable", 20, message="Stable")
    listed = _consumer_groups_command(cg_broker.bootstrap, "--list", "--type", "consumer")
    assert any(line.split()[:2] == [group, "Consumer"] for line in listed.splitlines())
    members = _consumer_groups_command(cg_broker.bootstrap, "--describe", "--group", group,
                                       "--members", "--verbose")
    row = next(line.split() for line in members.splitlines() if line.startswith(group))
    assert row[3:5] == ["cmd-client", "3"] and row[6] == f"{topic}:0,1,2", members
    state = _consumer_groups_command(cg_broker.bootstrap, "--describe", "--group", group,
                                     "--state")
    assert "uniform" in state and "Stable" in state, state
    member.close()
    reset = _consumer_groups_command(cg_broker.bootstrap, "--reset-offsets", "--group", group,
                                     "--topic", topic, "--to-earliest", "--execute")
    assert sorted(line.split()[-1] for line in reset.splitlines()
                  if line.startswith(group)) == ["0", "0", "0"], reset
    offsets = _consumer_groups_command(cg_broker.bootstrap, "--describe", "--group", group)
    rows = [line.split() for line in offsets.splitlines() if line.startswith(group)]
    assert [(r[3], r[6]) for r in rows] == [("0", "-")] * 3, offsets  # offsets 0, no member
    deleted = _consumer_groups_command(cg_broker.bootstrap, "--delete", "--group", group)
    assert "was successful" in deleted
    assert group not in _consumer_groups_command(cg_broker.bootstrap, "--list")


def test_group_configs(cg_broker):
    """consumer.* group configs through IncrementalAlterConfigs / DescribeConfigs on the GROUP
    resource, with Kafka's validation; the heartbeat hands out the group's interval; they
    survive a restart."""
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,
                                       ConfigResource, ResourceType)
    admin = AdminClient({"bootstrap.servers": cg_broker.bootstrap})

    def alter(name, value):
        resource = ConfigResource(ResourceType.GROUP, "g-configs", incremental_configs=[
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)])
        return admin.incremental_alter_configs([resource])[resource]

    def described():
        resource = ConfigResource(ResourceType.GROUP, "g-configs")
        return admin.describe_configs([resource])[resource].result(20)

    alter("consumer.heartbeat.interval.ms", "700").result(20)
    entry = described()["consumer.heartbeat.interval.ms"]
    assert entry.value == "700" and entry.source == 8  # GROUP_CONFIG
    from kbroker.protocol import messages
    with Wire(cg_broker.bootstrap) as wire:  # ListConfigResources v1: groups with configs
        listed = wire.call(74, 1, messages.request_class(74)(resource_types=[32]))
    assert [(r.resource_name, r.resource_type) for r in listed.config_resources] == [
        ("g-configs", 32)]
    assert described()["consumer.session.timeout.ms"].value == "6000"  # the broker's
    for name, value, text in (("consumer.heartbeat.interval.ms", "50", "must be in the range 100 to 15000"),
                              ("consumer.nope", "1", "Unknown group config name"),
                              ("errors.deadletterqueue.topic.name", "__dlq",
                               "DLQ topic name must not start with '__'")):
        with pytest.raises(Exception) as err:
            alter(name, value).result(20)
        assert text in str(err.value)
    topic = f"cgc-{uuid.uuid4().hex[:6]}"
    ensure_topic(cg_broker.bootstrap, topic, 1)
    with Wire(cg_broker.bootstrap) as wire:
        r = _heartbeat(wire, group_id="g-configs", member_epoch=0, rebalance_timeout_ms=1000,
                       topic_partitions=[], subscribed_topic_names=[topic])
        assert r.error_code == 0 and r.heartbeat_interval_ms == 700
        # A change applies to the running group: its member's next heartbeat gets it.
        alter("consumer.heartbeat.interval.ms", "900").result(20)
        again = _heartbeat(wire, group_id="g-configs", member_id=r.member_id,
                           member_epoch=r.member_epoch)
        assert again.error_code == 0 and again.heartbeat_interval_ms == 900
    cg_broker.stop()
    # A data dir of a kbroker that kept group configs in a side file: imported once.
    (cg_broker.data_dir / "group-configs.json").write_text(
        '{"g-old": {"consumer.session.timeout.ms": 50000}}')
    cg_broker.start()
    assert described()["consumer.heartbeat.interval.ms"].value == "900"
    old = ConfigResource(ResourceType.GROUP, "g-old")
    assert admin.describe_configs([old])[old].result(20)[
        "consumer.session.timeout.ms"].value == "50000"
    assert not (cg_broker.data_dir / "group-configs.json").exists()

    # Deleting a group keeps its configs, as on Kafka (DeleteGroups removes its records only).
    from confluent_kafka import TopicPartition
    committer = Consumer({"bootstrap.servers": cg_broker.bootstrap, "group.id": "g-old"})
    committer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    committer.close()
    admin.delete_consumer_groups(["g-old"], request_timeout=20)["g-old"].result(20)
    assert admin.describe_configs([old])[old].result(20)[
        "consumer.session.timeout.ms"].value == "50000"
