"""The coordinators are built when first needed (kbroker.server.coordinators): not by a broker
that only produces and fetches, by the first group or transaction request, at start-up when
their internal topics hold state, and when an internal topic is created by an admin."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kbroker.testing import KafkaBroker
from kbroker.testing.waiting import wait_for

COORDINATOR_MODULES = ("kbroker.coordinator.group.coordinator",
                       "kbroker.coordinator.txn.coordinator",
                       "kbroker.coordinator.share.coordinator", "kbroker.share.manager")


def _produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, f"v{i}".encode())
    assert producer.flush(15) == 0


def _consume_and_commit(bootstrap: str, topic: str, group: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    values = []
    try:
        while len(values) < count:
            message = consumer.poll(15)
            assert message is not None, f"only {len(values)} of {count} records"
            assert message.error() is None, message.error()
            values.append(message.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return values


def _committed(bootstrap: str, topic: str, group: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        [tp] = consumer.committed([TopicPartition(topic, 0)], timeout=15)
        return tp.offset
    finally:
        consumer.close()


def test_a_fresh_broker_loads_no_coordinator_module():
    """A process that starts a broker on an empty dir imports none of them (checked in a
    process of its own: this one may have imported them for other tests)."""
    script = textwrap.dedent(f"""
        import sys
        from kbroker.testing import KafkaBroker
        with KafkaBroker() as kafka:
            loaded = [m for m in {COORDINATOR_MODULES!r} if m in sys.modules]
            assert not loaded, loaded
            assert kafka.broker.coordinators.built is False
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_produce_and_fetch_build_nothing_and_the_first_group_request_builds_them(tmp_path):
    with KafkaBroker({"num.partitions": 1}, data_dir=tmp_path / "data") as kafka:
        _produce(kafka.bootstrap_servers, "plain", 5)
        assert kafka.broker.coordinators.built is False
        values = _consume_and_commit(kafka.bootstrap_servers, "plain", "g1", 5)
        assert values == [f"v{i}".encode() for i in range(5)]
        assert kafka.broker.coordinators.built is True
        assert _committed(kafka.bootstrap_servers, "plain", "g1") == 5


def test_a_restart_with_committed_offsets_builds_them_at_start(tmp_path):
    data = tmp_path / "data"
    with KafkaBroker({"num.partitions": 1}, data_dir=data) as kafka:
        _produce(kafka.bootstrap_servers, "orders", 3)
        _consume_and_commit(kafka.bootstrap_servers, "orders", "g2", 3)
    with KafkaBroker({"num.partitions": 1}, data_dir=data) as kafka:
        # __consumer_offsets is in the metadata: its shards load at start, before any request
        assert kafka.broker.coordinators.built is True
        assert _committed(kafka.bootstrap_servers, "orders", "g2") == 3


def test_an_internal_topic_created_by_an_admin_builds_them(tmp_path):
    with KafkaBroker({"num.partitions": 1}, data_dir=tmp_path / "data") as kafka:
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
        futures = admin.create_topics([NewTopic("__consumer_offsets", 1, 1, config={
            "cleanup.policy": "compact"})])
        futures["__consumer_offsets"].result(15)
        wait_for(lambda: kafka.broker.coordinators.built, "the coordinators", timeout=10)
        _produce(kafka.bootstrap_servers, "events", 2)
        _consume_and_commit(kafka.bootstrap_servers, "events", "g3", 2)
        assert _committed(kafka.bootstrap_servers, "events", "g3") == 2


def test_a_scrape_and_the_console_build_nothing(tmp_path):
    import urllib.request

    with KafkaBroker({"http.port": 0}, data_dir=tmp_path / "data") as kafka:
        url = kafka.broker.http.url
        for path in ("metrics", "api/groups", "api/share-groups"):
            with urllib.request.urlopen(url + path, timeout=10) as response:
                assert response.status == 200
        assert kafka.broker.coordinators.built is False


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
