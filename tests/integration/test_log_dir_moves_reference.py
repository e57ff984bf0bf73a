"""Moving a replica between log dirs (AlterReplicaLogDirs, issue 36 part 5) with Apache Kafka
4.4.0's own tools, side by side with Kafka 4.4.0 (the run's shared reference broker, which has two
log dirs like the kbroker here): ``kafka-reassign-partitions.sh`` with ``log_dirs`` (--execute,
then --verify until done), ``kafka-log-dirs.sh --describe`` before and after, every record
readable afterwards. Then on kbroker alone, a move slowed by
``--replica-alter-log-dirs-throttle`` shows the future replica (``isFuture``, its lag) and "still
in progress", takes produces while it runs, and survives a kill -9 in the middle: after the
restart the move completes and no acknowledged record is lost. The mechanics (truncation, retention
and every crash point of the swap) are in tests/replica/test_log_dir_moves.py.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid

import pytest

from tests.broker_process import BrokerProcess
from tests.integration.clients import consume_confluent, ensure_topic, produce_confluent
from tests.integration.test_kafka_reference import side_by_side
from tests.shared_kafka import run_kafka_tool

RECORDS = 2000
SLOW_RECORDS = 3000
VALUE = b"v" * 500


@pytest.fixture(scope="module")
def brokers(tmp_path_factory, reference_kafka):
    kafka = reference_kafka.get()
    base = tmp_path_factory.mktemp("moves")
    kbroker_dirs = [str(base / "data"), str(base / "data2")]
    kbroker = BrokerProcess(base / "broker", {"log.dirs": ",".join(kbroker_dirs),
                                              "num.partitions": "1"})
    try:
        kbroker.start()
        yield {"kafka": (kafka.bootstrap, reference_kafka.log_dirs()),
               "kbroker": (kbroker.bootstrap, kbroker_dirs, kbroker)}
    finally:
        kbroker.kill()


def tool(main: str, bootstrap: str, *args: str, timeout: float = 120) -> str:
    run_kafka = run_kafka_tool()
    cmd = run_kafka.java_cmd(main, ["--bootstrap-server", bootstrap, *args],
                             run_kafka.DEFAULT_VERSION, None, heap="256M")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def reassign(bootstrap: str, plan_file, *args: str) -> str:
    return tool("org.apache.kafka.tools.reassign.ReassignPartitionsCommand", bootstrap,
                "--reassignment-json-file", str(plan_file), *args)


def log_dirs_of(bootstrap: str, topic: str) -> dict:
    """kafka-log-dirs.sh --describe: {dir: [(partition, isFuture, offsetLag, size > 0)]}."""
    out = tool("org.apache.kafka.tools.LogDirsCommand", bootstrap, "--describe",
               "--topic-list", topic)
    answer = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    (broker,) = answer["brokers"]
    return {d["logDir"]: sorted((p["partition"], p["isFuture"], p["offsetLag"], p["size"] > 0)
                                for p in d["partitions"]) for d in broker["logDirs"]
            if d["error"] is None}


def normalized(text: str, dirs: list[str]) -> str:
    for i, log_dir in sorted(enumerate(dirs), key=lambda d: -len(d[1])):  # data2 before data
        text = text.replace(log_dir, f"<dir{i}>")
    return text


def where(bootstrap: str, dirs: list[str], topic: str) -> dict:
    """{dir index: partitions} from kafka-log-dirs.sh."""
    described = log_dirs_of(bootstrap, topic)
    return {dirs.index(d): parts for d, parts in described.items() if parts}


def test_kafka_reassign_partitions_moves_a_replica_to_the_other_dir(brokers, tmp_path):
    topic = f"move-{uuid.uuid4().hex[:8]}"

    def move(side):
        bootstrap, dirs = side[:2]
        ensure_topic(bootstrap, topic, 1)
        produce_confluent(bootstrap, topic, [(str(i).encode(), VALUE) for i in range(RECORDS)])
        before = where(bootstrap, dirs, topic)
        (source,) = before
        destination = 1 - source
        plan = tmp_path / f"plan-{bootstrap.rsplit(':', 1)[1]}.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": 0, "replicas": [1], "log_dirs": [dirs[destination]]}]}))
        executed = normalized(reassign(bootstrap, plan, "--execute"), dirs)
        for _ in range(100):
            verified = normalized(reassign(bootstrap, plan, "--verify"), dirs)
            if "is still in progress" not in verified:
                break
            time.sleep(0.2)
        after = where(bootstrap, dirs, topic)
        got = consume_confluent(bootstrap, topic, RECORDS)
        return {"before": {"source": [p for p in before[source]]},
                "after": {"source": after.get(source), "destination": after.get(destination)},
                "execute": executed.replace(f"<dir{source}>", "<source>").replace(
                    f"<dir{destination}>", "<destination>"),
                "verify": verified.replace(f"<dir{destination}>", "<destination>"),
                "records": [(g.key, g.offset) for g in got] == [
                    (str(i).encode(), i) for i in range(RECORDS)]}

    moved = side_by_side(brokers, move)
    assert moved["after"] == {"source": None,
                              "destination": [(f"{topic}-0", False, 0, True)]}
    assert f"Successfully started moving log directory to <destination> for replica " \
           f"{topic}-0 with broker 1" in moved["execute"]
    assert f"Reassignment of replica {topic}-0-1 completed successfully." in moved["verify"]
    assert moved["records"]


def test_a_throttled_move_shows_its_future_replica_and_survives_a_kill(brokers, tmp_path):
    bootstrap, dirs, broker = brokers["kbroker"]
    topic = f"slow-{uuid.uuid4().hex[:8]}"
    ensure_topic(bootstrap, topic, 1)
    # ~1.5 MB in many batches: a first round copies 1 MB (replica.fetch.max.bytes), then the
    # throttle of 20 KB/s holds the next one back for 50 s, to look at and to kill in (a loaded
    # CI machine took over 10 s for the tool runs and the produce below). After the restart the
    # rest (~0.7 MB) fits in one round, which the throttle lets go at once.
    acked = produce_confluent(bootstrap, topic, [(str(i).encode(), VALUE)
                                                 for i in range(SLOW_RECORDS)],
                              batch_size=20000)
    assert len(acked) == SLOW_RECORDS
    (source,) = where(bootstrap, dirs, topic)
    destination = 1 - source
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [1], "log_dirs": [dirs[destination]]}]}))
    reassign(bootstrap, plan, "--execute", "--replica-alter-log-dirs-throttle", "20000")
    described = where(bootstrap, dirs, topic)
    assert described[source] == [(f"{topic}-0", False, 0, True)]
    [(name, future, lag, _)] = described[destination]
    assert (name, future) == (f"{topic}-0", True) and 0 < lag < SLOW_RECORDS
    assert f"Reassignment of replica {topic}-0-1 is still in progress." in reassign(
        bootstrap, plan, "--verify")
    # Writes go on while the copy runs; then the broker dies mid-copy.
    more = produce_confluent(bootstrap, topic, [(str(i).encode(), VALUE)
                                                for i in range(SLOW_RECORDS, SLOW_RECORDS + 200)])
    assert len(more) == 200
    broker.kill()
    broker.start()
    # The copy resumes (the throttle is a dynamic config, kept) and completes.
    for _ in range(150):
        verified = reassign(bootstrap, plan, "--verify")
        if "is still in progress" not in verified:
            break
        time.sleep(0.2)
    assert f"Reassignment of replica {topic}-0-1 completed successfully." in verified
    assert "Clearing broker-level throttles on broker 1" in verified
    assert where(bootstrap, dirs, topic) == {destination: [(f"{topic}-0", False, 0, True)]}
    got = consume_confluent(bootstrap, topic, SLOW_RECORDS + 200)
    assert [(g.key, g.offset) for g in got] == [(str(i).encode(), i)
                                                for i in range(SLOW_RECORDS + 200)]
    assert f"{topic}-0: resuming its move" in broker.log()  # killed mid-copy indeed
    assert f"moved {topic}-0 from" in broker.log()
