"""Share groups (KIP-932): members of one share group read one partition together. Records come
from the reference producer; the client under test only consumes, through the driver contract's
``share-consume`` command. The module runs its own broker with short share-group intervals so
that a cell takes seconds: heartbeats every 200 ms, assignments at once, and a 1 s floor for the
acquisition lock, which each group then sets (share.record.lock.duration.ms, a group config)."""

from __future__ import annotations

import signal
import time

import pytest

from compat_tests import harness, reference
from compat_tests.reference import ensure_topic
from tests.broker_process import BrokerProcess

SHARE_BROKER = {"group.share.heartbeat.interval.ms": 200,
                "group.share.min.heartbeat.interval.ms": 100,
                "group.share.assignment.interval.ms": 0,
                "group.share.min.record.lock.duration.ms": 1000,
                "offsets.topic.num.partitions": 1,
                "share.coordinator.state.topic.num.partitions": 1}
LOCK_MS = 2000


@pytest.fixture(scope="module")
def share_broker(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("compat-share") / "data",
                            SHARE_BROKER).start()
    yield process
    reference.forget(process.bootstrap)
    process.stop(timeout=10)


def share_topic(bootstrap: str, driver, name: str, lock_ms: int | None = None):
    """A one-partition topic and a share group reading it from the earliest offset."""
    topic, group = harness.unique(name, driver.name), harness.unique("sg", driver.name)
    ensure_topic(bootstrap, topic, partitions=1)
    configs = {"share.auto.offset.reset": "earliest"}
    if lock_ms is not None:
        configs["share.record.lock.duration.ms"] = lock_ms
    reference.alter_group_configs(bootstrap, group, configs)
    return topic, group


def wait_for_assigned_members(bootstrap: str, group: str, count: int, timeout: float = 45):
    """Until ShareGroupDescribe shows ``count`` members, each assigned a partition."""
    from kbroker.protocol.messages.share_group_describe import ShareGroupDescribeRequest
    from tests.integration.clients import Wire

    deadline = time.monotonic() + timeout
    while True:
        with Wire(bootstrap) as wire:
            g = wire.call(77, 1, ShareGroupDescribeRequest(group_ids=[group])).groups[0]
        assigned = [m for m in g.members
                    if any(tp.partitions for tp in m.assignment.topic_partitions)]
        if len(assigned) >= count:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"{len(assigned)} of {count} members assigned after {timeout:.0f} s")
        time.sleep(0.2)


def values(records) -> list[str]:
    return [r["value"] for r in records]


def produce(bootstrap: str, topic: str, vals: list[str]) -> None:
    reference.produce(bootstrap, topic, [(0, v, None) for v in vals])


@pytest.mark.compat("share groups: three consumers share one partition, each record once")
def test_three_consumers_share_one_partition(share_broker, driver, cell):
    """Implicit acknowledgement: each poll accepts what the previous one returned."""
    cell.need(driver, "groups.share")
    bootstrap = share_broker.bootstrap
    topic, group = share_topic(bootstrap, driver, "share-three")
    members = [harness.start(driver, "share-consume", bootstrap, timeout=60, topic=topic,
                             group=group, count=100_000, ack="implicit", timeout_ms=60_000,
                             client_id=f"member-{i}") for i in range(3)]
    sent: list[str] = []
    try:
        # All three joined and hold the partition before records flow (JVMs start slowly on a
        # loaded machine: the first member alone would read everything); then many small
        # batches, as a share fetch takes whole batches.
        wait_for_assigned_members(bootstrap, group, len(members))
        time.sleep(1)  # their first fetches are waiting
        deadline = time.monotonic() + 30
        n = 0
        while time.monotonic() < deadline:
            batch = [f"r{n}-{i}" for i in range(5)]
            produce(bootstrap, topic, batch)
            sent += batch
            n += 1
            time.sleep(0.1)
            got = [v for m in members for v in values(m.events("record"))]
            if len(sent) >= 150 and set(sent) <= set(got):
                break
    finally:
        runs = harness.stop_all(members)
    per_member = [values(r.records) for r in runs]
    everything = [v for vs in per_member for v in vs]
    lost = sorted(set(sent) - set(everything))
    assert not lost, f"{len(lost)} records never delivered: {lost[:8]}"
    twice = sorted({v for v in everything if everything.count(v) > 1})
    assert not twice, f"delivered more than once: {twice[:8]}"
    errors = [r.describe() for r in runs if r.errors]
    assert not errors, "\n".join(errors)
    readers = sum(1 for vs in per_member if vs)
    assert readers >= 2, f"one member read everything: {[len(vs) for vs in per_member]}"
    cell.note(f"records per member: {[len(vs) for vs in per_member]}")


@pytest.mark.compat("share groups: RELEASE redelivers, REJECT archives")
def test_release_redelivers_reject_archives(share_broker, driver, cell):
    cell.need(driver, "groups.share")
    bootstrap = share_broker.bootstrap
    topic, group = share_topic(bootstrap, driver, "share-ack")
    sent = [f"a{i}" for i in range(4)]
    produce(bootstrap, topic, sent)
    released = harness.run(driver, "share-consume", bootstrap, timeout=20, topic=topic,
                           group=group, count=len(sent), ack="release", timeout_ms=20_000).ok()
    assert sorted(values(released.records)) == sent
    rejected = harness.run(driver, "share-consume", bootstrap, timeout=20, topic=topic,
                           group=group, count=len(sent), ack="reject", timeout_ms=20_000).ok()
    assert sorted(values(rejected.records)) == sent, "released records were not redelivered"
    # At least 2: a client that fetched ahead before closing (franz-go) had the records acquired
    # once more and released on leave, which (as in Kafka) does not undo the delivery count.
    counts = sorted({r["deliveryCount"] for r in rejected.records})
    assert counts and min(counts) >= 2, f"redelivered records' delivery counts: {counts}"
    after = harness.run(driver, "share-consume", bootstrap, timeout=10, topic=topic,
                        group=group, count=1, ack="accept", timeout_ms=4_000)
    assert after.rc == 2 and not after.records, \
        f"rejected records came back: {values(after.records)}\n{after.describe()}"
    cell.note(f"released records came back with delivery count {counts}; rejected ones never")


@pytest.mark.compat("share groups: a killed consumer's locked records go to another after the "
                    "lock expires")
def test_killed_consumer_locks_expire(share_broker, driver, cell):
    """The holder is frozen (SIGSTOP) first, its connection open: only the acquisition lock's
    expiry can free its records (a closed connection would release them at once). Another member
    must get them, no sooner than the lock allows; then the holder is killed (SIGKILL)."""
    cell.need(driver, "groups.share")
    bootstrap = share_broker.bootstrap
    topic, group = share_topic(bootstrap, driver, "share-kill", lock_ms=LOCK_MS)
    sent = [f"k{i}" for i in range(5)]
    produce(bootstrap, topic, sent)
    before_holder = time.monotonic()  # its records were acquired after this
    holder = harness.start(driver, "share-consume", bootstrap, timeout=60, topic=topic,
                           group=group, count=len(sent), ack="hold", timeout_ms=60_000)
    second = None
    try:
        holder.wait_for(lambda: holder.events("holding"), 25, "the first member to hold records")
        holder._proc.send_signal(signal.SIGSTOP)
        taken = set(values(holder.events("record")))
        second = harness.start(driver, "share-consume", bootstrap, timeout=30, topic=topic,
                               group=group, count=len(sent), ack="accept", timeout_ms=30_000)
        second.wait_for(lambda: taken <= set(values(second.events("record"))), 25,
                        f"another member to get the held records {sorted(taken)}")
        freed_after = time.monotonic() - before_holder
        got = second.wait().ok()
    finally:
        holder._proc.kill()  # SIGKILL, also ends a stopped process
        holder.wait()
        if second is not None and second.run.rc is None:
            second.stop()
    assert sorted(values(got.records)) == sent
    assert freed_after >= LOCK_MS / 1000, \
        f"held records came back {freed_after:.1f} s after the holder started, before the lock"
    counts = {r["deliveryCount"] for r in got.records if r["value"] in taken}
    assert min(counts) >= 2, f"delivery counts of the redelivered records: {counts}"
    cell.note(f"{len(taken)} records held by a frozen member came back "
              f"{freed_after:.1f} s after it started (lock {LOCK_MS} ms)")


def dead_letters(bootstrap: str, topic: str) -> list[tuple]:
    """(key, value, headers) of the records of ``topic`` partition 0, read over the wire."""
    from tests.integration.clients import Wire

    with Wire(bootstrap) as wire:
        wire.api_versions()
        data, batches = wire.fetch(topic, 0, 0)
        assert data.error_code == 0, f"fetch {topic}: error {data.error_code}"
    return [(r.key, r.value, tuple(r.headers)) for b in batches for r in b.raw_records()]


@pytest.mark.compat("share groups: REJECT writes the group's dead-letter queue (KIP-1191)")
def test_reject_writes_the_dead_letter_queue(share_broker, driver, cell):
    """The group's errors.deadletterqueue.topic.name names a topic created with
    errors.deadletterqueue.group.enable=true; the client rejects every record: each one is
    archived and copied (copy.record.enable) to the DLQ with Kafka 4.4's context headers."""
    cell.need(driver, "groups.share")
    bootstrap = share_broker.bootstrap
    topic, group = share_topic(bootstrap, driver, "share-dlq")
    dlq = "dlq." + harness.unique("share-dlq", driver.name)
    ensure_topic(bootstrap, dlq, partitions=1,
                 config={"errors.deadletterqueue.group.enable": "true"})
    reference.alter_group_configs(bootstrap, group, {
        "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.copy.record.enable": "true"})
    sent = [f"q{i}" for i in range(3)]
    produce(bootstrap, topic, sent)
    rejected = harness.run(driver, "share-consume", bootstrap, timeout=30, topic=topic,
                           group=group, count=len(sent), ack="reject", timeout_ms=30_000).ok()
    assert sorted(values(rejected.records)) == sent
    got = reference.eventually(lambda: (lambda r: r if len(r) >= len(sent) else None)(
        dead_letters(bootstrap, dlq)), f"{len(sent)} records in the DLQ {dlq}")
    expected = [(None, v.encode(), (
        ("__dlq.errors.topic", topic.encode()), ("__dlq.errors.partition", b"0"),
        ("__dlq.errors.offset", str(i).encode()), ("__dlq.errors.group", group.encode()),
        ("__dlq.errors.delivery.count", b"1"),
        ("__dlq.errors.message", b"Offset rejected by client."))) for i, v in enumerate(sent)]
    assert got == expected
    after = harness.run(driver, "share-consume", bootstrap, timeout=10, topic=topic,
                        group=group, count=1, ack="accept", timeout_ms=4_000)
    assert after.rc == 2 and not after.records, "rejected records came back"
    cell.note(f"{len(got)} rejected records in the DLQ with their values and six headers")
