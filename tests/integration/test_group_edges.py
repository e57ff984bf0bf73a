"""Group edge cases answered as Apache Kafka answers them, compared side by side.

Each test starts from the same two brokers: Apache Kafka 4.4.0 (``tools/kafka_ref``, jars fetched by
``scripts/install-test-deps.sh``; the session's, tests/shared_kafka.py) and kbroker, configured alike (no initial rebalance delay, 1 s
minimum session timeout, one ``__consumer_offsets`` partition). It runs one client sequence against
both at once (a thread each) and asserts that the two traces are equal: error codes, generations,
who leads and who owns the partition at each step. A few expected values are asserted as well,
so that two brokers wrong in the same way still fail.

The sequences:
- static members (confluent-kafka with ``group.instance.id``) close: they send no LeaveGroup, so
  DeleteGroups answers NON_EMPTY_GROUP until their sessions expire (or an admin removes them with
  LeaveGroup by instance id), then deletes the group;
- a member busy between polls (raw protocol, and confluent-kafka with a one-partition topic) keeps
  heartbeating through the rebalance another member started, past its session timeout, and keeps
  its membership and partition until its rebalance timeout (``max.poll.interval.ms``);
- OffsetCommit during a rebalance: a current member in PreparingRebalance, REBALANCE_IN_PROGRESS in
  CompletingRebalance, a stale generation, an unknown member, a member that left, a fenced static
  member, a group that does not exist (v8 and v9).

Timeouts are short (1-3 s sessions, 6-8 s rebalance timeouts) so the module runs in about a minute;
the checkpoints leave seconds of margin on either side of the timeout they probe.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from kbroker.protocol.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from kbroker.protocol.messages.consumer_protocol_subscription import ConsumerProtocolSubscription
from tests.broker_process import BrokerProcess
from tests.integration.clients import Wire, ensure_topic, wait_until


SETTINGS = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000",
            "offsets.topic.num.partitions": "1"}
OFFSET_COMMIT, FIND_COORDINATOR, JOIN, HEARTBEAT, LEAVE, SYNC, DESCRIBE, DELETE_GROUPS = (
    8, 10, 11, 12, 13, 14, 15, 42)
NONE, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS = 0, 22, 25, 27
NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, MEMBER_ID_REQUIRED, FENCED_INSTANCE_ID = 68, 69, 79, 82


@pytest.fixture(scope="module")
def brokers(tmp_path_factory, reference_kafka):
    """{"kafka": bootstrap, "kbroker": bootstrap}, side by side (Kafka: the session's)."""
    kafka = reference_kafka.get(SETTINGS)
    kbroker = BrokerProcess(tmp_path_factory.mktemp("kbroker") / "data", SETTINGS)
    try:
        kbroker.start()
        yield {"kafka": kafka.bootstrap, "kbroker": kbroker.bootstrap}
    finally:
        kbroker.kill()


def step(trace, name):
    """The outcome recorded for step ``name`` (one value, or a tuple of several)."""
    outcome = next(entry[1:] for entry in trace if entry[0] == name)
    return outcome[0] if len(outcome) == 1 else outcome


def side_by_side(brokers, scenario, *args):
    """Run ``scenario(bootstrap, *args)`` on both brokers at once; their traces must be equal."""
    with ThreadPoolExecutor(2) as pool:
        futures = {name: pool.submit(scenario, bootstrap, *args)
                   for name, bootstrap in brokers.items()}
        traces = {name: future.result() for name, future in futures.items()}
    assert traces["kbroker"] == traces["kafka"], \
        "\n".join(f"{name:8} {trace}" for name, trace in traces.items())
    return traces["kafka"]


# --- the raw protocol --------------------------------------------------------------------------

def call(bootstrap, api_key, version, request):
    with Wire(bootstrap, timeout=30) as wire:
        return wire.call(api_key, version, request)


def find_coordinator(bootstrap, group):
    """Kafka creates ``__consumer_offsets`` on the first FindCoordinator and answers
    COORDINATOR_NOT_AVAILABLE until it is loaded."""
    from kbroker.protocol.messages.find_coordinator import FindCoordinatorRequest

    wait_until(lambda: call(bootstrap, FIND_COORDINATOR, 3, FindCoordinatorRequest(
        key=group, key_type=0)).error_code == 0, 30, 0.2, f"a coordinator for {group}")


def subscription(topic):
    return b"\x00\x00" + ConsumerProtocolSubscription(topics=[topic]).to_bytes(0)


def assignment(topic, partitions):
    return b"\x00\x00" + ConsumerProtocolAssignment(assigned_partitions=[
        ConsumerProtocolAssignment.TopicPartition(topic=topic, partitions=partitions)]).to_bytes(0)


class Member:
    """One consumer spoken by hand: JoinGroup v9, SyncGroup v5, Heartbeat v4, LeaveGroup v5,
    OffsetCommit v8/v9. A parked JoinGroup runs in a thread on its own connection."""

    def __init__(self, bootstrap, group, topic, session_ms, rebalance_ms, instance=None):
        self.bootstrap, self.group, self.topic = bootstrap, group, topic
        self.session_ms, self.rebalance_ms, self.instance = session_ms, rebalance_ms, instance
        self.member_id, self.generation = "", -1

    def _join_request(self):
        from kbroker.protocol.messages.join_group import JoinGroupRequest

        return JoinGroupRequest(
            group_id=self.group, session_timeout_ms=self.session_ms,
            rebalance_timeout_ms=self.rebalance_ms, member_id=self.member_id,
            group_instance_id=self.instance, protocol_type="consumer",
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(
                name="range", metadata=subscription(self.topic))])

    def join(self):
        """JoinGroup until it is answered with something else than MEMBER_ID_REQUIRED."""
        while True:
            response = call(self.bootstrap, JOIN, 9, self._join_request())
            if response.error_code != MEMBER_ID_REQUIRED:
                break
            self.member_id = response.member_id
        if response.error_code == NONE:
            self.member_id, self.generation = response.member_id, response.generation_id
        return response

    def join_later(self) -> "JoinInFlight":
        return JoinInFlight(self)

    def sync(self, assignments=None):
        from kbroker.protocol.messages.sync_group import SyncGroupRequest

        response = call(self.bootstrap, SYNC, 5, SyncGroupRequest(
            group_id=self.group, generation_id=self.generation, member_id=self.member_id,
            group_instance_id=self.instance, protocol_type="consumer", protocol_name="range",
            assignments=[SyncGroupRequest.SyncGroupRequestAssignment(
                member_id=m, assignment=assignment(self.topic, parts))
                for m, parts in (assignments or {}).items()]))
        return response.error_code

    def heartbeat(self, generation=None):
        from kbroker.protocol.messages.heartbeat import HeartbeatRequest

        return call(self.bootstrap, HEARTBEAT, 4, HeartbeatRequest(
            group_id=self.group, member_id=self.member_id, group_instance_id=self.instance,
            generation_id=self.generation if generation is None else generation)).error_code

    def leave(self):
        from kbroker.protocol.messages.leave_group import LeaveGroupRequest

        response = call(self.bootstrap, LEAVE, 5, LeaveGroupRequest(
            group_id=self.group, members=[LeaveGroupRequest.MemberIdentity(
                member_id=self.member_id, group_instance_id=self.instance)]))
        return response.error_code, [m.error_code for m in response.members]

    def commit(self, generation=None, member_id=None, instance=None, version=9):
        return commit(self.bootstrap, self.group, self.topic,
                      self.generation if generation is None else generation,
                      self.member_id if member_id is None else member_id,
                      self.instance if instance is None else instance, version)


class JoinInFlight:
    """A JoinGroup the coordinator parks until the join phase ends."""

    def __init__(self, member: Member):
        self.member = member
        self.response = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        self.response = self.member.join()

    def done(self) -> bool:
        return not self._thread.is_alive()

    def result(self, timeout=60):
        self._thread.join(timeout)
        assert self.done(), "the JoinGroup was never answered"
        return self.response


def commit(bootstrap, group, topic, generation, member_id, instance=None, version=9):
    from kbroker.protocol.messages.offset_commit import OffsetCommitRequest

    response = call(bootstrap, OFFSET_COMMIT, version, OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
        group_instance_id=instance, topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
            name=topic, partitions=[OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=1)])]))
    return response.topics[0].partitions[0].error_code


def describe(bootstrap, group):
    """(state, sorted client ids of the members)."""
    from kbroker.protocol.messages.describe_groups import DescribeGroupsRequest

    described = call(bootstrap, DESCRIBE, 5, DescribeGroupsRequest(groups=[group])).groups[0]
    return described.group_state, sorted(m.client_id for m in described.members)


def wait_for_state(bootstrap, group, state):
    wait_until(lambda: describe(bootstrap, group)[0] == state, 20, 0.05,
               f"group {group} to be {state}")


def delete_group(bootstrap, group):
    from kbroker.protocol.messages.delete_groups import DeleteGroupsRequest

    return call(bootstrap, DELETE_GROUPS, 2,
                DeleteGroupsRequest(groups_names=[group])).results[0].error_code


def fresh_topic(bootstrap, name, partitions=1):
    ensure_topic(bootstrap, name, partitions)
    find_coordinator(bootstrap, f"{name}-group")
    return f"{name}-group"


# --- 1. DeleteGroups after static members close -----------------------------------------------

def static_members_close_then_delete(bootstrap, topic):
    from confluent_kafka import Consumer

    group = fresh_topic(bootstrap, topic, 2)
    consumers = [Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                           "group.instance.id": f"instance-{i}", "client.id": f"static-{i}",
                           "session.timeout.ms": 3000, "heartbeat.interval.ms": 500,
                           "auto.offset.reset": "earliest"}) for i in range(2)]
    for consumer in consumers:
        consumer.subscribe([topic])

    def both_assigned():
        for consumer in consumers:
            consumer.poll(0.1)
        return all(consumer.assignment() for consumer in consumers) and \
            describe(bootstrap, group)[0] == "Stable"

    wait_until(both_assigned, 30, 0, "both static members to own a partition")
    trace = [("before close", describe(bootstrap, group))]
    for consumer in consumers:
        consumer.close()  # a static member sends no LeaveGroup (KIP-345)
    trace.append(("after close", describe(bootstrap, group)))
    trace.append(("delete right after close", delete_group(bootstrap, group)))
    # Their sessions expire: the group empties, and only then can it be deleted.
    wait_until(lambda: describe(bootstrap, group)[0] == "Empty", 30, 0.2, "the group to empty")
    trace.append(("after the sessions expired", describe(bootstrap, group)))
    trace.append(("delete", delete_group(bootstrap, group)))
    trace.append(("delete again", delete_group(bootstrap, group)))
    return trace


def test_delete_groups_after_static_members_close(brokers):
    trace = side_by_side(brokers, static_members_close_then_delete, "static-close")
    assert step(trace, "delete right after close") == NON_EMPTY_GROUP
    assert step(trace, "delete") == NONE and step(trace, "delete again") == GROUP_ID_NOT_FOUND


def static_members_removed_by_admin_then_delete(bootstrap, topic):
    group = fresh_topic(bootstrap, topic)
    members = [Member(bootstrap, group, topic, 30000, 30000, instance=f"instance-{i}")
               for i in range(2)]
    first = members[0].join()
    trace = [("first join", first.error_code, first.generation_id)]
    trace.append(("first sync", members[0].sync({members[0].member_id: [0]})))
    second = members[1].join_later()
    wait_for_state(bootstrap, group, "PreparingRebalance")
    trace.append(("leader heartbeat", members[0].heartbeat()))
    trace.append(("leader rejoins", members[0].join().error_code, second.result().error_code))
    trace.append(("delete while they are members", delete_group(bootstrap, group)))
    # What an operator's AdminClient.removeMembersFromConsumerGroup sends: LeaveGroup by
    # group.instance.id, no member id.
    from kbroker.protocol.messages.leave_group import LeaveGroupRequest

    left = call(bootstrap, LEAVE, 5, LeaveGroupRequest(group_id=group, members=[
        LeaveGroupRequest.MemberIdentity(member_id="", group_instance_id=f"instance-{i}")
        for i in range(2)]))
    trace.append(("admin removes both", left.error_code, [m.error_code for m in left.members]))
    trace.append(("state", describe(bootstrap, group)))
    trace.append(("delete", delete_group(bootstrap, group)))
    return trace


def test_delete_groups_after_an_admin_removes_static_members(brokers):
    trace = side_by_side(brokers, static_members_removed_by_admin_then_delete, "static-admin")
    assert step(trace, "delete while they are members") == NON_EMPTY_GROUP
    assert step(trace, "delete") == NONE


# --- 2. a busy member keeps its partition until its rebalance timeout ---------------------------

BUSY_SESSION_MS, BUSY_REBALANCE_MS = 1000, 7000


def busy_member_heartbeats_through_a_rebalance(bootstrap, topic):
    """A owns the partition and is busy: it does not rejoin but its heartbeat thread goes on. B
    joins. A must stay a member (heartbeats answer REBALANCE_IN_PROGRESS) well past its session
    timeout, until the rebalance timeout ends the join phase without it."""
    group = fresh_topic(bootstrap, topic)
    a = Member(bootstrap, group, topic, BUSY_SESSION_MS, BUSY_REBALANCE_MS)
    b = Member(bootstrap, group, topic, BUSY_SESSION_MS, BUSY_REBALANCE_MS)
    trace = [("A joins", a.join().error_code, a.generation)]
    trace.append(("A syncs", a.sync({a.member_id: [0]})))
    b_join = b.join_later()
    wait_for_state(bootstrap, group, "PreparingRebalance")
    started = time.monotonic()
    answers = set()
    # Three session timeouts of heartbeats, far inside the rebalance timeout.
    while time.monotonic() - started < 3 * BUSY_SESSION_MS / 1000:
        answers.add(a.heartbeat())
        time.sleep(0.2)
    trace.append(("A heartbeats past its session timeout", sorted(answers)))
    trace.append(("B still waits, A still a member", b_join.done(),
                  describe(bootstrap, group)[0]))
    while not b_join.done():  # A keeps heartbeating until the join phase ends
        a.heartbeat()
        time.sleep(0.2)
    joined = b_join.result()
    trace.append(("B's join", joined.error_code, joined.generation_id,
                  joined.leader == b.member_id, len(joined.members)))
    trace.append(("A after the rebalance timeout", a.heartbeat()))
    trace.append(("A's commit", a.commit()))
    return trace


def test_busy_member_keeps_membership_until_the_rebalance_timeout(brokers):
    trace = side_by_side(brokers, busy_member_heartbeats_through_a_rebalance, "busy-raw")
    assert step(trace, "A heartbeats past its session timeout") == [REBALANCE_IN_PROGRESS]
    assert step(trace, "B still waits, A still a member") == (False, "PreparingRebalance")
    assert step(trace, "B's join") == (NONE, 2, True, 1)
    assert step(trace, "A after the rebalance timeout") == UNKNOWN_MEMBER_ID


def busy_consumer_keeps_its_partition(bootstrap, topic):
    """The same with a real consumer: A (confluent-kafka, max.poll.interval.ms 7 s) stops
    polling; B subscribes and polls. A owns the partition until its poll interval runs out."""
    from confluent_kafka import Consumer

    group = fresh_topic(bootstrap, topic)

    def consumer(name):
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                      "session.timeout.ms": BUSY_SESSION_MS, "heartbeat.interval.ms": 250,
                      "max.poll.interval.ms": BUSY_REBALANCE_MS,
                      "auto.offset.reset": "earliest"})
        c.subscribe([topic])
        return c

    a = consumer("A")
    wait_until(lambda: (a.poll(0.1), bool(a.assignment()))[1] and
               describe(bootstrap, group)[0] == "Stable", 30, 0, "A to own the partition")
    busy_since = time.monotonic()
    b = consumer("B")
    owners = []
    while time.monotonic() - busy_since < BUSY_REBALANCE_MS / 1000 + 6:
        b.poll(0.1)
        elapsed = time.monotonic() - busy_since
        owner = "B" if b.assignment() else "A"
        phase = "before half the poll interval" if elapsed < BUSY_REBALANCE_MS / 2000 else \
            None
        if phase and (phase, owner) not in owners:
            owners.append((phase, owner))
    owners.append(("after the poll interval", "B" if b.assignment() else "A"))
    trace = owners + [("group", describe(bootstrap, group))]
    # A was dropped from the group with its revocation still queued. Served by close(), the
    # rebalance callback's assign() can deadlock inside librdkafka (seen once, on a loaded
    # machine: close() -> rebalance_cb -> rd_kafka_assign waiting for ever); served by poll()
    # first, close() has nothing left to do.
    wait_until(lambda: (a.poll(0.1), not a.assignment())[1], 30, 0, "A to see its revocation")
    a.close()
    b.close()
    return trace


def test_busy_consumer_keeps_its_partition_until_max_poll_interval(brokers):
    trace = side_by_side(brokers, busy_consumer_keeps_its_partition, "busy-client")
    assert trace == [("before half the poll interval", "A"), ("after the poll interval", "B"),
                     ("group", ("Stable", ["B"]))]


# --- 3. OffsetCommit during a rebalance ---------------------------------------------------------

def commits_during_a_rebalance(bootstrap, topic):
    group = fresh_topic(bootstrap, topic)
    a = Member(bootstrap, group, topic, 10000, 8000)
    b = Member(bootstrap, group, topic, 10000, 8000)
    a.join()
    a.sync({a.member_id: [0]})
    trace = [("Stable, current member", a.commit())]
    b_join = b.join_later()
    wait_for_state(bootstrap, group, "PreparingRebalance")
    trace += [
        ("PreparingRebalance, current member", a.commit()),
        ("PreparingRebalance, stale generation", a.commit(generation=0)),
        ("PreparingRebalance, unknown member", a.commit(member_id="nobody")),
        ("PreparingRebalance, no member id, generation -1", a.commit(generation=-1,
                                                                     member_id="")),
    ]
    rejoined = a.join()
    joined = b_join.result()
    b.member_id, b.generation = joined.member_id, joined.generation_id
    trace.append(("both rejoined", rejoined.error_code, rejoined.generation_id,
                  joined.generation_id))
    trace += [
        ("CompletingRebalance, new generation", a.commit()),
        ("CompletingRebalance, old generation", a.commit(generation=1)),
        ("CompletingRebalance, heartbeat", a.heartbeat()),
        ("CompletingRebalance, old heartbeat", a.heartbeat(generation=1)),
    ]
    leader = a if rejoined.leader == a.member_id else b
    trace.append(("leader syncs", leader.sync({a.member_id: [0], b.member_id: []})))
    trace.append(("Stable, follower syncs", (b if leader is a else a).sync()))
    trace.append(("Stable, new generation", a.commit()))
    trace.append(("B leaves", b.leave()))
    trace.append(("member that left", b.commit()))
    trace.append(("A after B left", a.commit(), a.heartbeat()))
    return trace


def test_commits_during_a_rebalance(brokers):
    trace = side_by_side(brokers, commits_during_a_rebalance, "commit-rebalance")
    assert step(trace, "PreparingRebalance, current member") == NONE
    assert step(trace, "PreparingRebalance, stale generation") == ILLEGAL_GENERATION
    assert step(trace, "CompletingRebalance, new generation") == REBALANCE_IN_PROGRESS
    assert step(trace, "member that left") == UNKNOWN_MEMBER_ID


def commits_of_static_and_missing_members(bootstrap, topic):
    group = fresh_topic(bootstrap, topic)
    old = Member(bootstrap, group, topic, 10000, 8000, instance="instance-s")
    old.join()
    old.sync({old.member_id: [0]})
    new = Member(bootstrap, group, topic, 10000, 8000, instance="instance-s")
    new.join()  # the same instance restarted: the old member id is fenced
    trace = [
        ("fenced member id", old.commit()),
        ("new member id", new.commit(generation=old.generation)),
        ("unknown instance id", new.commit(instance="instance-x")),
        ("fenced heartbeat", old.heartbeat()),
    ]
    for version in (8, 9):
        trace.append((f"missing group v{version}",
                      commit(bootstrap, f"{group}-missing", topic, 3, "m", None, version)))
    trace.append(("missing group, generation -1",
                  commit(bootstrap, f"{group}-standalone", topic, -1, "", None, 9)))
    return trace


def test_commits_of_static_fenced_and_missing_members(brokers):
    trace = side_by_side(brokers, commits_of_static_and_missing_members, "commit-static")
    assert step(trace, "fenced member id") == FENCED_INSTANCE_ID
    assert step(trace, "missing group v8") == ILLEGAL_GENERATION
    assert step(trace, "missing group v9") == GROUP_ID_NOT_FOUND
