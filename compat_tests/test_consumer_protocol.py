"""Consumer groups on the KIP-848 protocol (``group.protocol=consumer``): join and consume,
commit and resume, three members moving partitions incrementally, the online migration of a
running classic group, a regex subscription that picks up a topic created later, and a static
member's restart without a rebalance. Records come from the reference producer with explicit partitions; the
client under test only consumes. Clients without the protocol are n/a with their reason
(``drivers/registry.py``)."""

from __future__ import annotations

import threading
import time

import pytest

from compat_tests import harness, reference
from compat_tests.reference import ensure_topic
from tests.integration.clients import Wire

CONSUMER = ["--property", "group.protocol=consumer"]
CLASSIC = ["--property", "group.protocol=classic"]


@pytest.fixture
def groups_ready(groups_pending, advertised):
    if groups_pending:
        pytest.skip(groups_pending)
    if 68 not in advertised:
        pytest.skip("pending: ConsumerGroupHeartbeat is not advertised")


def values(records) -> list[str]:
    return [r["value"] for r in records]


def owners(bootstrap: str, group: str) -> tuple[str, dict]:
    """(state, {member id: sorted [(topic, partition)]}) from ConsumerGroupDescribe."""
    from kbroker.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
    with Wire(bootstrap) as wire:
        g = wire.call(69, 1, ConsumerGroupDescribeRequest(group_ids=[group])).groups[0]
    return g.group_state, {m.member_id: sorted((tp.topic_name, p)
                                              for tp in m.assignment.topic_partitions
                                              for p in tp.partitions) for m in g.members}


@pytest.mark.compat("consumer protocol: join and consume")
def test_join_and_consume(broker, groups_ready, driver, cell):
    cell.need(driver, "groups.consumer-protocol")
    topic, group = harness.unique("cp-join", driver.name), harness.unique("g", driver.name)
    ensure_topic(broker.bootstrap, topic, partitions=3)
    sent = [f"r{i}" for i in range(12)]
    reference.produce(broker.bootstrap, topic, [(i % 3, v, None) for i, v in enumerate(sent)])
    started = time.monotonic()
    run = harness.consume(driver, broker.bootstrap, topic, len(sent), timeout=40, group=group,
                          args=CONSUMER).ok()
    assert sorted(values(run.records)) == sorted(sent)
    cell.note(f"joined and read {len(sent)} records in {time.monotonic() - started:.1f} s")


@pytest.mark.compat("consumer protocol: commit and resume")
def test_commit_and_resume(broker, groups_ready, driver, cell):
    cell.need(driver, "groups.consumer-protocol")
    topic, group = harness.unique("cp-resume", driver.name), harness.unique("g", driver.name)
    ensure_topic(broker.bootstrap, topic, partitions=2)
    sent = [f"r{i}" for i in range(10)]
    reference.produce(broker.bootstrap, topic, [(i % 2, v, None) for i, v in enumerate(sent)])
    first = harness.consume(driver, broker.bootstrap, topic, 4, timeout=40, group=group,
                            args=CONSUMER).ok()
    later = [f"s{i}" for i in range(6)]
    reference.produce(broker.bootstrap, topic, [(i % 2, v, None) for i, v in enumerate(later)])
    sent += later
    second = harness.consume(driver, broker.bootstrap, topic, len(sent) - len(first.records),
                             timeout=40, group=group, args=CONSUMER).ok()
    a, b = values(first.records), values(second.records)
    assert not set(a) & set(b), f"re-read after the restart: {sorted(set(a) & set(b))}"
    assert sorted(a + b) == sorted(sent), f"lost: {sorted(set(sent) - set(a) - set(b))}"
    cell.note(f"first member read {len(a)}, the restarted one {len(b)}")


def _keep_producing(bootstrap, topic, partitions, sent, stop):
    n = 0
    while not stop.is_set():
        batch = [(p, f"round{n}-p{p}", None) for p in range(partitions)]
        reference.produce(bootstrap, topic, batch)
        sent.extend(v for _, v, _ in batch)
        n += 1
        time.sleep(0.3)


def _watch_owners(bootstrap, group, stop, overlaps, states):
    while not stop.is_set():
        state, members = owners(bootstrap, group)
        states.append((state, {m: len(p) for m, p in members.items()}))
        owned = [tp for parts in members.values() for tp in parts]
        if len(owned) != len(set(owned)):
            overlaps.append(members)
        time.sleep(0.1)


@pytest.mark.compat("consumer protocol: three-member rebalance")
def test_three_members_rebalance(broker, groups_ready, driver, cell):
    cell.need(driver, "groups.consumer-protocol")
    partitions = 6
    topic, group = harness.unique("cp-three", driver.name), harness.unique("g", driver.name)
    ensure_topic(broker.bootstrap, topic, partitions=partitions)
    sent, overlaps, states = [], [], []
    stop = threading.Event()
    threads = [threading.Thread(target=_keep_producing, args=(broker.bootstrap, topic,
                                                               partitions, sent, stop)),
               threading.Thread(target=_watch_owners, args=(broker.bootstrap, group, stop,
                                                             overlaps, states))]
    for t in threads:
        t.start()
    members = []
    try:
        for _ in range(3):
            members.append(harness.start(driver, "consume", broker.bootstrap, *CONSUMER,
                                         timeout=120, topic=topic, count=1_000_000, group=group,
                                         from_beginning=True, timeout_ms=120_000))
            time.sleep(2)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            state, described = owners(broker.bootstrap, group)
            if state == "Stable" and sorted(len(p) for p in described.values()) == [2, 2, 2]:
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"no Stable 2/2/2 split within 60 s: {owners(broker.bootstrap, group)}")
        time.sleep(2)
    finally:
        stop.set()
        for t in threads:
            t.join(15)
    got = lambda: [v for m in members for v in values(m.events("record"))]  # noqa: E731
    deadline = time.monotonic() + 20
    while set(sent) - set(got()) and time.monotonic() < deadline:
        time.sleep(0.2)
    for m in members:
        m.stop()
    missing = sorted(set(sent) - set(got()))
    assert not missing, f"{len(missing)} records never consumed: {missing[:8]}"
    assert not overlaps, f"a partition had two owners at once: {overlaps[0]}"
    read = got()
    cell.note(f"{len(sent)} records, {len(read) - len(set(read))} read twice (the client's "
              f"commit policy), 0 missed; no partition ever had two owners")


@pytest.mark.compat("consumer protocol: migration of a running classic group")
def test_migration_of_a_running_classic_group(broker, groups_ready, driver, cell):
    cell.need(driver, "groups.consumer-protocol")
    cell.need(driver, "groups")
    partitions = 4
    topic, group = harness.unique("cp-mig", driver.name), harness.unique("g", driver.name)
    ensure_topic(broker.bootstrap, topic, partitions=partitions)
    sent = []
    stop = threading.Event()
    producer = threading.Thread(target=_keep_producing, args=(broker.bootstrap, topic,
                                                               partitions, sent, stop))
    producer.start()
    started = []
    try:
        # The classic member stops by itself after 18 s, committing and leaving the group as a
        # restarted consumer would (the mixed group below settles 5-8 s after its start).
        old = harness.start(driver, "consume", broker.bootstrap, *CLASSIC, timeout=60,
                            topic=topic, count=1_000_000, group=group, from_beginning=True,
                            timeout_ms=18_000)
        started.append(old)
        old.wait_for(lambda: len(old.events("record")) > 0, 40, "the classic member's records")
        # The rolling restart: a consumer-protocol member joins the running classic group...
        new = harness.start(driver, "consume", broker.bootstrap, *CONSUMER, timeout=120,
                            topic=topic, count=1_000_000, group=group, from_beginning=True,
                            timeout_ms=120_000)
        started.append(new)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            state, described = owners(broker.bootstrap, group)
            if state == "Stable" and len(described) == 2 and \
                    sorted(len(p) for p in described.values()) == [2, 2]:
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"the mixed group did not settle: {owners(broker.bootstrap, group)}")
        # ...then the classic member is restarted on the consumer protocol too.
        old.wait()
        newer = harness.start(driver, "consume", broker.bootstrap, *CONSUMER, timeout=120,
                              topic=topic, count=1_000_000, group=group, from_beginning=True,
                              timeout_ms=120_000)
        started.append(newer)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            state, described = owners(broker.bootstrap, group)
            if state == "Stable" and sorted(len(p) for p in described.values()) == [2, 2]:
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"the upgraded group did not settle: {owners(broker.bootstrap, group)}")
        time.sleep(2)
    finally:
        stop.set()
        producer.join(15)
    got = lambda: [v for m in started for v in values(m.events("record"))]  # noqa: E731
    deadline = time.monotonic() + 20
    while set(sent) - set(got()) and time.monotonic() < deadline:
        time.sleep(0.2)
    for m in started:
        if m.run.rc is None:
            m.stop()
    missing = sorted(set(sent) - set(got()))
    assert not missing, f"{len(missing)} records never consumed: {missing[:8]}"
    read = got()
    cell.note(f"classic -> mixed -> consumer: {len(sent)} records, 0 missed, "
              f"{len(read) - len(set(read))} read twice")


def describe(bootstrap: str, group: str):
    """The ConsumerGroupDescribe entry of ``group`` (state, epochs, members with instance ids)."""
    from kbroker.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
    with Wire(bootstrap) as wire:
        return wire.call(69, 1, ConsumerGroupDescribeRequest(group_ids=[group])).groups[0]


@pytest.mark.compat("consumer protocol: regex subscription picks up a new topic")
def test_regex_subscription_picks_up_a_new_topic(broker, groups_ready, driver, cell):
    cell.need(driver, "groups.consumer-protocol")
    prefix, group = harness.unique("cp-rx", driver.name), harness.unique("g", driver.name)
    first, later, unrelated = f"{prefix}-a", f"{prefix}-b", f"{prefix}x-c"
    ensure_topic(broker.bootstrap, first, partitions=2)
    ensure_topic(broker.bootstrap, unrelated, partitions=1)
    reference.produce(broker.bootstrap, first, [(i % 2, f"a{i}", None) for i in range(4)])
    reference.produce(broker.bootstrap, unrelated, [(0, "not-matched", None)])
    member = harness.start(driver, "consume", broker.bootstrap, *CONSUMER, timeout=120,
                           topic=f"{prefix}-.*", pattern=True, count=7, group=group,
                           from_beginning=True, timeout_ms=90_000)
    try:
        member.wait_for(lambda: len(member.events("record")) >= 4, 60,
                        "the records of the topic that matched at subscribe time")
        created = time.monotonic()
        ensure_topic(broker.bootstrap, later, partitions=1)
        reference.produce(broker.bootstrap, later, [(0, f"b{i}", None) for i in range(3)])
        member.wait_for(lambda: len(member.events("record")) >= 7, 60,
                        "the records of the topic created after the subscription")
        picked_up = time.monotonic() - created
        member.wait()
    finally:
        if member.run.rc is None:
            member.stop()
    records = member.events("record")
    assert sorted(values(records)) == sorted([f"a{i}" for i in range(4)] +
                                             [f"b{i}" for i in range(3)])
    assert {r["topic"] for r in records} == {first, later}, "the regex must full-match"
    cell.note(f"the topic created later was consumed {picked_up:.1f} s after its creation; "
              f"the non-matching {unrelated} was never assigned")


@pytest.mark.compat("consumer protocol: static member restart without a rebalance")
def test_static_member_restart_without_a_rebalance(broker, groups_ready, driver, cell):
    cell.need(driver, "groups.consumer-protocol")
    cell.need(driver, "groups.consumer-protocol-static")
    partitions = 4
    topic, group = harness.unique("cp-static", driver.name), harness.unique("g", driver.name)
    ensure_topic(broker.bootstrap, topic, partitions=partitions)
    # The session timeout is the group's (consumer.session.timeout.ms, 45 s by default): a
    # consumer-protocol client may not set one.
    static = lambda name: [*CONSUMER, "--property", f"group.instance.id={group}-{name}"]  # noqa
    sent = [f"r{i}" for i in range(8)]
    reference.produce(broker.bootstrap, topic, [(i % partitions, v, None)
                                                for i, v in enumerate(sent)])
    # ``a`` closes by itself after 20 s, as a restarted process would: a static member's leave
    # (member epoch -2) keeps its place and partitions for the session timeout.
    a = harness.start(driver, "consume", broker.bootstrap, *static("a"), timeout=60, topic=topic,
                      count=1_000_000, group=group, from_beginning=True, timeout_ms=20_000)
    b = harness.start(driver, "consume", broker.bootstrap, *static("b"), timeout=120,
                      topic=topic, count=1_000_000, group=group, from_beginning=True,
                      timeout_ms=100_000)
    started = [a, b]
    try:
        def split():
            g = describe(broker.bootstrap, group)
            owned = {m.instance_id: sorted(p for tp in m.assignment.topic_partitions
                                           for p in tp.partitions) for m in g.members}
            return g, owned
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            g, owned = split()
            if g.group_state == "Stable" and sorted(len(p) for p in owned.values()) == [2, 2]:
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"no Stable 2/2 split within 60 s: {split()}")
        epoch_before, owned_before = g.group_epoch, owned
        a.wait()
        restarted = harness.start(driver, "consume", broker.bootstrap, *static("a"),
                                  timeout=120, topic=topic, count=1_000_000, group=group,
                                  from_beginning=True, timeout_ms=100_000)
        started.append(restarted)
        reference.produce(broker.bootstrap, topic, [(p, f"after-p{p}", None)
                                                    for p in range(partitions)])
        sent += [f"after-p{p}" for p in range(partitions)]
        got = lambda: [v for m in started for v in values(m.events("record"))]  # noqa: E731
        deadline = time.monotonic() + 60
        while set(sent) - set(got()) and time.monotonic() < deadline:
            time.sleep(0.2)
        g, owned = split()
    finally:
        for m in started:
            if m.run.rc is None:
                m.stop()
    missing = sorted(set(sent) - set(got()))
    assert not missing, f"{len(missing)} records never consumed: {missing}"
    assert g.group_epoch == epoch_before, \
        f"the group rebalanced: epoch {epoch_before} -> {g.group_epoch}"
    assert owned == owned_before, f"assignment changed: {owned_before} -> {owned}"
    cell.note(f"instance {group}-a restarted and got back {owned[f'{group}-a']} at group epoch "
              f"{g.group_epoch}; the other member's partitions never moved")
