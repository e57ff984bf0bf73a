"""Flink on kbroker: a job in a local mini-cluster (``flink/``: Flink's Kafka source, a map, and
``KafkaSink`` with ``DeliveryGuarantee.EXACTLY_ONCE``) is killed -9 while it copies a topic and
restarted from its latest retained checkpoint; read_committed, the output is the input, each
record exactly once."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from compat_tests.pipeline.connect import LOG4J2
from compat_tests.pipeline.test_connect import create_topic, read_committed
from tests.broker_process import BrokerProcess
from tests.integration.clients import wait_until

HERE = Path(__file__).resolve().parent / "flink"
CLASSES, JARS = HERE / "target" / "classes", HERE / "target" / "jars"
FLINK_VERSION, CONNECTOR_VERSION = "2.2.1", "5.0.0-2.2"  # flink/pom.xml
# what Flink's own scripts open for its serializers on Java 17
OPENS = [f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in (
    "java.lang", "java.util", "java.util.concurrent", "java.lang.reflect", "java.io", "java.nio",
    "java.net", "java.text", "java.time", "sun.nio.ch")]
RECORDS = 1000


def produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + count):
        producer.produce(topic, key=str(i), value=f"record-{i}", partition=i % 2)
    assert producer.flush(30) == 0


def latest_checkpoint(directory: Path) -> Path | None:
    done = [p.parent for p in directory.glob("*/chk-*/_metadata")]
    return max(done, key=lambda p: int(p.name.split("-")[1])) if done else None


@pytest.mark.compat("flink: KafkaSink exactly-once, kill -9, restart from checkpoint",
                    client="flink", version=f"{FLINK_VERSION} (flink-connector-kafka "
                                            f"{CONNECTOR_VERSION}, mini-cluster)")
def test_flink_exactly_once_across_a_kill_and_a_restore(tmp_path):
    if not (CLASSES / "dev" / "kbroker" / "flink" / "CopyJob.class").exists():
        pytest.fail("the Flink job is not built: run scripts/install-test-deps.sh")
    broker = BrokerProcess(tmp_path / "data", {"group.initial.rebalance.delay.ms": "0"}).start()
    source, sink = f"in-{uuid.uuid4().hex[:6]}", f"out-{uuid.uuid4().hex[:6]}"
    checkpoints = tmp_path / "checkpoints"
    log = open(tmp_path / "flink.out", "ab")
    log4j = tmp_path / "log4j2.properties"
    log4j.write_text(LOG4J2.format(log=tmp_path / "flink.log"))

    def job(*restore):
        # C1 only, as the tests' other short-lived JVMs: 27.6 -> 19.5 s of CPU for this module
        return subprocess.Popen(
            ["java", "-Xmx768m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", *OPENS,
             f"-Dlog4j2.configurationFile={log4j}", "-cp", f"{CLASSES}:{JARS}/*",
             "dev.kbroker.flink.CopyJob", broker.bootstrap, source, sink, str(checkpoints),
             *map(str, restore)], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    process = None
    try:
        create_topic(broker.bootstrap, source, 2)
        create_topic(broker.bootstrap, sink, 2)
        produce(broker.bootstrap, source, 0, RECORDS // 2)
        process = job()
        # killed part-way: some transactions committed, one open
        wait_until(lambda: len(read_committed(broker.bootstrap, sink, 2)) >= RECORDS // 4, 120,
                   0.3, "a quarter of the records copied")
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        restore = wait_until(lambda: latest_checkpoint(checkpoints), 10, 0.2, "a checkpoint")
        produce(broker.bootstrap, source, RECORDS // 2, RECORDS // 2)
        process = job(restore)
        expected = collections.Counter(f"record-{i}|copied" for i in range(RECORDS))
        wait_until(lambda: len(read_committed(broker.bootstrap, sink, 2)) >= RECORDS, 180, 0.5,
                   "every record copied")
        got = collections.Counter(read_committed(broker.bootstrap, sink, 2))
        assert got == expected, (sum(got.values()), [v for v, n in got.items() if n > 1][:5],
                                 _tail(tmp_path))
    finally:
        if process is not None and process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()
        broker.kill()


def _tail(tmp_path: Path) -> str:
    path = tmp_path / "flink.log"
    return path.read_text(errors="replace")[-3000:] if path.exists() else ""
