"""MirrorMaker 2 (``connect-mirror``, the dedicated ``MirrorMaker`` driver) for the pipeline
tests: the driver started with a test's clusters and flows, and the scenario both tests run
(test_mirror_maker.py between two kbroker nodes in `make test`, test_mirror_maker_kafka.py between
Apache Kafka 4.4.0 and kbroker in `make test-long`)."""

from __future__ import annotations

import struct
import subprocess
import uuid
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from compat_tests.pipeline.connect import JARS, LOG4J2
from compat_tests.pipeline.test_connect import create_topic
from tests.integration.clients import wait_until

RECORDS = 100


def produce(bootstrap: str, topic: str, count: int, start: int = 0) -> None:
    """Records ``start`` .. ``start + count - 1``, alternating between the two partitions."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + count):
        producer.produce(topic, key=f"k{i}", value=f"{topic}-{i}", partition=i % 2)
    assert producer.flush(30) == 0


def offset_syncs(bootstrap: str, target: str, topic: str) -> dict[int, int]:
    """Partition -> the highest upstream offset MirrorMaker has written an offset sync for,
    from its ``mm2-offset-syncs.<target>.internal`` topic on the source cluster (key: topic as
    an int16-length string and an int32 partition; value: int64 upstream, int64 downstream)."""
    name = f"mm2-offset-syncs.{target}.internal"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"syncs-{uuid.uuid4().hex}",
                         "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    found: dict[int, int] = {}
    try:
        if name not in consumer.list_topics(timeout=10).topics:
            return found
        consumer.assign([TopicPartition(name, 0, 0)])
        while True:
            message = consumer.poll(5)
            if message is None or (message.error() and message.error().code()
                                   == KafkaError._PARTITION_EOF):
                return found
            if message.error():
                continue
            key, value = message.key(), message.value()
            length = struct.unpack_from(">h", key, 0)[0]
            if key[2:2 + length].decode() == topic:
                partition = struct.unpack_from(">i", key, 2 + length)[0]
                upstream = struct.unpack_from(">q", value, 0)[0]
                found[partition] = max(found.get(partition, -1), upstream)
    finally:
        consumer.close()


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


def mirror_maker(tmp_path: Path, clusters: dict[str, str], flows: dict[str, dict]) -> subprocess.Popen:
    """MirrorMaker 2's dedicated driver between ``clusters`` (alias -> bootstrap), mirroring
    each ``"source->target"`` of ``flows`` with its ``topics`` and ``groups``; every interval is
    short for a test, every internal topic has one replica."""
    settings = {"clusters": ", ".join(clusters)}
    settings.update({f"{alias}.bootstrap.servers": bootstrap
                     for alias, bootstrap in clusters.items()})
    for flow, what in flows.items():
        settings.update({f"{flow}.enabled": "true", f"{flow}.topics": what["topics"],
                         f"{flow}.groups": what["groups"]})
    settings.update({
        "replication.factor": "1", "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
        "config.storage.replication.factor": "1", "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "sync.group.offsets.enabled": "true", "sync.group.offsets.interval.seconds": "1",
        "emit.checkpoints.interval.seconds": "1", "refresh.topics.interval.seconds": "2",
        "refresh.groups.interval.seconds": "2", "sync.topic.configs.interval.seconds": "2",
        "offset.lag.max": "0", "tasks.max": "1",
        "scheduled.rebalance.max.delay.ms": "3000",
    })
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


def mirror_and_fail_over(tmp_path: Path, clusters: dict[str, str], flows: list[tuple]) -> None:
    """The scenario, for each ``(source alias, target alias, topic, group)`` of ``flows`` at
    once: MirrorMaker mirrors a topic with a config of its own; a group reads the first half of
    it upstream and commits; the second half is produced; MirrorMaker translates the group's
    offsets; then, with MirrorMaker gone, the group fails over to the target cluster and
    resumes at the translated offset, losing nothing. No ERROR line of MirrorMaker's log names
    kbroker.

    MirrorMaker translates a committed offset from the last offset sync at or below it, and it
    writes a sync only for the newest record of a partition it has replicated when its pending
    syncs go out: a topic mirrored in one burst may get a single sync, at its last record, and
    an offset committed below that one is never translated (on Kafka too). So the first half is
    mirrored, and its syncs written, before the group commits and the second half comes."""
    retention = str(3_600_000 + int(uuid.uuid4().int % 1000))
    half = RECORDS // 2
    first, upstream, translated = {}, {}, {}
    for source, _, topic, group in flows:
        create_topic(clusters[source], topic, 2, **{"retention.ms": retention})
    process = mirror_maker(tmp_path, clusters, {
        f"{source}->{target}": {"topics": topic, "groups": group}
        for source, target, topic, group in flows})
    try:
        for source, target, topic, group in flows:
            produce(clusters[source], topic, half)
        for source, target, topic, group in flows:
            wait_until(lambda: all(offset_syncs(clusters[source], target, topic).get(p, -1)
                                   >= half // 2 - 1 for p in (0, 1)), 120, 0.5,
                       f"MirrorMaker's offset syncs for the first {half} records of {topic}")
            first[topic] = consume(clusters[source], group, topic, half)
            assert len(first[topic]) == half
            upstream[topic] = committed(clusters[source], group, topic)
            produce(clusters[source], topic, RECORDS - half, start=half)
        for source, target, topic, group in flows:
            mirrored, bootstrap = f"{source}.{topic}", clusters[target]
            wait_until(lambda: topic_config(bootstrap, mirrored, "retention.ms") == retention,
                       120, 0.5, f"{mirrored} with its retention.ms")
            # Translated offsets may lag the committed ones (records seen again after the
            # failover), never lead.
            wait_until(lambda: len(committed(bootstrap, group, mirrored)) == 2, 120, 0.5,
                       f"{group}'s translated offsets on {mirrored}")
            translated[topic] = committed(bootstrap, group, mirrored)
            # Offsets are translated on their own schedule: the records themselves may still be
            # on their way when the offsets are there, and MirrorMaker is stopped next.
            wait_until(lambda: records_in(bootstrap, mirrored) >= RECORDS, 120, 0.5,
                       f"the {RECORDS} records of {topic} mirrored to {mirrored}")
            assert all(0 <= translated[topic][p] <= upstream[topic][p] for p in (0, 1)), \
                (translated, upstream)
        log = (tmp_path / "mm2.log").read_text(errors="replace")
    finally:
        process.kill()
        process.wait()
    for source, target, topic, group in flows:
        rest = consume(clusters[target], group, f"{source}.{topic}",
                       RECORDS - sum(translated[topic].values()))
        everything = {f"{topic}-{i}" for i in range(RECORDS)}
        assert len(set(rest)) == len(rest) and set(rest) >= everything - set(first[topic])
    assert "ERROR" not in "\n".join(line for line in log.splitlines()
                                    if "kbroker" in line and "ERROR" in line)
