"""A user's tests on the plugin's kafka_cluster (run by tests/testing/test_cluster_fixture.py):
what the experimental cluster does today: processes, bootstrap, Metadata, kill and restart."""

import os
import signal

from kafka import KafkaAdminClient


def describe(address: str) -> dict:
    admin = KafkaAdminClient(bootstrap_servers=address)
    try:
        return admin.describe_cluster()
    finally:
        admin.close()


def test_every_broker_answers_metadata(kafka_cluster):
    assert len(kafka_cluster.brokers) == 3
    assert kafka_cluster.bootstrap_servers == ",".join(
        kafka_cluster.address(b["id"]) for b in kafka_cluster.brokers)
    answers = {b["id"]: describe(kafka_cluster.address(b["id"])) for b in kafka_cluster.brokers}
    assert len({a["cluster_id"] for a in answers.values()}) == 1  # one cluster id for all
    for broker_id, answer in answers.items():
        assert broker_id in [b["broker_id"] for b in answer["brokers"]]
    assert describe(kafka_cluster.bootstrap_servers)["cluster_id"] == answers[1]["cluster_id"]


def test_kill_and_restart(kafka_cluster):
    before = kafka_cluster.broker(2)["pid"]
    kafka_cluster.kill(2)  # SIGKILL: a crash
    assert not kafka_cluster.alive(2)
    kafka_cluster.restart(2)
    after = kafka_cluster.broker(2)["pid"]
    assert after != before and kafka_cluster.alive(2) and kafka_cluster.registered(2)
    os.kill(after, 0)
    assert 2 in [b["broker_id"] for b in describe(kafka_cluster.address(2))["brokers"]]
    kafka_cluster.kill(2, signal.SIGTERM)  # a clean shutdown, then back again
    kafka_cluster.restart(2)
    assert kafka_cluster.alive(2) and kafka_cluster.alive(1) and kafka_cluster.alive(3)
