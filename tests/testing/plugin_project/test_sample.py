"""A user's test suite using the kbroker pytest plugin (run by tests/testing/test_plugin.py)."""

import os

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient


def test_produce_and_consume_all(kafka_broker, kafka_topic):
    topic = kafka_topic(partitions=3)
    kafka_broker.produce(topic, [b"a", b"b"], key=b"k")
    assert sorted(r.value for r in kafka_broker.consume_all(topic)) == [b"a", b"b"]


def test_each_topic_is_fresh(kafka_broker, kafka_topic):
    first, second = kafka_topic(), kafka_topic()
    assert first != second
    assert kafka_broker.consume_all(first) == []


def test_ini_settings_reach_the_broker(kafka_broker):
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers)
    producer.send("auto-created", b"x").get(timeout=30)  # auto-create uses num.partitions=2
    producer.close()
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap_servers)
    [topic] = admin.describe_topics(["auto-created"])
    admin.close()
    assert len(topic["partitions"]) == 2


def test_wait_for_lag_zero(kafka_broker, kafka_topic):
    topic = kafka_topic()
    kafka_broker.produce(topic, [b"1", b"2", b"3"])
    consumer = KafkaConsumer(topic, bootstrap_servers=kafka_broker.bootstrap_servers,
                             group_id="sample", auto_offset_reset="earliest")
    assert kafka_broker.lag("sample", [topic]) == 3
    seen = 0
    while seen < 3:
        seen += sum(len(batch) for batch in consumer.poll(timeout_ms=500).values())
    consumer.commit()
    kafka_broker.wait_for_lag_zero("sample", [topic], timeout=10)
    consumer.close()


@pytest.mark.kafka_settings({"num.partitions": 5})
def test_fresh_broker_with_its_own_settings(fresh_kafka_broker, kafka_broker):
    assert fresh_kafka_broker.bootstrap_servers != kafka_broker.bootstrap_servers
    fresh_kafka_broker.produce("t", [b"x"])
    [topic] = fresh_kafka_broker.admin.describe_topics(["t"])
    assert len(topic["partitions"]) == 5


def test_worker_sees_its_own_broker(kafka_broker):
    # Under xdist each worker writes the broker it got; the calling test compares them.
    report_dir = os.environ.get("KBROKER_SAMPLE_REPORT_DIR")
    if report_dir:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(os.path.join(report_dir, worker), "w") as f:
            f.write(kafka_broker.bootstrap_servers)


@pytest.mark.skipif(not os.environ.get("KBROKER_SAMPLE_FAIL"), reason="run only to test keep-data")
def test_fails_on_purpose(kafka_broker, kafka_topic):
    kafka_broker.produce(kafka_topic(), [b"evidence"])
    assert False, "failing on purpose"
