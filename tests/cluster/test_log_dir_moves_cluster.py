"""AlterReplicaLogDirs in a ZooKeeper cluster (issue 36 part 5): Kafka 4.4.0's
``kafka-reassign-partitions.sh`` moves a replica to another broker *and* names its log dir there.
The tool asks that broker before the reassignment has made the replica there; the broker answers
REPLICA_NOT_AVAILABLE, remembers the dir, and creates the replica in it (or, when the replica came
first, moves it there). A follower's replica then moves between its own dirs while it replicates.
"""

from __future__ import annotations

import json
import subprocess
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.conftest import start_brokers, stop_brokers, wait_for
from tests.integration.clients import consume_confluent
from tests.shared_kafka import run_kafka_tool

RECORDS = 500


def reassign(bootstrap: str, plan, *args: str) -> str:
    run_kafka = run_kafka_tool()
    cmd = run_kafka.java_cmd("org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
                             ["--bootstrap-server", bootstrap, "--reassignment-json-file",
                              str(plan), *args], run_kafka.DEFAULT_VERSION, None, heap="256M")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def verify_until_done(bootstrap: str, plan) -> str:
    deadline = time.monotonic() + 60
    while True:
        out = reassign(bootstrap, plan, "--verify")
        if "in progress" not in out or time.monotonic() > deadline:
            return out
        time.sleep(0.3)


def test_reassign_to_another_broker_and_dir_then_move_a_follower(connect_string, tmp_path):
    dirs = {b: [str(tmp_path / f"b{b}" / "one"), str(tmp_path / f"b{b}" / "two")] for b in (1, 2)}
    brokers = start_brokers(connect_string, lambda b: {"log.dirs": ",".join(dirs[b])}, ids=(1, 2))
    try:
        bootstrap = ",".join(b._inner.bootstrap_servers for b in brokers.values())
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("hop", 1, replica_assignment=[[1]])])["hop"].result(30)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(RECORDS):
            producer.produce("hop", str(i).encode(), key=str(i).encode())
        assert producer.flush(30) == 0

        replicas = {b: brokers[b]._inner.broker.replicas for b in brokers}
        # Broker 1's replica goes to broker 2, into broker 2's second dir.
        plan = tmp_path / "to-2.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "hop", "partition": 0, "replicas": [2], "log_dirs": [dirs[2][1]]}]}))
        executed = reassign(bootstrap, plan, "--execute")
        assert (f"Successfully started moving log directory to {dirs[2][1]} for replica hop-0 "
                f"with broker 2") in executed
        verified = verify_until_done(bootstrap, plan)
        assert "Reassignment of partition hop-0 is completed." in verified
        assert "Reassignment of replica hop-0-2 completed successfully." in verified
        wait_for(lambda: replicas[1].get("hop", 0) is None, "broker 1 to drop its replica", 30)
        assert replicas[2].log_dir_of("hop", 0) == dirs[2][1]

        # Back to both brokers, broker 1 following; then broker 1's replica changes dir while
        # the partition takes writes.
        plan2 = tmp_path / "both.json"
        plan2.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "hop", "partition": 0, "replicas": [2, 1], "log_dirs": ["any", "any"]}]}))
        reassign(bootstrap, plan2, "--execute")
        assert "Reassignment of partition hop-0 is completed." in \
            verify_until_done(bootstrap, plan2)
        wait_for(lambda: (p := replicas[1].get("hop", 0)) is not None
                 and p.log_end_offset == replicas[2].get("hop", 0).log_end_offset,
                 "broker 1's new replica to catch up", 30)
        current = replicas[1].log_dir_of("hop", 0)
        other = dirs[1][1] if current == dirs[1][0] else dirs[1][0]
        plan3 = tmp_path / "follower.json"
        plan3.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "hop", "partition": 0, "replicas": [2, 1], "log_dirs": ["any", other]}]}))
        reassign(bootstrap, plan3, "--execute")
        for i in range(RECORDS, 2 * RECORDS):
            producer.produce("hop", str(i).encode(), key=str(i).encode())
        assert producer.flush(30) == 0
        assert "Reassignment of replica hop-0-1 completed successfully." in \
            verify_until_done(bootstrap, plan3)
        assert replicas[1].log_dir_of("hop", 0) == other
        wait_for(lambda: replicas[1].get("hop", 0).log_end_offset == 2 * RECORDS,
                 "the moved follower to hold every record", 30)
        # Broker 1 now leads from its moved replica and serves every record.
        brokers.pop(2).stop()
        got = consume_confluent(brokers[1]._inner.bootstrap_servers, "hop", 2 * RECORDS,
                                timeout=60)
        assert sorted(int(g.key) for g in got) == list(range(2 * RECORDS))
    finally:
        stop_brokers(brokers)
