"""Consumer groups (classic protocol): join, commit, resume after a restart, rebalance on a
member joining and leaving. Records come from the reference producer with explicit partitions;
the client under test only consumes."""

from __future__ import annotations

import time

import pytest

from compat_tests import harness, reference
from compat_tests.reference import ensure_topic


@pytest.fixture
def groups_ready(groups_pending):
    if groups_pending:
        pytest.skip(groups_pending)


def values(records) -> list[str]:
    return [r["value"] for r in records]


@pytest.mark.compat("groups: commit and resume")
def test_commit_and_resume(broker, groups_ready, driver, cell):
    cell.need(driver, "groups")
    topic, group = harness.unique("grp-resume", driver.name), harness.unique("g", driver.name)
    ensure_topic(broker.bootstrap, topic, partitions=2)
    sent = [f"r{i}" for i in range(10)]
    reference.produce(broker.bootstrap, topic, [(i % 2, v, None) for i, v in enumerate(sent)])
    first = harness.consume(driver, broker.bootstrap, topic, 4, timeout=30, group=group).ok()
    # A client may hand over (and commit) more than --count from one poll: whatever the first
    # member printed is what it committed. More records arrive while no member is running.
    later = [f"s{i}" for i in range(6)]
    reference.produce(broker.bootstrap, topic, [(i % 2, v, None) for i, v in enumerate(later)])
    sent += later
    second = harness.consume(driver, broker.bootstrap, topic, len(sent) - len(first.records),
                             timeout=30, group=group).ok()
    a, b = values(first.records), values(second.records)
    assert not set(a) & set(b), f"re-read after the restart: {sorted(set(a) & set(b))}"
    assert sorted(a + b) == sorted(sent), f"lost: {sorted(set(sent) - set(a) - set(b))}"
    cell.note(f"first member read {len(a)}, the restarted one {len(b)}")


@pytest.mark.compat("groups: rebalance")
def test_rebalance_on_join_and_leave(broker, groups_ready, driver, cell):
    cell.need(driver, "groups")
    partitions = 4
    topic, group = harness.unique("grp-rebal", driver.name), harness.unique("g", driver.name)
    ensure_topic(broker.bootstrap, topic, partitions=partitions)
    sent: list[tuple[int, str]] = []
    rounds = iter(range(10_000))

    def produce_round():
        n = next(rounds)
        batch = [(p, f"round{n}-p{p}", None) for p in range(partitions)]
        reference.produce(broker.bootstrap, topic, batch)
        sent.extend((p, v) for p, v, _ in batch)

    def keep_producing_until(predicate, what, timeout=30.0):
        deadline = time.monotonic() + timeout
        while not predicate():
            assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s: {what}"
            produce_round()
            time.sleep(0.4)

    a = harness.start(driver, "consume", broker.bootstrap, timeout=90, topic=topic,
                      count=100_000, group=group, from_beginning=True, timeout_ms=90_000)
    b = None
    try:
        keep_producing_until(lambda: a.events("record"), "the first member to get records")
        b = harness.start(driver, "consume", broker.bootstrap, timeout=60, topic=topic,
                          count=3, group=group, from_beginning=True, timeout_ms=60_000)
        # B takes some partitions from A (join), reads 3 records, commits and leaves.
        keep_producing_until(lambda: b.run.rc is not None or len(b.events("record")) >= 3,
                             "the second member to get records")
        b_run = b.wait()
        assert b_run.rc == 0, f"second member: {b_run.error_text()}\n{b_run.describe()}"
        taken = {r["partition"] for r in b_run.records}
        # After B leaves, A must own every partition again.
        mark = len(a.events("record"))
        keep_producing_until(
            lambda: {r["partition"] for r in a.events("record")[mark:]} == set(range(partitions)),
            "the first member to get every partition back after the second left")
        got = set(values(a.events("record"))) | set(values(b_run.records))
        # Everything produced must be read by one of them (at least once).
        deadline = time.monotonic() + 15
        while {v for _, v in sent} - got and time.monotonic() < deadline:
            time.sleep(0.2)
            got = set(values(a.events("record"))) | set(values(b_run.records))
        lost = sorted({v for _, v in sent} - got)
        assert not lost, f"{len(lost)} records never consumed: {lost[:8]}"
        cell.note(f"second member took partitions {sorted(taken)}")
    finally:
        if b is not None and b.run.rc is None:
            b.stop()
        a.stop()
