"""Streams groups (KIP-1071, ``group.protocol=streams``) against a real broker process: the
protocol on the wire, the broker creating internal topics, the group rebuilt after ``kill -9``,
bad input answered with Kafka's errors, and a real Kafka Streams 4.4 application
(exactly_once_v2 word count, two instances, one killed and restarted) whose read_committed
output equals the expected counts, with Kafka 4.4.0's DumpLogSegments decoding the group's
records; Kafka 4.4.0's kafka-streams-groups.sh lists and describes a group.

The broker runs with a short streams heartbeat interval, a 15 s session (JVMs on a loaded
machine stall) and no initial rebalance delay, so tests wait for the protocol's own timing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.integration.clients import Wire, ensure_topic, wait_until

ROOT = Path(__file__).resolve().parents[2]
JAVA_JAR = ROOT / "compat_tests" / "java" / "target" / "kbroker-java-driver.jar"
BROKER = {"group.streams.heartbeat.interval.ms": 500,
          "group.streams.min.heartbeat.interval.ms": 100,
          "group.streams.session.timeout.ms": 15000,
          "group.streams.min.session.timeout.ms": 1000,
          "group.streams.initial.rebalance.delay.ms": 0,
          "offsets.topic.num.partitions": 4}
STREAMS_HB, STREAMS_DESCRIBE, CONSUMER_HB, JOIN, LIST_GROUPS, DELETE = 88, 89, 68, 11, 16, 42


@pytest.fixture
def sg_broker(broker_factory):
    return broker_factory(BROKER)


def topology(source: str, app: str, epoch: int = 0, changelog_partitions: int = 0):
    from kbroker.protocol.messages.streams_group_heartbeat import \
        StreamsGroupHeartbeatRequest as Q
    return Q.Topology(epoch=epoch, subtopologies=[
        Q.Subtopology(subtopology_id="0", source_topics=[source],
                      repartition_sink_topics=[f"{app}-rep"]),
        Q.Subtopology(subtopology_id="1",
                      repartition_source_topics=[Q.TopicInfo(name=f"{app}-rep")],
                      state_changelog_topics=[Q.TopicInfo(
                          name=f"{app}-store-changelog", partitions=changelog_partitions,
                          topic_configs=[Q.KeyValue(key="cleanup.policy", value="compact")])])])


def heartbeat(wire, group, member, epoch, **fields):
    from kbroker.protocol.messages.streams_group_heartbeat import \
        StreamsGroupHeartbeatRequest as Q
    if epoch == 0:
        fields.setdefault("rebalance_timeout_ms", 30000)
        fields.setdefault("process_id", f"process-{member}")
        fields.setdefault("active_tasks", [])
        fields.setdefault("standby_tasks", [])
        fields.setdefault("warmup_tasks", [])
    return wire.call(STREAMS_HB, 1, Q(group_id=group, member_id=member, member_epoch=epoch,
                                       **fields))


def owned(response):
    from kbroker.protocol.messages.streams_group_heartbeat import \
        StreamsGroupHeartbeatRequest as Q
    return {kind: [Q.TaskIds(subtopology_id=t.subtopology_id, partitions=list(t.partitions))
                   for t in getattr(response, kind) or []]
            for kind in ("active_tasks", "standby_tasks", "warmup_tasks")}


def describe(bootstrap, group):
    from kbroker.protocol.messages.streams_group_describe import StreamsGroupDescribeRequest
    with Wire(bootstrap) as wire:
        return wire.call(STREAMS_DESCRIBE, 1,
                         StreamsGroupDescribeRequest(group_ids=[group])).groups[0]


def summary(g):
    return (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch,
            {m.member_id: (m.member_epoch, sorted((t.subtopology_id, p)
                                                  for t in m.assignment.active_tasks
                                                  for p in t.partitions))
             for m in g.members})


def test_protocol_internal_topics_describe_list_and_kill9(sg_broker):
    from kbroker.protocol.messages.list_groups import ListGroupsRequest
    app = f"sg-{uuid.uuid4().hex[:6]}"
    source = f"{app}-in"
    member = uuid.uuid4().hex
    with Wire(sg_broker.bootstrap) as wire:
        r = heartbeat(wire, app, member, 0, topology=topology(source, app))
        assert r.error_code == 0 and r.member_epoch >= 1
        assert [s.status_code for s in r.status] == [1]  # MISSING_SOURCE_TOPICS
        assert r.status[0].status_detail == f"Source topics {source} are missing."
        ensure_topic(sg_broker.bootstrap, source, 3)
        epoch, tasks = r.member_epoch, owned(r)

        def ready():
            nonlocal epoch, tasks, r
            r = heartbeat(wire, app, member, epoch, **tasks)
            assert r.error_code == 0, r.error_message
            epoch = r.member_epoch
            if r.active_tasks is not None:
                tasks = owned(r)
            return not r.status and sum(len(t.partitions) for t in tasks["active_tasks"]) == 6
        # MISSING_INTERNAL_TOPICS until the broker has created them.
        wait_until(ready, 30, message="the internal topics created and all six tasks assigned")
        meta = wire.metadata([f"{app}-rep", f"{app}-store-changelog"])
        assert sorted(len(t.partitions) for t in meta.topics) == [3, 3]
        listed = wire.call(LIST_GROUPS, 5, ListGroupsRequest(types_filter=["streams"])).groups
        assert [(g.group_id, g.protocol_type, g.group_state, g.group_type)
                for g in listed if g.group_id == app] == [(app, "streams", "Stable", "streams")]
    before = describe(sg_broker.bootstrap, app)
    assert before.group_state == "Stable" and before.assignor_name == "sticky"
    assert [s.subtopology_id for s in before.topology.subtopologies] == ["0", "1"]
    assert before.topology.subtopologies[1].state_changelog_topics[0].partitions == 3
    sg_broker.kill()
    sg_broker.start()
    after = describe(sg_broker.bootstrap, app)
    # Rebuilt from __consumer_offsets: members, epochs, tasks (NotReady until a member's
    # heartbeat configures the topology again, as in Kafka).
    assert summary(after)[2:] == summary(before)[2:]
    with Wire(sg_broker.bootstrap) as wire:
        r = heartbeat(wire, app, member, epoch, **tasks)
        assert r.error_code == 0 and r.member_epoch == epoch
    assert describe(sg_broker.bootstrap, app).group_state == "Stable"


def test_bad_input_gets_kafkas_errors(sg_broker):
    from kbroker.protocol.errors import Errors
    from kbroker.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
    from kbroker.protocol.messages.join_group import JoinGroupRequest
    app = f"sgb-{uuid.uuid4().hex[:6]}"
    source = f"{app}-in"
    ensure_topic(sg_broker.bootstrap, source, 2)
    member = uuid.uuid4().hex
    with Wire(sg_broker.bootstrap) as wire:
        r = heartbeat(wire, app, member, 0, topology=topology(source, app))
        assert r.error_code == 0
        epoch = r.member_epoch
        cases = [
            (heartbeat(wire, app, "nobody", epoch), Errors.UNKNOWN_MEMBER_ID,
             f"Member nobody is not a member of group {app}."),
            (heartbeat(wire, app, member, epoch + 10), Errors.FENCED_MEMBER_EPOCH, None),
            (heartbeat(wire, f"{app}-2", member, 0,
                       topology=topology(source, app, changelog_partitions=4)),
             Errors.STREAMS_INVALID_TOPOLOGY,
             f"Changelog topic {app}-store-changelog must have an undefined partition count, "
             f"but it is set to 4."),
            (heartbeat(wire, app, member, 0), Errors.INVALID_REQUEST,
             "Topology must be non-null when (re-)joining."),
            (heartbeat(wire, app, "", 0, topology=topology(source, app)),
             Errors.INVALID_REQUEST, "MemberId can't be empty."),
            (heartbeat(wire, f"{app}-none", member, 3), Errors.GROUP_ID_NOT_FOUND,
             f"Streams group {app}-none not found."),
        ]
        for response, error, message in cases:
            assert response.error_code == error.code, (error, response.error_message)
            if message is not None:
                assert response.error_message == message
        # A consumer-protocol heartbeat for the streams group, and the reverse.
        c = wire.call(CONSUMER_HB, 1, ConsumerGroupHeartbeatRequest(
            group_id=app, member_id=uuid.uuid4().hex, member_epoch=0, rebalance_timeout_ms=5000,
            subscribed_topic_names=[source], topic_partitions=[]))
        assert c.error_code == Errors.GROUP_ID_NOT_FOUND.code
        assert c.error_message == f"Group {app} is not a consumer group."
        consumer_group = f"{app}-consumer"
        c = wire.call(CONSUMER_HB, 1, ConsumerGroupHeartbeatRequest(
            group_id=consumer_group, member_id=uuid.uuid4().hex, member_epoch=0,
            rebalance_timeout_ms=5000, subscribed_topic_names=[source], topic_partitions=[]))
        assert c.error_code == 0
        s = heartbeat(wire, consumer_group, member, 0, topology=topology(source, app))
        assert s.error_code == Errors.GROUP_ID_NOT_FOUND.code
        assert s.error_message == f"Group {consumer_group} is not a streams group."
        # A classic member joining the streams group.
        j = wire.call(JOIN, 9, JoinGroupRequest(
            group_id=app, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
            protocol_type="consumer", protocols=[JoinGroupRequest.JoinGroupRequestProtocol(
                name="range", metadata=b"")]))
        assert j.error_code == Errors.INCONSISTENT_GROUP_PROTOCOL.code
        # The other group APIs name the group's type as Kafka does.
        from kbroker.protocol.messages.consumer_group_describe import \
            ConsumerGroupDescribeRequest
        from kbroker.protocol.messages.delete_groups import DeleteGroupsRequest
        from kbroker.protocol.messages.describe_groups import DescribeGroupsRequest
        from kbroker.protocol.messages.streams_group_describe import \
            StreamsGroupDescribeRequest
        d = wire.call(15, 6, DescribeGroupsRequest(groups=[app])).groups[0]
        assert (d.error_code, d.error_message) == (Errors.GROUP_ID_NOT_FOUND.code,
                                                   f"Group {app} is not a classic group.")
        d = wire.call(69, 1, ConsumerGroupDescribeRequest(group_ids=[app])).groups[0]
        assert (d.error_code, d.error_message) == (Errors.GROUP_ID_NOT_FOUND.code,
                                                   f"Group {app} is not a consumer group.")
        d = wire.call(STREAMS_DESCRIBE, 1,
                      StreamsGroupDescribeRequest(group_ids=[consumer_group])).groups[0]
        assert (d.error_code, d.error_message) == (
            Errors.GROUP_ID_NOT_FOUND.code, f"Group {consumer_group} is not a streams group.")
        deleted = wire.call(DELETE, 2, DeleteGroupsRequest(groups_names=[app])).results[0]
        assert deleted.error_code == Errors.NON_EMPTY_GROUP.code
        # The member carries on.
        r = heartbeat(wire, app, member, epoch)
        assert r.error_code == 0
        # Once it left, the group can be deleted.
        assert heartbeat(wire, app, member, -1).error_code == 0
        deleted = wire.call(DELETE, 2, DeleteGroupsRequest(groups_names=[app])).results[0]
        assert deleted.error_code == 0
        assert describe(sg_broker.bootstrap, app).error_code == Errors.GROUP_ID_NOT_FOUND.code
    # Each refusal is one log line.
    assert sg_broker.log().count("UNKNOWN_MEMBER_ID (Member nobody is not a member") == 1


# --- Kafka Streams 4.4 with group.protocol=streams ---------------------------------------------

def _java_available():
    if not JAVA_JAR.exists():
        return f"{JAVA_JAR} is missing (build compat_tests/java)"
    return None


def _start_app(bootstrap, app, source, sink, expect, timeout_ms):
    return subprocess.Popen(
        ["java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-jar", str(JAVA_JAR),
         "streams-count", "--bootstrap", bootstrap, "--input", source, "--output", sink,
         "--application-id", app, "--expect", str(expect), "--timeout-ms", str(timeout_ms),
         "--property", "group.protocol=streams",
         "--property", "commit.interval.ms=200"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "JAVA_TOOL_OPTIONS": f"-Djava.io.tmpdir=/tmp/{app}-"
             f"{uuid.uuid4().hex[:4]}"})


def test_kafka_streams_exactly_once_through_member_restarts(sg_broker):
    missing = _java_available()
    if missing:
        pytest.fail(missing)
    bootstrap = sg_broker.bootstrap
    app = f"wc-{uuid.uuid4().hex[:6]}"
    source, sink = f"{app}-in", f"{app}-out"
    ensure_topic(bootstrap, source, 4)
    ensure_topic(bootstrap, sink, 4)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    expected: dict[str, int] = {}

    def produce(n):
        for i in range(n):
            w = words[i % len(words)] if i % 7 else words[(i // 7) % len(words)]
            expected[w] = expected.get(w, 0) + 1
            producer.produce(source, key=w.encode(), value=w.encode())
        assert producer.flush(30) == 0

    total = 600
    apps = [_start_app(bootstrap, app, source, sink, 10**9, 400_000) for _ in range(2)]
    try:
        produce(200)

        def two_members_stable():
            g = describe(bootstrap, app)
            return g.error_code == 0 and g.group_state == "Stable" and len(g.members) == 2
        wait_until(two_members_stable, 120, message="two Kafka Streams members, Stable")
        produce(200)
        # Kill one instance hard, then start it again.
        apps[1].send_signal(signal.SIGKILL)
        apps[1].wait(10)
        apps[1] = _start_app(bootstrap, app, source, sink, 10**9, 400_000)
        produce(total - 400)

        # While the apps run, transactions are open: read read_committed as it goes.
        reader = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4()}",
                           "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                           "enable.auto.commit": False})
        reader.assign([TopicPartition(sink, p, 0) for p in range(4)])
        last: dict[str, int] = {}
        by_key: dict[str, list[int]] = {}

        def counted():
            for msg in reader.consume(500, 0.5):
                if msg.error() is None:
                    key, count = msg.key().decode(), int(msg.value().decode())
                    last[key] = count
                    by_key.setdefault(key, []).append(count)
            return last == expected
        try:
            wait_until(counted, 240, 0, message="the final counts in the output (read_committed)")
        finally:
            reader.close()
        g = describe(bootstrap, app)
        assert g.error_code == 0 and len(g.members) >= 2
    finally:
        for p in apps:
            if p.poll() is None:
                p.terminate()
        for p in apps:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
    # Exactly once: read_committed, each key's counts are 1..n, each once, in order (a key lives
    # in one partition, so reaching its final count means every earlier one was read).
    assert by_key == {k: list(range(1, n + 1)) for k, n in expected.items()}
    # Kafka 4.4.0's own tool decodes every record we wrote for the group.
    from tests.log.conftest import kafka_java
    segments = sorted(Path(sg_broker.data_dir).glob("__consumer_offsets-*/*.log"))
    dump = subprocess.run([*kafka_java("org.apache.kafka.tools.DumpLogSegments"),
                           "--offsets-decoder",
                           "--files", ",".join(map(str, segments))],
                          capture_output=True, text=True, timeout=120)
    assert dump.returncode == 0, dump.stderr[-2000:]
    # 17 StreamsGroupMetadata, 19 ...MemberMetadata, 20 ...TargetAssignmentMetadata,
    # 21 ...TargetAssignmentMember, 22 ...CurrentMemberAssignment, 23 ...Topology.
    for record_type in (17, 19, 20, 21, 22, 23):
        assert f'key: {{"type":"{record_type}"' in dump.stdout, record_type
    assert "Error at offset" not in dump.stdout, dump.stdout[:3000]
    assert "Exception" not in dump.stdout + dump.stderr


# --- Kafka 4.4.0's kafka-streams-groups.sh ------------------------------------------------------

def _streams_groups_command(bootstrap, *args) -> str:
    import sys
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "kafka_ref" / "run_kafka.py"),
                          "run-class", "org.apache.kafka.tools.streams.StreamsGroupCommand",
                          "--", "--bootstrap-server", bootstrap, *args],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return out.stdout


def test_kafka_streams_groups_command(sg_broker):
    """Kafka 4.4.0's StreamsGroupCommand (kafka-streams-groups.sh): --list and --describe
    (state, members with their process and tasks, the input partitions' lag) of a streams
    group."""
    app = f"sgc-{uuid.uuid4().hex[:6]}"
    source = f"{app}-in"
    ensure_topic(sg_broker.bootstrap, source, 2)
    member = uuid.uuid4().hex
    with Wire(sg_broker.bootstrap) as wire:
        r = heartbeat(wire, app, member, 0, topology=topology(source, app))
        epoch, tasks = r.member_epoch, owned(r)

        def ready():
            nonlocal epoch, tasks
            r = heartbeat(wire, app, member, epoch, **tasks)
            epoch = r.member_epoch
            if r.active_tasks is not None:
                tasks = owned(r)
            return not r.status and sum(len(t.partitions) for t in tasks["active_tasks"]) == 4
        wait_until(ready, 30, message="all four tasks assigned")
    # The member keeps heartbeating while the tool (a JVM) starts and asks.
    stop = threading.Event()

    def keep_alive():
        with Wire(sg_broker.bootstrap) as w:
            while not stop.wait(0.5):
                heartbeat(w, app, member, epoch, **tasks)
    thread = threading.Thread(target=keep_alive, daemon=True)
    thread.start()
    try:
        listed = _streams_groups_command(sg_broker.bootstrap, "--list")
        assert app in listed.split(), listed
        state = _streams_groups_command(sg_broker.bootstrap, "--describe", "--group", app,
                                        "--state")
        assert "Stable" in state and app in state, state
        members = _streams_groups_command(sg_broker.bootstrap, "--describe", "--group", app,
                                          "--members")
        assert member in members, members
        row = next(line.split() for line in members.splitlines() if line.startswith(app))
        assert row[1:3] == [member, f"process-{member}"] and "ACTIVE:" in row, members
        offsets = _streams_groups_command(sg_broker.bootstrap, "--describe", "--group", app)
        topics = sorted({line.split()[1] for line in offsets.splitlines()
                         if line.startswith(app)})
        assert topics == sorted([source, f"{app}-rep"]), offsets
    finally:
        stop.set()
        thread.join(5)
