"""Kafka Connect 4.4 in distributed mode, two workers, on kbroker: FileStream source and sink with
exactly-once source support (KIP-618), driven through Connect's REST API as users drive it, through
a connector restart, a task restart and a worker's kill -9; and a worker misconfigured against
kbroker fails as it fails against Apache Kafka 4.4.0 (a config topic that is not compacted)."""

from __future__ import annotations

import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker_process import BrokerProcess
from tests.integration.clients import wait_until
from compat_tests.pipeline.connect import CONNECT_VERSION, ConnectWorker, RestError, free_port, \
    missing, worker_properties

ROOT = Path(__file__).resolve().parents[2]
SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory):
    if missing():
        pytest.fail(missing())
    broker = BrokerProcess(tmp_path_factory.mktemp("connect") / "data",
                           {"group.initial.rebalance.delay.ms": "0"}).start()
    yield broker
    broker.kill()


def create_topic(bootstrap: str, name: str, partitions: int = 1, **configs) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=configs)])
    futures[name].result(30)


def read_committed(bootstrap: str, topic: str, partitions: int = 1) -> list[str]:
    """Every committed value of ``topic``, partition by partition, in offset order (none while
    the topic does not exist)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    values = []
    try:
        for partition in range(partitions):
            try:
                consumer.get_watermark_offsets(TopicPartition(topic, partition), 10)
            except KafkaException:  # not created yet
                return []
            consumer.assign([TopicPartition(topic, partition, 0)])
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is None:
                    continue
                if message.error():
                    if message.error().code() == -191:  # _PARTITION_EOF
                        break
                    raise AssertionError(message.error())
                values.append(message.value().decode())
    finally:
        consumer.close()
    return values


def append(path: Path, lines) -> None:
    with open(path, "a") as f:
        f.writelines(f"{line}\n" for line in lines)


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def running(worker: ConnectWorker, name: str, tasks: int = 1) -> dict | None:
    try:
        status = worker.status(name)
    except (RestError, OSError):
        return None
    ok = status["connector"]["state"] == "RUNNING" and len(status["tasks"]) == tasks and \
        all(t["state"] == "RUNNING" for t in status["tasks"])
    return status if ok else None


@pytest.mark.compat("connect: FileStream source (exactly-once) and sink, 2 workers, restarts, "
                    "kill -9", client="kafka-connect", version=CONNECT_VERSION)
def test_filestream_exactly_once_through_restarts_and_a_worker_kill(kbroker, tmp_path):
    group = f"connect-{uuid.uuid4().hex[:6]}"
    workers = [ConnectWorker(tmp_path, f"worker{i}", worker_properties(
        kbroker.bootstrap, group, free_port())) for i in (1, 2)]
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    source_file.touch()
    create_topic(kbroker.bootstrap, "lines")
    try:
        for worker in workers:
            worker.start(wait=False)
        for worker in workers:
            worker.wait_ready()
        w1 = workers[0]
        plugins = {p["class"] for p in w1.get("/connector-plugins")}
        assert {SOURCE, SINK} <= plugins
        w1.put_connector("source", {
            "connector.class": SOURCE, "tasks.max": "1", "file": str(source_file),
            "topic": "lines", "exactly.once.support": "required",
            "transaction.boundary": "poll"})
        w1.put_connector("sink", {"connector.class": SINK, "tasks.max": "1",
                                  "file": str(sink_file), "topics": "lines"})
        for name in ("source", "sink"):
            wait_until(lambda: running(w1, name), 60, 0.3, f"{name} running")
        assert sorted(w1.get("/connectors")) == ["sink", "source"]
        expanded = w1.get("/connectors?expand=status&expand=info")
        assert expanded["source"]["info"]["type"] == "source"

        sent = [f"line-{i}" for i in range(100)]
        append(source_file, sent)
        wait_until(lambda: lines_of(sink_file) == sent, 60, 0.2, "the first 100 lines")

        # the connector and its tasks restarted, as `curl -X POST .../restart?includeTasks=true`
        status, body = w1.request("POST", "/connectors/source/restart?includeTasks=true")
        assert status == 202 and body["connector"]["state"] == "RESTARTING"
        wait_until(lambda: running(w1, "source"), 60, 0.3, "source running again")
        more = [f"line-{i}" for i in range(100, 200)]
        append(source_file, more)
        sent += more
        wait_until(lambda: lines_of(sink_file) == sent, 60, 0.2, "200 lines")

        # one task restarted
        status, _ = w1.request("POST", "/connectors/sink/tasks/0/restart")
        assert status == 204
        wait_until(lambda: running(w1, "sink"), 60, 0.3, "sink running again")
        more = [f"line-{i}" for i in range(200, 250)]
        append(source_file, more)
        sent += more
        wait_until(lambda: lines_of(sink_file) == sent, 60, 0.2, "250 lines")

        # kill -9 the worker running the source task: the other one takes it over
        owner = running(w1, "source")["tasks"][0]["worker_id"]
        victim = next(w for w in workers if w.worker_id == owner)
        survivor = next(w for w in workers if w is not victim)
        victim.kill()
        more = [f"line-{i}" for i in range(250, 350)]
        append(source_file, more)
        sent += more
        wait_until(lambda: (s := running(survivor, "source")) and
                   s["tasks"][0]["worker_id"] == survivor.worker_id, 90, 0.5,
                   "the source task on the surviving worker")
        wait_until(lambda: running(survivor, "sink"), 90, 0.5, "the sink running")
        # the sink is at least once; the topic, written in source transactions, exactly once
        wait_until(lambda: set(lines_of(sink_file)) == set(sent), 60, 0.3, "all 350 lines")
        assert read_committed(kbroker.bootstrap, "lines") == sent
        assert survivor.request("DELETE", "/connectors/source")[0] == 204
        assert survivor.get("/connectors") == ["sink"]
    finally:
        for worker in workers:
            worker.kill()


@pytest.mark.compat("connect: a non-compacted config topic refused as by Kafka 4.4.0",
                    client="kafka-connect", version=CONNECT_VERSION)
def test_a_config_topic_that_is_not_compacted_is_refused_as_kafka_refuses_it(kbroker, tmp_path):
    sys.path.insert(0, str(ROOT / "tools" / "kafka_ref"))
    import run_kafka

    # its own Kafka, not the session's (tests/shared_kafka.py): that one stops after the last
    # test of tests/ that uses it, some 20 minutes before this one runs, rather than idle till then
    kafka = run_kafka.start_kafka(port=run_kafka.free_port(), heap="384M")
    try:
        def attempt(bootstrap: str) -> str:
            group = f"bad-{uuid.uuid4().hex[:6]}"
            create_topic(bootstrap, f"{group}-configs", **{"cleanup.policy": "delete"})
            worker = ConnectWorker(tmp_path / bootstrap.replace(":", "-"), "bad",
                                   worker_properties(bootstrap, group, free_port()))
            worker.start(wait=False)
            try:
                found = wait_until(lambda: [line for line in worker.log().splitlines()
                                            if "is required to have 'cleanup.policy" in line],
                                   90, 0.3, "the worker's refusal")
                # the herder thread exits and the worker stops serving
                wait_until(lambda: "REST server stopped" in worker.log(), 30, 0.3,
                           "the worker's REST server to stop")
            finally:
                worker.kill()
            return found[0].replace(group, "GROUP")

        with ThreadPoolExecutor(2) as pool:
            on_kbroker, on_kafka = pool.map(attempt, [kbroker.bootstrap, kafka.bootstrap])
        assert on_kbroker == on_kafka
        assert "is required to have 'cleanup.policy=compact'" in on_kbroker
    finally:
        kafka.stop()
