"""Share groups end to end (KIP-932): real share consumers against a real broker process, the
issue's scenarios. confluent-kafka 2.16.1's ShareConsumer (librdkafka) and Java's
KafkaShareConsumer (kafka-clients 4.4, tests/share/ShareConsume.java) read from one partition:

1. three consumers sharing one partition: each record is delivered once when all accept;
2. RELEASE redelivers (with a higher delivery count), REJECT never does; explicit and implicit
   acknowledgement;
3. a poison record, released on every delivery, is archived at share.delivery.count.limit;
4. a consumer (confluent-kafka, and Java) killed with SIGKILL while it holds acquisition locks:
   its records go to another;
5. share.isolation.level=read_committed: aborted and open transactions are not delivered.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   ResourceType)

from tests import java_source
from tests.integration.clients import ensure_topic, wait_for_members

ROOT = Path(__file__).resolve().parents[2]
JAVA_JAR = ROOT / "compat_tests" / "java" / "target" / "kbroker-java-driver.jar"
SHARE_CONSUME = ROOT / "tests" / "share" / "ShareConsume.java"
BROKER = {"group.share.heartbeat.interval.ms": 200,
          "group.share.min.heartbeat.interval.ms": 100,
          "group.share.assignment.interval.ms": 0,
          "group.share.record.lock.duration.ms": 5000,
          "group.share.min.record.lock.duration.ms": 1000,
          "offsets.topic.num.partitions": 1,
          "share.coordinator.state.topic.num.partitions": 1}


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    from tests.broker_process import BrokerProcess
    broker = BrokerProcess(tmp_path_factory.mktemp("share") / "data", BROKER)
    broker.start()
    yield broker
    broker.kill()


def group_configs(bootstrap: str, group: str, **configs) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(name.replace("_", "."), str(value),
                    incremental_operation=AlterConfigOpType.SET)
        for name, value in configs.items()])
    admin.incremental_alter_configs([resource])[resource].result(20)


def new_topic(kafka, values, group_settings=None):
    """A one-partition topic holding ``values``; a group id reading it from the earliest offset."""
    name = f"share-{uuid.uuid4().hex[:8]}"
    group = f"group-{name}"
    ensure_topic(kafka.bootstrap, name)
    group_configs(kafka.bootstrap, group, share_auto_offset_reset="earliest",
                  **(group_settings or {}))
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 0})
    for value in values:
        producer.produce(name, value, partition=0)
    producer.flush(20)
    return name, group


def share_consumer(kafka, group, topic, explicit=False, **config):
    consumer = ShareConsumer({"bootstrap.servers": kafka.bootstrap, "group.id": group,
                              "share.acknowledgement.mode":
                                  "explicit" if explicit else "implicit", **config})
    consumer.subscribe([topic])
    return consumer


def poll(consumer, timeout=1.0):
    messages = list(consumer.poll(timeout))
    errors = [m.error() for m in messages if m.error() is not None]
    assert not errors, errors
    return messages


def test_three_consumers_share_one_partition_each_record_once(kafka):
    """The consumers join first; the records then arrive one batch at a time, so that all of
    them get some (a share fetch takes whole batches: one big batch would go to one member)."""
    values = [f"v{i}".encode() for i in range(300)]
    topic, group = new_topic(kafka, [])
    received: dict[str, list] = {}
    stop = threading.Event()

    def run(name):
        consumer = share_consumer(kafka, group, topic, **{"max.poll.records": 20})
        got = received.setdefault(name, [])
        try:
            while not stop.is_set():
                got.extend(m.value() for m in poll(consumer, 0.5))
                time.sleep(0.05)  # let the others take a turn at the partition
        finally:
            consumer.close()

    threads = [threading.Thread(target=run, args=(f"c{i}",)) for i in range(3)]
    for thread in threads:
        thread.start()
    wait_for_members(kafka.bootstrap, group, 3)  # all three joined and fetching
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 0})
    for value in values:
        producer.produce(topic, value, partition=0)
        producer.flush(10)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and sum(map(len, received.values())) < len(values):
        time.sleep(0.2)
    time.sleep(1)  # anything delivered twice would show up now
    stop.set()
    for thread in threads:
        thread.join(30)
    everything = [v for got in received.values() for v in got]
    assert sorted(everything) == sorted(values), (len(everything), len(set(everything)))
    assert sum(1 for got in received.values() if got) >= 2, \
        {name: len(got) for name, got in received.items()}


def test_release_redelivers_and_reject_does_not(kafka):
    values = [f"r{i}".encode() for i in range(10)]
    topic, group = new_topic(kafka, values)
    consumer = share_consumer(kafka, group, topic, explicit=True)
    try:
        first = []
        deadline = time.monotonic() + 30
        while not first and time.monotonic() < deadline:
            first = poll(consumer)
        assert [m.delivery_count() for m in first] == [1] * len(first)
        for message in first:
            index = int(message.value()[1:])
            ack = (AcknowledgeType.RELEASE if index % 3 == 0 else
                   AcknowledgeType.REJECT if index % 3 == 1 else AcknowledgeType.ACCEPT)
            consumer.acknowledge(message, ack)
        consumer.commit_sync(20)
        released = {m.value() for m in first if int(m.value()[1:]) % 3 == 0}
        again = []
        deadline = time.monotonic() + 30
        while {m.value() for m in again} < released and time.monotonic() < deadline:
            batch = poll(consumer)
            for message in batch:
                consumer.acknowledge(message, AcknowledgeType.ACCEPT)
            again += batch
        redelivered = {m.value(): m.delivery_count() for m in again}
        assert set(redelivered) >= released
        assert all(redelivered[v] == 2 for v in released), redelivered
        # the rejected and accepted ones never came back
        assert not set(redelivered) & {m.value() for m in first if m.value() not in released}
    finally:
        consumer.close()


def test_poison_record_is_archived_after_the_delivery_limit(kafka):
    values = [b"ok-0", b"poison", b"ok-2"]
    topic, group = new_topic(kafka, values, {"share_delivery_count_limit": 3})
    consumer = share_consumer(kafka, group, topic, explicit=True)
    poison_deliveries = []
    accepted = []
    try:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and len(poison_deliveries) < 4:
            for message in poll(consumer, 0.5):
                if message.value() == b"poison":
                    poison_deliveries.append(message.delivery_count())
                    consumer.acknowledge(message, AcknowledgeType.RELEASE)
                else:
                    accepted.append(message.value())
                    consumer.acknowledge(message, AcknowledgeType.ACCEPT)
            consumer.commit_sync(20)
            if len(poison_deliveries) == 3:
                # give a fourth delivery the time to happen if the broker got the limit wrong
                end = time.monotonic() + 3
                while time.monotonic() < end:
                    for message in poll(consumer, 0.5):
                        poison_deliveries.append(message.delivery_count())
                        consumer.acknowledge(message, AcknowledgeType.ACCEPT)
                break
    finally:
        consumer.close()
    assert poison_deliveries == [1, 2, 3]
    assert sorted(accepted) == [b"ok-0", b"ok-2"]


def test_killed_consumer_locks_go_to_another(kafka):
    values = [f"k{i}".encode() for i in range(20)]
    topic, group = new_topic(kafka, values)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    victim = subprocess.Popen([sys.executable, "-m", "tests.share.share_consume",
                               kafka.bootstrap, group, topic], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, text=True)
    try:
        held = []
        line = victim.stdout.readline()  # blocks until it holds records
        while line.startswith("got"):
            held.append(int(line.split()[1]))
            if len(held) == len(values):
                break
            line = victim.stdout.readline() if len(held) < len(values) else ""
        assert held, "the victim consumer got nothing"
    finally:
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
    survivor = share_consumer(kafka, group, topic)
    try:
        got = {}
        deadline = time.monotonic() + 30
        while len(got) < len(values) and time.monotonic() < deadline:
            for message in poll(survivor):
                got[message.offset()] = message.delivery_count()
        assert sorted(got) == list(range(len(values)))
        assert all(got[offset] == 2 for offset in held), got  # its second delivery
    finally:
        survivor.close()


def test_read_committed_share_group(kafka):
    topic, group = new_topic(kafka, [], {"share_isolation_level": "read_committed"})
    producer = Producer({"bootstrap.servers": kafka.bootstrap,
                         "transactional.id": f"tx-{topic}"})
    producer.init_transactions(20)
    producer.begin_transaction()
    producer.produce(topic, b"aborted", partition=0)
    producer.flush(20)
    producer.abort_transaction(20)
    producer.begin_transaction()
    producer.produce(topic, b"committed", partition=0)
    producer.flush(20)
    producer.commit_transaction(20)
    producer.begin_transaction()
    producer.produce(topic, b"open", partition=0)
    producer.flush(20)
    consumer = share_consumer(kafka, group, topic)
    try:
        got = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and b"committed" not in got:
            got += [m.value() for m in poll(consumer)]
        end = time.monotonic() + 2
        while time.monotonic() < end:
            got += [m.value() for m in poll(consumer, 0.5)]
        assert got == [b"committed"]
        producer.commit_transaction(20)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and b"open" not in got:
            got += [m.value() for m in poll(consumer)]
        assert got == [b"committed", b"open"]
    finally:
        consumer.close()


def java_share_consumer(kafka, group, topic, seconds, mode):
    if shutil.which("java") is None:
        pytest.skip("needs a JDK")
    if not JAVA_JAR.exists():
        pytest.fail(f"{JAVA_JAR} is missing: build it with mvn -f compat_tests/java/pom.xml "
                    "package (scripts/install-test-deps.sh does)")
    return subprocess.Popen([*java_source.command(SHARE_CONSUME, str(JAVA_JAR)), kafka.bootstrap,
                             group, topic, str(seconds), mode],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def java_records(output: str) -> list[tuple[int, int, str]]:
    return [(int(offset), int(count), value) for kind, offset, count, value in
            (line.split(" ", 3) for line in output.splitlines() if line.startswith("record "))]


def test_java_consumers_implicit_each_record_once(kafka):
    """Two Java KafkaShareConsumers in implicit mode (records accepted by the next poll) and
    one confluent-kafka ShareConsumer share a partition: every record once, none twice."""
    values = [f"x{i}".encode() for i in range(60)]
    topic, group = new_topic(kafka, [])
    javas = [java_share_consumer(kafka, group, topic, 25, "implicit") for _ in range(2)]
    received = []
    consumer = share_consumer(kafka, group, topic)
    try:
        wait_for_members(kafka.bootstrap, group, 2, timeout=60)  # the JVMs start and join
        producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 0})
        for value in values:
            producer.produce(topic, value, partition=0)
            producer.flush(10)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            received += [m.value().decode() for m in poll(consumer, 0.5)]
    finally:
        consumer.close()
    outputs = [java.communicate(timeout=60)[0] for java in javas]
    java_values = [value for output in outputs for _, _, value in java_records(output)]
    assert all("closed" in output for output in outputs), outputs
    everything = received + java_values
    assert sorted(everything) == sorted(v.decode() for v in values), \
        (len(everything), len(set(everything)), outputs)


def test_java_explicit_release_and_reject(kafka):
    values = [f"x{i}".encode() for i in range(12)]
    topic, group = new_topic(kafka, values)
    java = java_share_consumer(kafka, group, topic, 15, "explicit:release-mod3")
    output = java.communicate(timeout=60)[0]
    assert "closed" in output and "ack-error" not in output, output
    seen: dict[str, list[int]] = {}
    for _, count, value in java_records(output):
        seen.setdefault(value, []).append(count)
    for i in range(12):
        expected = [1, 2] if i % 3 == 0 else [1]  # released once, then accepted
        assert seen.get(f"x{i}") == expected, (i, seen)


def test_java_consumer_killed_while_holding_locks(kafka):
    """A Java KafkaShareConsumer takes records and is SIGKILLed before acknowledging: the records
    go to a confluent-kafka consumer, on their second delivery."""
    values = [f"x{i}".encode() for i in range(10)]
    topic, group = new_topic(kafka, values)
    java = java_share_consumer(kafka, group, topic, 60, "explicit:hold")
    held = []
    try:
        for line in java.stdout:
            if line.startswith("record "):
                held.append(int(line.split()[1]))
            if line.startswith("holding"):
                break
        assert held, "the Java consumer got nothing"
    finally:
        java.send_signal(signal.SIGKILL)
        java.wait(10)
    survivor = share_consumer(kafka, group, topic)
    try:
        got = {}
        deadline = time.monotonic() + 30
        while len(got) < len(values) and time.monotonic() < deadline:
            for message in poll(survivor):
                got[message.offset()] = message.delivery_count()
        assert sorted(got) == list(range(len(values)))
        assert all(got[offset] == 2 for offset in held), (held, got)
    finally:
        survivor.close()
