"""Consumer groups with real clients: rebalances, committed offsets, static members, many groups,
and the coordinator rebuilding everything from ``__consumer_offsets`` after ``kill -9``.

Members that must leave or die run as subprocesses
(``python -m tests.integration.group_member CLIENT ...``): SIGTERM makes them close (and
leave the group), SIGKILL makes them vanish so that only the session timeout removes them. The
group's view is read from the broker with DescribeGroups (decoding the consumer-protocol
assignments), which also exercises that API.

The broker runs with group.initial.rebalance.delay.ms=0 and a 1 s minimum session timeout so that
members can use 3 s sessions: each test then waits for Kafka's timing (immediate rebalance on
leave, removal after the session timeout), never for fixed sleeps.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kbroker.protocol.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from tests.integration.clients import Rec, Wire, ensure_topic, produce_confluent, wait_until
from tests.integration.group_member import SESSION_MS

ROOT = Path(__file__).resolve().parents[2]
JAVA_JAR = ROOT / "compat_tests" / "java" / "target" / "kbroker-java-driver.jar"
BROKER = {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 1000,
          "offsets.topic.num.partitions": 10}

FIND_COORDINATOR, JOIN, HEARTBEAT, LEAVE, SYNC, DESCRIBE, LIST = 10, 11, 12, 13, 14, 15, 16
OFFSET_COMMIT, OFFSET_FETCH, DELETE_GROUPS, OFFSET_DELETE = 8, 9, 42, 47


# --- the group as the broker sees it ----------------------------------------------------------

def describe(bootstrap: str, group: str):
    """(state, protocol, {member_id: sorted [(topic, partition)]}) from DescribeGroups."""
    from kbroker.protocol.messages.describe_groups import DescribeGroupsRequest

    with Wire(bootstrap) as wire:
        response = wire.call(DESCRIBE, 5, DescribeGroupsRequest(groups=[group]))
    described = response.groups[0]
    members = {}
    for member in described.members:
        raw = bytes(member.member_assignment)
        parts = []
        if raw:
            version = int.from_bytes(raw[:2], "big")
            assignment = ConsumerProtocolAssignment.decode(memoryview(raw)[2:], min(version, 3))
            parts = [(tp.topic, p) for tp in assignment.assigned_partitions for p in tp.partitions]
        members[member.member_id] = sorted(parts)
    return described.group_state, described.protocol_data, members


def wait_for_split(bootstrap, group, topic, members: int, partitions: int, timeout=40.0):
    """Wait until the group is Stable with ``members`` members that own every partition exactly
    once; return the assignment."""
    want = sorted((topic, p) for p in range(partitions))

    def split():
        state, protocol, assigned = describe(bootstrap, group)
        owned = sorted(tp for parts in assigned.values() for tp in parts)
        if state == "Stable" and len(assigned) == members and owned == want:
            split.protocol = protocol
            return assigned
        return None

    assigned = wait_until(split, timeout, 0.2, f"{members} member(s) of {group} to own {want}")
    return assigned, split.protocol


# --- member subprocesses ----------------------------------------------------------------------

ASSIGNORS = {
    "confluent": {"range": "range", "roundrobin": "roundrobin",
                  "cooperative-sticky": "cooperative-sticky"},
    "kafka-python": {"range": "RangePartitionAssignor", "roundrobin": "RoundRobinPartitionAssignor",
                     "cooperative-sticky": "CooperativeStickyAssignor"},
    "aiokafka": {"range": "RangePartitionAssignor", "roundrobin": "RoundRobinPartitionAssignor"},
    "java": {"range": "org.apache.kafka.clients.consumer.RangeAssignor",
             "roundrobin": "org.apache.kafka.clients.consumer.RoundRobinAssignor",
             "cooperative-sticky": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"},
}


class Member:
    def __init__(self, client, bootstrap, topic, group, assignor, instance_id=None):
        if client == "java":
            assert JAVA_JAR.exists(), "build the Java driver: scripts/install-test-deps.sh"
            args = ["java", "-jar", str(JAVA_JAR), "consume", "--bootstrap", bootstrap,
                    "--topic", topic, "--group", group, "--count", "100000000",
                    "--timeout-ms", "600000",
                    "--property", f"partition.assignment.strategy={ASSIGNORS[client][assignor]}",
                    "--property", f"session.timeout.ms={SESSION_MS}",
                    "--property", "heartbeat.interval.ms=500"]
        else:
            args = [sys.executable, "-m", "tests.integration.group_member", client,
                    bootstrap, topic, group, ASSIGNORS[client][assignor], instance_id or ""]
        self.proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        self.output: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            self.output.append(line.decode(errors="replace").rstrip())

    def leave(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(20)

    def kill(self):
        self.proc.kill()
        self.proc.wait(20)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(20)


# --- fixtures ---------------------------------------------------------------------------------

@pytest.fixture
def group_broker(broker_factory):
    return broker_factory(BROKER)


@pytest.fixture
def members():
    started: list[Member] = []
    yield started
    for member in started:
        member.stop()


# --- tests ------------------------------------------------------------------------------------

SPLITS = [("confluent", "range"), ("confluent", "roundrobin"), ("confluent", "cooperative-sticky"),
          ("kafka-python", "range"), ("kafka-python", "roundrobin"),
          ("kafka-python", "cooperative-sticky"), ("aiokafka", "range"),
          ("aiokafka", "roundrobin"), ("java", "range"), ("java", "cooperative-sticky")]


@pytest.mark.parametrize("client,assignor", SPLITS, ids=[f"{c}-{a}" for c, a in SPLITS])
def test_three_members_split_six_partitions(group_broker, members, client, assignor):
    """Three members split six partitions; one leaves (its partitions move at once, well inside
    the session timeout), then one is killed (its partitions move after the session timeout)."""
    bootstrap = group_broker.bootstrap
    topic, group = f"split-{client}-{assignor}", f"g-{client}-{assignor}"
    ensure_topic(bootstrap, topic, 6)
    for _ in range(3):
        members.append(Member(client, bootstrap, topic, group, assignor))
    try:
        three, protocol = wait_for_split(bootstrap, group, topic, 3, 6, timeout=60)
    except AssertionError:
        for member in members:
            print("\n".join(member.output[-30:]))
        raise
    assert all(len(parts) == 2 for parts in three.values()), three
    assert protocol == assignor

    if client != "java":  # the Java driver has no clean-stop signal; it is only killed
        started = time.monotonic()
        members[0].leave()
        two, _ = wait_for_split(bootstrap, group, topic, 2, 6)
        assert time.monotonic() - started < SESSION_MS / 1000 + 2
        assert set(two) < set(three)
        survivors = members[1:]
    else:
        survivors = members
    survivors[0].kill()
    started = time.monotonic()
    remaining, _ = wait_for_split(bootstrap, group, topic, len(survivors) - 1, 6)
    # Removed by its session expiring, not before.
    assert time.monotonic() - started > SESSION_MS / 1000 - 1.5
    assert all(len(parts) in (3, 6) for parts in remaining.values())


def _consume_and_commit(bootstrap, topic, group, count):
    """A confluent member consumes ``count`` records and commits exactly what it consumed."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 500})
    consumer.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        for message in consumer.consume(count - len(got), 0.5):
            assert message.error() is None, message.error()
            got.append((message.partition(), message.offset()))
    assert len(got) == count, f"consumed {len(got)} of {count}"
    consumer.commit(asynchronous=False)
    consumer.close()
    return got


def _committed(bootstrap, group, topic, partitions):
    from kbroker.protocol.messages.offset_fetch import OffsetFetchRequest

    with Wire(bootstrap) as wire:
        request = OffsetFetchRequest(group_id=group, topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(name=topic,
                                                       partition_indexes=list(partitions))])
        response = wire.call(OFFSET_FETCH, 7, request)
    return {p.partition_index: p.committed_offset for p in response.topics[0].partitions}


def test_commits_survive_consumer_and_broker_restarts(group_broker):
    bootstrap = group_broker.bootstrap
    topic, group = "commits", "g-commits"
    ensure_topic(bootstrap, topic, 3)
    produce_confluent(bootstrap, topic, [Rec(f"v{i}".encode(), partition=i % 3) for i in range(60)])
    seen = set(_consume_and_commit(bootstrap, topic, group, 25))
    committed = _committed(bootstrap, group, topic, range(3))
    for p in range(3):  # a partition not consumed from has no commit (-1)
        consumed = [o for q, o in seen if q == p]
        assert committed[p] == (max(consumed) + 1 if consumed else -1)
    # A new consumer resumes exactly after the last commit: nothing twice, nothing skipped.
    seen2 = set(_consume_and_commit(bootstrap, topic, group, 20))
    assert not seen & seen2
    for p in range(3):
        offsets = sorted(o for q, o in seen2 if q == p)
        start = max(committed[p], 0)
        assert offsets == list(range(start, start + len(offsets)))
    committed = _committed(bootstrap, group, topic, range(3))

    group_broker.stop()
    group_broker.start()
    assert _committed(bootstrap, group, topic, range(3)) == committed
    seen3 = set(_consume_and_commit(bootstrap, topic, group, 15))
    assert len(seen | seen2 | seen3) == 60
    for p in range(3):
        assert min((o for q, o in seen3 if q == p), default=committed[p]) == \
            max(committed[p], 0)


def test_static_member_restarts_without_rebalance(group_broker):
    """A static member (group.instance.id) that restarts inside its session timeout gets its
    partitions back and the other member sees no rebalance."""
    from confluent_kafka import Consumer

    bootstrap = group_broker.bootstrap
    topic, group = "static", "g-static"
    ensure_topic(bootstrap, topic, 4)
    events = {"a": [], "b": []}

    def consumer(name):
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                      "group.instance.id": f"instance-{name}", "session.timeout.ms": 10000,
                      "heartbeat.interval.ms": 500})
        c.subscribe([topic], on_assign=lambda _, ps: events[name].append(
            ("assign", sorted(p.partition for p in ps))),
            on_revoke=lambda _, ps: events[name].append(("revoke", sorted(p.partition for p in ps))))
        return c

    a, b = consumer("a"), consumer("b")

    def poll_both():
        a.poll(0.1)
        b.poll(0.1)
        state, _, assigned = describe(bootstrap, group)
        # Both the broker's view and each member's own (its latest callback) must show 2+2.
        settled = all(events[n] and events[n][-1][0] == "assign" and len(events[n][-1][1]) == 2
                      for n in events)
        return settled and state == "Stable" and len(assigned) == 2 and \
            all(len(parts) == 2 for parts in assigned.values()) and assigned

    before = wait_until(poll_both, 30, 0, "two static members to split 4 partitions")
    b_partitions = [e for e in events["b"] if e[0] == "assign"][-1][1]
    a_events = list(events["a"])
    b.close()  # a static member does not leave the group on close
    events["b"] = []
    b = consumer("b")

    def rejoined():
        a.poll(0.1)
        b.poll(0.1)
        return any(e[0] == "assign" for e in events["b"])

    wait_until(rejoined, 20, 0, "the static member to rejoin")
    assert [e for e in events["b"] if e[0] == "assign"][-1][1] == b_partitions
    for _ in range(10):
        a.poll(0.1)
    assert events["a"] == a_events, "the other member went through a rebalance"
    state, _, after = describe(bootstrap, group)
    assert state == "Stable" and sorted(after.values()) == sorted(before.values())
    a.close()
    b.close()


# --- raw protocol: many groups and a crash ---------------------------------------------------

def _protocol_metadata(topic):
    from kbroker.protocol.messages.consumer_protocol_subscription import \
        ConsumerProtocolSubscription
    return b"\x00\x00" + ConsumerProtocolSubscription(topics=[topic]).to_bytes(0)


def _assignment(topic, partitions):
    return b"\x00\x00" + ConsumerProtocolAssignment(assigned_partitions=[
        ConsumerProtocolAssignment.TopicPartition(topic=topic, partitions=partitions)]).to_bytes(0)


def _pipelined(wire, api_key, version, requests):
    ids = [wire.send(api_key, version, r) for r in requests]
    out = []
    for correlation_id in ids:
        got, response = wire.receive(api_key, version)
        assert got == correlation_id
        out.append(response)
    return out


def test_hundred_groups_then_kill9_rebuilds_them(group_broker):
    from kbroker.protocol.messages.heartbeat import HeartbeatRequest
    from kbroker.protocol.messages.join_group import JoinGroupRequest
    from kbroker.protocol.messages.list_groups import ListGroupsRequest
    from kbroker.protocol.messages.offset_commit import OffsetCommitRequest
    from kbroker.protocol.messages.offset_fetch import OffsetFetchRequest
    from kbroker.protocol.messages.sync_group import SyncGroupRequest

    bootstrap = group_broker.bootstrap
    topic = "many"
    ensure_topic(bootstrap, topic, 2)
    groups = [f"group-{i:03d}" for i in range(100)]
    metadata = _protocol_metadata(topic)

    def join_request(group, member_id=""):
        return JoinGroupRequest(group_id=group, session_timeout_ms=30000,
                                rebalance_timeout_ms=30000, member_id=member_id,
                                protocol_type="consumer", protocols=[
                                    JoinGroupRequest.JoinGroupRequestProtocol(name="range",
                                                                              metadata=metadata)])

    started = time.monotonic()
    with Wire(bootstrap) as wire:
        first = _pipelined(wire, JOIN, 9, [join_request(g) for g in groups])
        assert {r.error_code for r in first} == {79}  # MEMBER_ID_REQUIRED
        joined = _pipelined(wire, JOIN, 9, [join_request(g, r.member_id)
                                            for g, r in zip(groups, first)])
        assert all(r.error_code == 0 and r.generation_id == 1 and r.leader == r.member_id
                   for r in joined)
        synced = _pipelined(wire, SYNC, 5, [SyncGroupRequest(
            group_id=g, generation_id=1, member_id=r.member_id, protocol_type="consumer",
            protocol_name="range", assignments=[SyncGroupRequest.SyncGroupRequestAssignment(
                member_id=r.member_id, assignment=_assignment(topic, [0, 1]))])
            for g, r in zip(groups, joined)])
        assert all(r.error_code == 0 and r.protocol_name == "range" for r in synced)
        commits = _pipelined(wire, OFFSET_COMMIT, 9, [OffsetCommitRequest(
            group_id=g, generation_id_or_member_epoch=1, member_id=r.member_id, topics=[
                OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[
                    OffsetCommitRequest.OffsetCommitRequestPartition(
                        partition_index=p, committed_offset=i * 10 + p,
                        committed_metadata=f"m{i}")
                    for p in (0, 1)])])
            for i, (g, r) in enumerate(zip(groups, joined))])
        assert all(p.error_code == 0 for r in commits for t in r.topics for p in t.partitions)
    assert time.monotonic() - started < 30

    def check(wire):
        listed = wire.call(LIST, 5, ListGroupsRequest())
        mine = {g.group_id: g for g in listed.groups if g.group_id.startswith("group-")}
        assert sorted(mine) == groups
        assert {(g.group_state, g.protocol_type, g.group_type) for g in mine.values()} == \
            {("Stable", "consumer", "classic")}
        fetched = wire.call(OFFSET_FETCH, 9, OffsetFetchRequest(groups=[
            OffsetFetchRequest.OffsetFetchRequestGroup(group_id=g, topics=None) for g in groups]))
        for i, group in enumerate(fetched.groups):
            assert group.error_code == 0
            parts = {p.partition_index: (p.committed_offset, p.metadata)
                     for t in group.topics for p in t.partitions}
            assert parts == {0: (i * 10, f"m{i}"), 1: (i * 10 + 1, f"m{i}")}
        beats = _pipelined(wire, HEARTBEAT, 4, [HeartbeatRequest(
            group_id=g, generation_id=1, member_id=r.member_id) for g, r in zip(groups, joined)])
        assert {b.error_code for b in beats} == {0}

    with Wire(bootstrap) as wire:
        check(wire)
    group_broker.kill()
    group_broker.start()

    def loaded():
        with Wire(bootstrap) as wire:
            return wire.call(LIST, 5, ListGroupsRequest()).error_code == 0

    wait_until(loaded, 20, 0.1, "the coordinator to load")
    with Wire(bootstrap) as wire:
        check(wire)


def test_every_version_of_every_group_api(group_broker):
    """Each advertised version of each group API is answered (never a closed connection), with
    the errors Kafka gives for the basic cases."""
    from kbroker.protocol import messages

    def req(name, **fields):
        return messages.request_class(messages.API_KEY_BY_NAME[name])(**fields)

    from kbroker.protocol.messages.join_group import JoinGroupRequest
    from kbroker.protocol.messages.leave_group import LeaveGroupRequest
    from kbroker.protocol.messages.offset_commit import OffsetCommitRequest
    from kbroker.protocol.messages.offset_delete import OffsetDeleteRequest
    from kbroker.protocol.messages.offset_fetch import OffsetFetchRequest
    from kbroker.protocol.messages.sync_group import SyncGroupRequest

    bootstrap = group_broker.bootstrap
    ensure_topic(bootstrap, "sweep", 1)
    metadata = _protocol_metadata("sweep")
    with Wire(bootstrap) as wire:
        def find(v, key, key_type):
            fields = {"coordinator_keys": [key, key + "2"]} if v >= 4 else {"key": key}
            if v >= 1:
                fields["key_type"] = key_type
            r = wire.call(FIND_COORDINATOR, v, req("FindCoordinator", **fields))
            return {c.error_code for c in r.coordinators} if v >= 4 else {r.error_code}

        for v in range(0, 7):
            assert find(v, "g", 0) == {0}
            if v >= 1:
                assert find(v, "t", 1) == {0}  # the transaction coordinator (this broker)
        for v in range(0, 10):
            group = f"sweep-{v}"
            join = JoinGroupRequest(group_id=group, session_timeout_ms=6000,
                                    rebalance_timeout_ms=6000 if v >= 1 else -1, member_id="",
                                    protocol_type="consumer", protocols=[
                                        JoinGroupRequest.JoinGroupRequestProtocol(
                                            name="range", metadata=metadata)])
            r = wire.call(JOIN, v, join)
            if v >= 4:
                assert r.error_code == 79 and r.member_id
                join.member_id = r.member_id
                r = wire.call(JOIN, v, join)
            assert r.error_code == 0 and r.generation_id == 1 and r.leader == r.member_id
            member, sync_version = r.member_id, min(v, 5)
            r = wire.call(SYNC, sync_version, SyncGroupRequest(
                group_id=group, generation_id=1, member_id=member,
                assignments=[SyncGroupRequest.SyncGroupRequestAssignment(
                    member_id=member, assignment=_assignment("sweep", [0]))]))
            assert r.error_code == 0 and r.assignment == _assignment("sweep", [0])
            r = wire.call(HEARTBEAT, min(v, 4), req("Heartbeat", group_id=group,
                                                     generation_id=1, member_id=member))
            assert r.error_code == 0
            r = wire.call(HEARTBEAT, min(v, 4), req("Heartbeat", group_id=group,
                                                     generation_id=2, member_id=member))
            assert r.error_code == 22  # ILLEGAL_GENERATION
            commit_version = max(2, min(v + 1, 9))
            r = wire.call(OFFSET_COMMIT, commit_version, OffsetCommitRequest(
                group_id=group, generation_id_or_member_epoch=1, member_id=member, topics=[
                    OffsetCommitRequest.OffsetCommitRequestTopic(name="sweep", partitions=[
                        OffsetCommitRequest.OffsetCommitRequestPartition(
                            partition_index=0, committed_offset=v, committed_metadata="x")]),
                    OffsetCommitRequest.OffsetCommitRequestTopic(name="nope", partitions=[
                        OffsetCommitRequest.OffsetCommitRequestPartition(
                            partition_index=0, committed_offset=1)])]))
            assert [p.error_code for t in r.topics for p in t.partitions] == [0, 3]
            for fv in range(1, 8):
                r = wire.call(OFFSET_FETCH, fv, OffsetFetchRequest(group_id=group, topics=[
                    OffsetFetchRequest.OffsetFetchRequestTopic(name="sweep",
                                                               partition_indexes=[0, 1])]))
                assert [(p.committed_offset, p.metadata) for p in r.topics[0].partitions] == \
                    [(v, "x"), (-1, "")]
            r = wire.call(DESCRIBE, min(v, 6), req("DescribeGroups", groups=[group, "none"]))
            assert [(g.group_state, len(g.members)) for g in r.groups] == [("Stable", 1),
                                                                             ("Dead", 0)]
            leave_version = min(v, 5)
            if leave_version >= 3:
                leave = LeaveGroupRequest(group_id=group, members=[
                    LeaveGroupRequest.MemberIdentity(member_id=member),
                    LeaveGroupRequest.MemberIdentity(member_id="ghost")])
                r = wire.call(LEAVE, leave_version, leave)
                assert r.error_code == 0 and [m.error_code for m in r.members] == [0, 25]
            else:
                r = wire.call(LEAVE, leave_version, LeaveGroupRequest(group_id=group,
                                                                      member_id=member))
                assert r.error_code == 0
        for v in range(0, 6):
            r = wire.call(LIST, v, req("ListGroups", states_filter=["Empty"] if v >= 4 else [],
                                       types_filter=["classic"] if v >= 5 else []))
            assert r.error_code == 0 and {g.group_id for g in r.groups} >= \
                {f"sweep-{i}" for i in range(10)}
        r = wire.call(OFFSET_DELETE, 0, OffsetDeleteRequest(group_id="sweep-0", topics=[
            OffsetDeleteRequest.OffsetDeleteRequestTopic(name="sweep", partitions=[
                OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])]))
        assert r.error_code == 0 and r.topics[0].partitions[0].error_code == 0
        for v in range(0, 3):
            r = wire.call(DELETE_GROUPS, v, req("DeleteGroups",
                                                groups_names=[f"sweep-{v}", "never"]))
            assert [g.error_code for g in r.results] == [0, 69]  # GROUP_ID_NOT_FOUND
        # v8+ OffsetFetch for several groups; v10 by topic id.
        topic_id = wire.call(3, 12, req("Metadata", topics=[
            messages.request_class(3).MetadataRequestTopic(name="sweep")])).topics[0].topic_id
        for fv in (8, 9, 10):
            topics = [OffsetFetchRequest.OffsetFetchRequestTopics(
                name="sweep", topic_id=topic_id if fv >= 10 else None, partition_indexes=[0])]
            if fv < 10:
                topics[0].topic_id = OffsetFetchRequest.OffsetFetchRequestTopics().topic_id
            r = wire.call(OFFSET_FETCH, fv, OffsetFetchRequest(groups=[
                OffsetFetchRequest.OffsetFetchRequestGroup(group_id=f"sweep-{i}", topics=topics)
                for i in (5, 6)]))
            assert [g.topics[0].partitions[0].committed_offset for g in r.groups] == [5, 6]
