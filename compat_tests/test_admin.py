"""Admin operations through each client's admin API, checked through the reference side."""

from __future__ import annotations

import pytest

from compat_tests import harness, reference
from compat_tests.reference import EARLIEST, LATEST, ensure_topic


def admin(driver, broker, action, **options):
    return harness.run(driver, "admin", broker.bootstrap, action, timeout=30,
                       timeout_ms=20000, **options).ok()


def event(run, kind):
    events = run.of(kind)
    assert events, f"no {kind!r} event\n{run.describe()}"
    return events[-1]


@pytest.mark.compat("admin.create-topic")
def test_create_topic(broker, driver, cell):
    cell.need(driver, "admin.create-topic")
    topic = harness.unique("adm-create", driver.name)
    admin(driver, broker, "create-topic", topic=topic, partitions=3, config="retention.ms=7200000")
    reference.eventually(lambda: reference.partition_count(broker.bootstrap, topic) == 3,
                         f"{topic} with 3 partitions")
    assert reference.config_value(broker.bootstrap, topic, "retention.ms") == "7200000"


@pytest.mark.compat("admin.delete-topic")
def test_delete_topic(broker, driver, cell):
    cell.need(driver, "admin.delete-topic")
    topic = harness.unique("adm-delete", driver.name)
    ensure_topic(broker.bootstrap, topic, partitions=2)
    admin(driver, broker, "delete-topic", topic=topic)
    reference.eventually(lambda: reference.partition_count(broker.bootstrap, topic) is None,
                         f"{topic} to disappear")


@pytest.mark.compat("admin.create-partitions")
def test_create_partitions(broker, driver, cell):
    cell.need(driver, "admin.create-partitions")
    topic = harness.unique("adm-parts", driver.name)
    ensure_topic(broker.bootstrap, topic, partitions=1)
    run = admin(driver, broker, "create-partitions", topic=topic, partitions=3)
    assert event(run, "partitions-created")["partitions"] == 3
    reference.eventually(lambda: reference.partition_count(broker.bootstrap, topic) == 3,
                         f"{topic} to grow to 3 partitions")


@pytest.mark.compat("admin.describe-configs")
def test_describe_configs(broker, driver, cell):
    cell.need(driver, "admin.describe-configs")
    topic = harness.unique("adm-describe", driver.name)
    ensure_topic(broker.bootstrap, topic, config={"retention.ms": "123456789"})
    configs = event(admin(driver, broker, "describe-configs", topic=topic), "configs")["configs"]
    assert configs.get("retention.ms") == "123456789", f"override: {configs.get('retention.ms')}"
    assert configs.get("cleanup.policy") == "delete", f"default: {configs.get('cleanup.policy')}"


@pytest.mark.compat("admin.alter-configs")
def test_alter_configs(broker, driver, cell):
    cell.need(driver, "admin.alter-configs")
    topic = harness.unique("adm-alter", driver.name)
    ensure_topic(broker.bootstrap, topic)
    admin(driver, broker, "alter-configs", topic=topic, config="retention.ms=654321")
    assert reference.config_value(broker.bootstrap, topic, "retention.ms") == "654321"


@pytest.mark.compat("admin.list-offsets")
def test_list_offsets(broker, driver, cell):
    cell.need(driver, "admin.list-offsets")
    topic = harness.unique("adm-offsets", driver.name)
    ensure_topic(broker.bootstrap, topic, partitions=2)
    base = reference.now_ms() - 60_000
    reference.produce(broker.bootstrap, topic, [(0, f"v{i}", base + 10 * i) for i in range(4)]
                      + [(1, "w0", base)])
    reference.delete_records(broker.bootstrap, topic, 0, 1)
    run = admin(driver, broker, "list-offsets", topic=topic, timestamp=base + 15)
    got = {p["partition"]: p for p in event(run, "offsets")["partitions"]}
    want = {0: {"partition": 0, "earliest": 1, "latest": 4, "forTimestamp": 2},
            1: {"partition": 1, "earliest": 0, "latest": 1, "forTimestamp": -1}}
    assert got == want, f"got {got}, want {want}"


@pytest.mark.compat("admin.delete-records")
def test_delete_records(broker, driver, cell):
    cell.need(driver, "admin.delete-records")
    topic = harness.unique("adm-delrec", driver.name)
    ensure_topic(broker.bootstrap, topic)
    reference.produce(broker.bootstrap, topic, [(0, f"v{i}", None) for i in range(5)])
    run = admin(driver, broker, "delete-records", topic=topic, partition=0, offset=3)
    assert event(run, "records-deleted")["lowWatermark"] == 3
    assert reference.offset(broker.bootstrap, topic, 0, EARLIEST) == 3
    assert reference.offset(broker.bootstrap, topic, 0, LATEST) == 5


@pytest.mark.compat("admin.move-log-dir")
def test_move_log_dir(broker, driver, cell):
    """AlterReplicaLogDirs: the replica moves to the broker's other log dir and keeps its data."""
    cell.need(driver, "admin.move-log-dir")
    topic = harness.unique("adm-logdir", driver.name)
    ensure_topic(broker.bootstrap, topic)
    reference.produce(broker.bootstrap, topic, [(0, f"v{i}", None) for i in range(5)])
    [(source, future)] = reference.log_dirs_of(broker.bootstrap, topic, 0)
    assert not future
    (destination,) = set(broker.log_dirs) - {source}
    run = harness.run(driver, "admin", broker.bootstrap, "move-log-dir", timeout=30,
                      timeout_ms=20000, topic=topic, partition=0, log_dir=destination,
                      broker=1).ok()
    assert event(run, "log-dir-moved")["logDir"] == destination
    reference.eventually(lambda: reference.log_dirs_of(broker.bootstrap, topic, 0) ==
                         [(destination, False)], f"{topic}-0 in {destination} alone")
    assert reference.offset(broker.bootstrap, topic, 0, LATEST) == 5
