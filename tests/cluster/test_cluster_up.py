"""``kbroker cluster up`` as a user runs it: a real ZooKeeper and three plain `kbroker serve`
processes, registered, with one controller and shared topics; SIGTERM stops every process it
started."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from kbroker.testing.procfs import alive
from kbroker.testing.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]


def _wait_for(condition, what, timeout=90.0):
    wait_for(condition, what, timeout, 0.1)


@pytest.fixture
def cluster(tmp_path):
    info_file = tmp_path / "cluster.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    launcher = subprocess.Popen(
        [sys.executable, "-m", "kbroker.cli.main", "cluster", "up", "--brokers", "3",
         "--json", str(info_file), "--data-dir", str(tmp_path / "data")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=tmp_path)
    try:
        _wait_for(lambda: info_file.exists() or launcher.poll() is not None, "the launcher")
        if launcher.poll() is not None:
            pytest.fail(f"kbroker cluster up exited: {launcher.stdout.read().decode()}")
        yield launcher, json.loads(info_file.read_text())
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()


def test_cluster_up_starts_registers_and_stops_everything(cluster):
    launcher, info = cluster
    assert info["session_timeout_ms"] == 6000
    assert len(info["brokers"]) == 3
    pids = [info["zookeeper"]["pid"]] + [b["pid"] for b in info["brokers"]]
    assert all(alive(pid) for pid in pids)
    for broker in info["brokers"]:
        # The PID is the broker itself, running the command the JSON says restarts it.
        cmdline = Path(f"/proc/{broker['pid']}/cmdline").read_bytes().split(b"\0")
        assert [c.decode() for c in cmdline if c] == broker["restart_command"]
        assert os.path.isdir(broker["data_dir"])
    assert info["bootstrap_servers"] == ",".join(f"127.0.0.1:{b['port']}"
                                                 for b in info["brokers"])

    zk = KazooClient(info["zookeeper"]["connect"])
    zk.start(timeout=10)
    try:
        _wait_for(lambda: sorted(zk.get_children("/brokers/ids")) == ["1", "2", "3"],
                  "three registrations")
        _wait_for(lambda: zk.exists("/controller") is not None, "a controller")
        controller = json.loads(zk.get("/controller")[0])["brokerid"]
        assert controller in (1, 2, 3)
        assert zk.get("/controller_epoch")[0] == b"1"
        for broker in info["brokers"]:
            registration = json.loads(zk.get(f"/brokers/ids/{broker['id']}")[0])
            # the Kafka listener, then the schema registry's (its URL, for forwarding)
            registry_port = broker["schema_registry"].rsplit(":", 1)[1]
            assert registration["endpoints"] == [
                f"PLAINTEXT://127.0.0.1:{broker['port']}",
                f"SCHEMA_REGISTRY://127.0.0.1:{registry_port}"]
        cluster_id = json.loads(zk.get("/cluster/id")[0])["id"]
    finally:
        zk.stop()
        zk.close()

    # A stock Kafka client sees the cluster id that ZooKeeper holds, on every broker.
    from kafka import KafkaAdminClient
    for broker in info["brokers"]:
        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{broker['port']}")
        try:
            assert admin.describe_cluster()["cluster_id"] == cluster_id
        finally:
            admin.close()

    # One cluster: a topic created through broker 1 is described by broker 3, placed over all.
    from kafka.admin import NewTopic
    first, last = (f"127.0.0.1:{b['port']}" for b in (info["brokers"][0], info["brokers"][-1]))
    admin = KafkaAdminClient(bootstrap_servers=first)
    try:
        admin.create_topics([NewTopic("shared", 3, 3)])
    finally:
        admin.close()
    admin = KafkaAdminClient(bootstrap_servers=last)
    try:
        def described():
            topics = admin.describe_topics(["shared"])
            return topics and topics[0]["error_code"] == 0 and topics[0]["partitions"]
        _wait_for(described, "broker 3 to describe the topic")
        for partition in described():
            assert sorted(partition.get("replicas", partition.get("replica_nodes"))) == [1, 2, 3]
    finally:
        admin.close()

    launcher.send_signal(signal.SIGTERM)
    assert launcher.wait(60) == 0
    output = launcher.stdout.read().decode()
    assert "bootstrap servers  " + info["bootstrap_servers"] in output
    assert not [pid for pid in pids if alive(pid)]


def test_a_killed_broker_is_not_restarted_and_its_registration_expires(cluster):
    launcher, info = cluster
    victim = info["brokers"][1]
    zk = KazooClient(info["zookeeper"]["connect"])
    zk.start(timeout=10)
    try:
        _wait_for(lambda: len(zk.get_children("/brokers/ids")) == 3, "three registrations")
        os.kill(victim["pid"], signal.SIGKILL)
        # Its ephemeral znode goes when ZooKeeper expires its session (6 s), not before.
        _wait_for(lambda: sorted(zk.get_children("/brokers/ids")) == ["1", "3"], "the expiry")
        assert not alive(victim["pid"])
        # The launcher did not restart it; the exact restart command brings it back.
        restarted = subprocess.Popen(victim["restart_command"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL,
                                     env={**os.environ, "PYTHONPATH": str(ROOT)})
        try:
            _wait_for(lambda: sorted(zk.get_children("/brokers/ids")) == ["1", "2", "3"],
                      "the restarted broker's registration")
        finally:
            restarted.send_signal(signal.SIGTERM)
            assert restarted.wait(60) == 0
    finally:
        zk.stop()
        zk.close()
    launcher.send_signal(signal.SIGTERM)
    assert launcher.wait(60) == 0
