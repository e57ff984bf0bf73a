"""The HTTP port: health, readiness and Prometheus metrics scraped and parsed, over real sockets,
after real clients produced, consumed and committed."""

from __future__ import annotations

import socket
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from tests.observability.conftest import http_get, http_json, with_http

TIMEOUT = 20


def scrape(broker) -> dict:
    """{(name, frozenset(labels)): value} from /metrics."""
    status, text = http_get(broker, "/metrics")
    assert status == 200
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())))


def produce(broker, topic, count):
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, key=b"k%d" % i, value=b"x" * 100)
    assert producer.flush(TIMEOUT) == 0


def test_health_and_readiness(dev_broker):
    assert http_get(dev_broker, "/healthz") == (200, "ok\n")
    assert http_get(dev_broker, "/readyz") == (200, "ready\n")
    assert http_get(dev_broker, "/nowhere")[0] == 404


def test_http_is_off_by_default_outside_dev_mode(broker):
    assert with_http(broker).http is None


def test_metrics_count_messages_bytes_requests_and_lag(dev_broker):
    produce(dev_broker, "metered", 10)
    consumer = Consumer({"bootstrap.servers": dev_broker.bootstrap, "group.id": "meter",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("metered", 0, 0)])
    got, deadline = 0, time.monotonic() + TIMEOUT
    while got < 10 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            got += 1
    consumer.commit(offsets=[TopicPartition("metered", 0, 4)], asynchronous=False)
    consumer.close()
    assert got == 10

    samples = scrape(dev_broker)
    assert value(samples, "kafka_server_brokertopicmetrics_messagesin_total", topic="metered") == 10
    assert value(samples, "kafka_server_brokertopicmetrics_bytesin_total", topic="metered") > 1000
    assert value(samples, "kafka_server_brokertopicmetrics_bytesout_total", topic="metered") > 1000
    produce_requests = sum(v for (name, labels), v in samples.items()
                           if name == "kafka_network_requestmetrics_requests_total"
                           and ("request", "Produce") in labels)
    assert produce_requests >= 1
    assert value(samples, "kafka_network_requestmetrics_totaltimems_count",
                 request="Produce") == produce_requests
    assert value(samples, "kafka_log_log_logendoffset", topic="metered", partition="0") == 10
    assert value(samples, "kafka_log_log_size", topic="metered", partition="0") > 1000
    assert value(samples, "kafka_consumergroup_lag", consumergroup="meter", topic="metered",
                 partition="0") == 6
    assert value(samples, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(samples, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert value(samples, "kafka_server_socketservermetrics_connection_count") is not None


def test_error_responses_are_counted_per_api_and_error(dev_broker):
    # Metadata for a topic that cannot exist (an illegal name) answers INVALID_TOPIC_EXCEPTION.
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    admin = KafkaAdminClient(bootstrap_servers=dev_broker.bootstrap)
    try:
        admin.describe_topics(["bad topic name!"])
    except KafkaError:
        pass
    finally:
        admin.close()
    samples = scrape(dev_broker)
    errors = {dict(labels)["error"] for (name, labels), v in samples.items()
              if name == "kafka_network_requestmetrics_errors_total"}
    assert errors & {"INVALID_TOPIC_EXCEPTION", "UNKNOWN_TOPIC_OR_PARTITION"}


def test_a_malformed_http_request_gets_400_and_the_broker_keeps_serving(dev_broker):
    host, port = dev_broker.http.split("//")[1].rstrip("/").split(":")
    with socket.create_connection((host, int(port)), timeout=TIMEOUT) as s:
        s.sendall(b"NONSENSE\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 400")
    assert http_json(dev_broker, "/api/cluster")["controller_id"] == 1
