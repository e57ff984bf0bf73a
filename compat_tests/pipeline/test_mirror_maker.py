"""MirrorMaker 2 (``connect-mirror``, the dedicated ``MirrorMaker`` driver) between Apache Kafka
4.4.0 and kbroker, both ways at once: topics and their configs are mirrored, consumer-group
offsets are translated (checkpoints, ``sync.group.offsets.enabled``), and a consumer group fails
over to the other cluster and resumes at the translated offset, losing nothing (MirrorMaker
translates to the last offset sync at or before the committed offset, so a group may see a few
records again, as on Kafka)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from compat_tests.pipeline.connect import CONNECT_VERSION, JARS, LOG4J2, missing
from compat_tests.pipeline.test_connect import create_topic
from tests.broker_process import BrokerProcess
from tests.integration.clients import wait_until

ROOT = Path(__file__).resolve().parents[2]
RECORDS, CONSUMED = 100, 60


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    if missing():
        pytest.fail(missing())
    sys.path.insert(0, str(ROOT / "tools" / "kafka_ref"))
    import run_kafka

    kafka = run_kafka.start_kafka(port=run_kafka.free_port(), heap="512M", extra_props={
        "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "1"})
    kbroker = BrokerProcess(tmp_path_factory.mktemp("mm2") / "data", {
        "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "1"}).start()
    try:
        yield {"kafka": kafka.bootstrap, "kbroker": kbroker.bootstrap}
    finally:
        kbroker.kill()
        kafka.stop()


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, key=f"k{i}", value=f"{topic}-{i}", partition=i % 2)
    assert producer.flush(30) == 0


def records_in(bootstrap: str, topic: str) -> int:
    """How many records ``topic``'s two partitions hold (high watermarks; nothing is deleted)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"count-{uuid.uuid4().hex}"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                   for p in (0, 1))
    except Exception:  # noqa: BLE001 - the mirrored topic may not be there yet
        return 0
    finally:
        consumer.close()


def consume(bootstrap: str, group: str, topic: str, count: int, timeout: float = 60) -> list[str]:
    """Up to ``count`` values as a member of ``group``, committed synchronously at the end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    values = []
    try:
        wait_until(lambda: values.extend(
            m.value().decode() for m in consumer.consume(count - len(values), 0.5)
            if not m.error()) or len(values) >= count, timeout, 0, f"{count} records of {topic}")
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return values


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        offsets = consumer.committed([TopicPartition(topic, p) for p in (0, 1)], 10)
        return {tp.partition: tp.offset for tp in offsets if tp.offset >= 0}
    finally:
        consumer.close()


def topic_config(bootstrap: str, topic: str, name: str) -> str | None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        configs = admin.describe_configs([ConfigResource("topic", topic)])
        found = list(configs.values())[0].result(10)
    except Exception:  # noqa: BLE001 - not mirrored yet
        return None
    return found[name].value if name in found else None


def mirror_maker(tmp_path: Path, clusters: dict) -> subprocess.Popen:
    settings = {
        "clusters": "kafka, kbroker",
        "kafka.bootstrap.servers": clusters["kafka"],
        "kbroker.bootstrap.servers": clusters["kbroker"],
        "kafka->kbroker.enabled": "true", "kafka->kbroker.topics": "orders",
        "kbroker->kafka.enabled": "true", "kbroker->kafka.topics": "events",
        "kafka->kbroker.groups": "orders-app", "kbroker->kafka.groups": "events-app",
        "replication.factor": "1", "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
        "config.storage.replication.factor": "1", "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "sync.group.offsets.enabled": "true", "sync.group.offsets.interval.seconds": "1",
        "emit.checkpoints.interval.seconds": "1", "refresh.topics.interval.seconds": "2",
        "refresh.groups.interval.seconds": "2", "sync.topic.configs.interval.seconds": "2",
        "offset.lag.max": "0", "tasks.max": "1",
        "scheduled.rebalance.max.delay.ms": "3000",
    }
    properties = tmp_path / "mm2.properties"
    properties.write_text("".join(f"{k} = {v}\n" for k, v in settings.items()))
    log4j = tmp_path / "mm2-log4j2.properties"
    log4j.write_text(LOG4J2.format(log=tmp_path / "mm2.log"))
    out = open(tmp_path / "mm2.out", "ab")
    try:
        return subprocess.Popen(
            ["java", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             f"-Dlog4j2.configurationFile={log4j}", "-cp", f"{JARS}/*",
             "org.apache.kafka.connect.mirror.MirrorMaker", str(properties)],
            stdout=out, stderr=subprocess.STDOUT)
    finally:
        out.close()


@pytest.mark.compat("mirrormaker 2: Kafka 4.4.0 <-> kbroker, configs, offsets, failover",
                    client="mirrormaker2", version=CONNECT_VERSION)
def test_mirror_both_ways_and_fail_over_a_consumer_group(clusters, tmp_path):
    kafka, kbroker = clusters["kafka"], clusters["kbroker"]
    retention = str(3_600_000 + int(uuid.uuid4().int % 1000))
    # the upstream topics: records, a config of their own, a group part-way through
    first = {}
    for bootstrap, topic, group in ((kafka, "orders", "orders-app"),
                                    (kbroker, "events", "events-app")):
        create_topic(bootstrap, topic, 2, **{"retention.ms": retention})
        produce(bootstrap, topic, RECORDS)
        first[topic] = consume(bootstrap, group, topic, CONSUMED)
        assert len(first[topic]) == CONSUMED
    upstream = {"orders": committed(kafka, "orders-app", "orders"),
                "events": committed(kbroker, "events-app", "events")}
    translated = {}
    process = mirror_maker(tmp_path, clusters)
    try:
        for target, topic, group, source in ((kbroker, "kafka.orders", "orders-app", "orders"),
                                             (kafka, "kbroker.events", "events-app", "events")):
            wait_until(lambda: topic_config(target, topic, "retention.ms") == retention, 120,
                       0.5, f"{topic} with its retention.ms")
            # the group's offsets, translated and written to the other cluster: MirrorMaker
            # translates to the last offset sync at or before the committed offset, so a
            # translated offset may lag (records seen again after failover), never lead
            wait_until(lambda: len(committed(target, group, topic)) == 2, 120, 0.5,
                       f"{group}'s translated offsets on {topic}")
            translated[source] = committed(target, group, topic)
            # Offsets are translated on their own schedule: the records themselves may still be
            # on their way when the offsets are there, and MirrorMaker is stopped next.
            wait_until(lambda: records_in(target, topic) >= RECORDS, 120, 0.5,
                       f"the {RECORDS} records of {source} mirrored to {topic}")
            assert all(0 <= translated[source][p] <= upstream[source][p] for p in (0, 1)), \
                (translated, upstream)
        log = (tmp_path / "mm2.log").read_text(errors="replace")
    finally:
        process.kill()
        process.wait()
    # fail over: each group resumes on the other cluster where it stopped, losing nothing
    for target, topic, group, source in ((kbroker, "kafka.orders", "orders-app", "orders"),
                                         (kafka, "kbroker.events", "events-app", "events")):
        rest = consume(target, group, topic, RECORDS - sum(translated[source].values()))
        everything = {f"{source}-{i}" for i in range(RECORDS)}
        assert len(set(rest)) == len(rest) and set(rest) >= everything - set(first[source])
    assert "ERROR" not in "\n".join(line for line in log.splitlines()
                                    if "kbroker" in line and "ERROR" in line)
