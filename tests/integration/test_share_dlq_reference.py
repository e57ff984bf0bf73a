"""Share-group dead-letter queues (KIP-1191) side by side with Apache Kafka 4.4.0: the run's
reference Kafka (tests/shared_kafka.py, whose share.version is finalized at 2 by default, so its
DLQ is on) and a kbroker process, the same scenario on both, with the same topic and group
names; the DLQ topics' records must be equal.

Real clients reject or release the records of a three-partition topic (keys, a null key, a
header), each group writing its own DLQ topic (two partitions, created with
``errors.deadletterqueue.group.enable=true``; no broker setting is changed):

- confluent-kafka's ShareConsumer rejects everything, ``copy.record.enable=true``;
- confluent-kafka's ShareConsumer releases everything until ``share.delivery.count.limit`` (2);
- Java's KafkaShareConsumer (kafka-clients 4.4, tests/share/ShareConsume.java) with its
  release-mod3 policy (x1 and x4 rejected, x0 and x3 released once then accepted);
- Kafka 4.4.0's console share consumer (``kafka-console-share-consumer.sh --reject``);
- a group whose DLQ topic lacks the enable flag, and one whose name lacks the ``dlq.`` prefix:
  nothing is written.

Compared: each DLQ record's partition, key, value and headers (in order), sorted by source
partition and offset (records of different source partitions interleave by timing); the
timestamp type (CreateTime) and that the timestamp is the write's, not the source record's;
DescribeConfigs of the groups' two DLQ configs (set, and left at their defaults); and the answer
to a DLQ name starting with ``__`` (error code and message).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer

from tests import java_source
from tests.broker_process import BrokerProcess
from tests.integration.clients import Wire, ensure_topic, wait_until
from tests.recordbatch import parse_batches

ROOT = Path(__file__).resolve().parents[2]
JAVA_JAR = ROOT / "compat_tests" / "java" / "target" / "kbroker-java-driver.jar"
SHARE_CONSUME = ROOT / "tests" / "share" / "ShareConsume.java"
sys.path.insert(0, str(ROOT / "tools" / "kafka_ref"))
import run_kafka  # noqa: E402  (stdlib-only launcher of the reference Kafka's classes)

SETTINGS = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "1",
            "num.partitions": "1"}
KBROKER_SETTINGS = {**SETTINGS, "share.coordinator.state.topic.num.partitions": "1"}
CONSOLE = "org.apache.kafka.tools.consumer.ConsoleShareConsumer"
TIMEOUT = 90

pytestmark = pytest.mark.skipif(shutil.which("java") is None, reason="needs a JDK")


@pytest.fixture(scope="module")
def brokers(tmp_path_factory, reference_kafka):
    if not JAVA_JAR.exists():
        pytest.fail(f"{JAVA_JAR} is missing: build it with mvn -f compat_tests/java/pom.xml "
                    "package (scripts/install-test-deps.sh does)")
    kafka = reference_kafka.get(SETTINGS)
    assert kafka.version == "4.4.0"
    kbroker = BrokerProcess(tmp_path_factory.mktemp("kbroker") / "data", KBROKER_SETTINGS)
    try:
        kbroker.start()
        yield {"kafka": kafka.bootstrap, "kbroker": kbroker.bootstrap}
    finally:
        kbroker.kill()


def admin_call(bootstrap, call):
    from confluent_kafka.admin import AdminClient
    client = AdminClient({"bootstrap.servers": bootstrap})  # kept until the answer
    return call(client)


def group_configs(bootstrap: str, group: str, configs: dict):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k, str(v), incremental_operation=AlterConfigOpType.SET)
        for k, v in configs.items()])
    return admin_call(bootstrap, lambda a: a.incremental_alter_configs([resource])[resource]
                      .result(30))


# The source records: (partition, key, value, headers), two per partition.
SOURCE = [(0, b"k0", b"x0", [("h", b"a")]), (1, None, b"x1", []), (2, b"k2", b"x2", []),
          (0, b"k3", b"x3", []), (1, b"k4", b"x4", [("h", b"b")]), (2, None, b"x5", [])]


def dlq_records(bootstrap: str, topic: str, partitions: int = 2):
    """[(dlq partition, key, value, headers, timestamp type, timestamp)] of ``topic``."""
    out = []
    with Wire(bootstrap) as wire:
        wire.api_versions()
        for index in range(partitions):
            data, batches = wire.fetch(topic, index, 0)
            assert data.error_code == 0, (topic, index, data.error_code)
            for batch in batches:
                for r in batch.raw_records():
                    out.append((index, r.key, r.value, tuple(r.headers),
                                "LogAppendTime" if batch.log_append_time else "CreateTime",
                                batch.base_timestamp + r.timestamp_delta))
    return out


def wait_for_dlq(bootstrap: str, topic: str, count: int):
    return wait_until(lambda: (lambda got: got if len(got) >= count else None)(
        dlq_records(bootstrap, topic)), TIMEOUT, 0.2, f"{count} records in {topic}")


def confluent_member(bootstrap, group, topic, ack, deliveries):
    """Acknowledge every record with ``ack`` until ``deliveries`` deliveries were seen."""
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    seen = 0
    deadline = time.monotonic() + TIMEOUT
    try:
        while seen < deliveries and time.monotonic() < deadline:
            for m in consumer.poll(0.5):
                if m.error() is not None:
                    continue
                seen += 1
                consumer.acknowledge(m, ack)
            consumer.commit_sync(30)
    finally:
        consumer.close()
    assert seen >= deliveries, f"{group}: {seen} of {deliveries} deliveries"


def java_member(bootstrap, group, topic):
    done = subprocess.run([*java_source.command(SHARE_CONSUME, str(JAVA_JAR)), bootstrap, group,
                           topic, "25", "explicit:release-mod3"],
                          capture_output=True, text=True, timeout=TIMEOUT + 30)
    assert "closed" in done.stdout and "ack-error" not in done.stdout, done.stdout + done.stderr


def console_member(bootstrap, group, topic):
    cmd = run_kafka.java_cmd(CONSOLE, ["--bootstrap-server", bootstrap, "--topic", topic,
                                       "--group", group, "--reject", "--max-messages", "6",
                                       "--timeout-ms", "60000"],
                             run_kafka.DEFAULT_VERSION, None, heap="256M")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT + 30)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(done.stdout.split()) == [f"x{i}" for i in range(6)], done.stdout


def describe_dlq_configs(bootstrap: str, group: str) -> list[tuple]:
    """The group's two DLQ configs as DescribeConfigs shows them (value, source, default)."""
    from confluent_kafka.admin import ConfigResource, ResourceType
    resource = ConfigResource(ResourceType.GROUP, group)
    entries = admin_call(bootstrap, lambda a: a.describe_configs([resource])[resource].result(30))
    return [(name, entries[name].value, str(entries[name].source), entries[name].is_default)
            for name in ("errors.deadletterqueue.topic.name",
                         "errors.deadletterqueue.copy.record.enable")]


def scenario(bootstrap: str, names: dict) -> dict:
    source = names["source"]
    ensure_topic(bootstrap, source, 3)
    groups = {"reject-copy": {}, "limit": {"share.delivery.count.limit": "2"},
              "java": {}, "console": {}, "no-flag": {}, "no-prefix": {}}
    for role in groups:
        flag = {} if role == "no-flag" else {"errors.deadletterqueue.group.enable": "true"}
        ensure_topic(bootstrap, names[f"dlq-{role}"], 2, flag)
        group_configs(bootstrap, names[f"group-{role}"], {
            "share.auto.offset.reset": "earliest",
            "errors.deadletterqueue.topic.name": names[f"dlq-{role}"],
            "errors.deadletterqueue.copy.record.enable":
                "true" if role in ("reject-copy", "no-flag") else "false",
            **groups[role]})
    produced_at = int(time.time() * 1000)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for partition, key, value, headers in SOURCE:
        producer.produce(source, value, key, partition=partition, headers=headers,
                         timestamp=produced_at - 60_000)  # an old timestamp: not copied
    assert producer.flush(30) == 0
    trace = {}
    # The refused ones first: once the others' records are in their DLQs, theirs would be too.
    for role in ("no-flag", "no-prefix"):
        confluent_member(bootstrap, names[f"group-{role}"], source, AcknowledgeType.REJECT, 6)
    with ThreadPoolExecutor(4) as pool:
        jobs = [pool.submit(confluent_member, bootstrap, names["group-reject-copy"], source,
                            AcknowledgeType.REJECT, 6),
                pool.submit(confluent_member, bootstrap, names["group-limit"], source,
                            AcknowledgeType.RELEASE, 12),
                pool.submit(java_member, bootstrap, names["group-java"], source),
                pool.submit(console_member, bootstrap, names["group-console"], source)]
        for job in jobs:
            job.result()
    for role, count in (("reject-copy", 6), ("limit", 6), ("java", 2), ("console", 6)):
        records = wait_for_dlq(bootstrap, names[f"dlq-{role}"], count)
        assert all(r[4] == "CreateTime" and r[5] >= produced_at for r in records), records
        trace[role] = sorted((r[:4] for r in records),
                             key=lambda r: (dict(r[3])["__dlq.errors.partition"],
                                            int(dict(r[3])["__dlq.errors.offset"])))
    for role in ("no-flag", "no-prefix"):
        trace[role] = dlq_records(bootstrap, names[f"dlq-{role}"])
    group_configs(bootstrap, names["group-plain"], {"share.auto.offset.reset": "earliest"})
    trace["describe"] = describe_dlq_configs(bootstrap, names["group-reject-copy"]) + \
        describe_dlq_configs(bootstrap, names["group-limit"]) + \
        describe_dlq_configs(bootstrap, names["group-plain"])
    try:
        group_configs(bootstrap, names["group-refused"], {
            "errors.deadletterqueue.topic.name": "__dlq"})
        trace["refused"] = None
    except Exception as exc:  # noqa: BLE001 - the error is what is compared
        error = exc.args[0]
        trace["refused"] = (error.code(), error.str())
    return trace


def test_dead_letter_queues_side_by_side(brokers):
    tag = uuid.uuid4().hex[:6]
    names = {"source": f"dlq-src-{tag}", "group-refused": f"dlq-refused-{tag}",
             "group-plain": f"dlq-plain-{tag}"}
    for role in ("reject-copy", "limit", "java", "console", "no-flag", "no-prefix"):
        names[f"group-{role}"] = f"dlq-{role}-{tag}"
        names[f"dlq-{role}"] = f"dlq.{role}-{tag}" if role != "no-prefix" \
            else f"noprefix-{role}-{tag}"
    with ThreadPoolExecutor(2) as pool:
        futures = {name: pool.submit(scenario, bootstrap, names)
                   for name, bootstrap in brokers.items()}
        traces = {name: future.result() for name, future in futures.items()}
    ours, theirs = traces["kbroker"], traces["kafka"]
    for role in theirs:
        assert ours[role] == theirs[role], f"{role}: kbroker {ours[role]} != kafka {theirs[role]}"
    # what the scenario shows, beyond equality
    assert theirs["no-flag"] == [] and theirs["no-prefix"] == []
    assert theirs["describe"][-2:] == [
        ("errors.deadletterqueue.topic.name", "", theirs["describe"][-2][2], True),
        ("errors.deadletterqueue.copy.record.enable", "false", theirs["describe"][-1][2], True)]
    assert theirs["refused"] == (40, "errors.deadletterqueue.topic.name: DLQ topic name must "
                                     "not start with '__'")
    copied = theirs["reject-copy"]
    assert [(r[0], r[1], r[2]) for r in copied][:2] == [(0, b"k0", b"x0"), (0, b"k3", b"x3")]
    assert dict(theirs["limit"][0][3])["__dlq.errors.message"] == \
        b"Offset delivery count exceeded the threshold."
