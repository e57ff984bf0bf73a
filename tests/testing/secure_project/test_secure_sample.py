"""A user's tests of a secured broker through the kbroker pytest plugin (run by
tests/testing/test_security_fixtures.py): each listener kind with confluent-kafka and
kafka-python, a wrong password refused, a fresh broker marked ``kafka_security``."""

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError as KafkaPythonError

CASES = [("SSL", None), ("MTLS", None), ("SASL_PLAINTEXT", "PLAIN"),
         ("SASL_PLAINTEXT", "SCRAM-SHA-256"), ("SASL_SSL", "PLAIN"), ("SASL_SSL", "SCRAM-SHA-512")]


def confluent_round_trip(config: dict, topic: str) -> list[bytes]:
    producer = Producer(config)
    for value in (b"one", b"two"):
        producer.produce(topic, value)
    assert producer.flush(20) == 0, "not delivered"
    consumer = Consumer({**config, "group.id": f"g-{topic}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got, deadline = [], time.monotonic() + 20
    while len(got) < 2 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value())
    consumer.close()
    return got


def kafka_python_round_trip(config: dict, topic: str) -> list[bytes]:
    producer = KafkaProducer(**config)
    for value in (b"one", b"two"):
        producer.send(topic, value).get(timeout=20)
    producer.close()
    consumer = KafkaConsumer(**config, enable_auto_commit=False, consumer_timeout_ms=10000)
    consumer.assign([__import__("kafka").TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    got = [m.value for _, m in zip(range(2), consumer)]
    consumer.close()
    return got


@pytest.mark.parametrize("listener,mechanism", CASES)
def test_confluent_kafka_on_each_listener(kafka_secure_broker, kafka_topic, listener, mechanism):
    topic = kafka_topic()
    client = kafka_secure_broker.security.client(listener, mechanism)
    assert confluent_round_trip(client.librdkafka_config, topic) == [b"one", b"two"]


@pytest.mark.parametrize("listener,mechanism", CASES)
def test_kafka_python_on_each_listener(kafka_secure_broker, listener, mechanism):
    topic = f"kp-{listener}-{mechanism}".lower()
    kafka_secure_broker.create_topics(topic)
    client = kafka_secure_broker.security.client(listener, mechanism, user="bob")
    assert kafka_python_round_trip(client.kafka_python_config, topic) == [b"one", b"two"]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_wrong_password_is_refused(kafka_secure_broker, mechanism):
    client = kafka_secure_broker.security.client("SASL_SSL", mechanism, password="wrong")
    errors = []
    producer = Producer({**client.librdkafka_config, "error_cb": errors.append})
    producer.produce("never", b"x")
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    producer.purge()
    producer.flush(0)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    with pytest.raises(KafkaPythonError):
        KafkaProducer(**client.kafka_python_config, bootstrap_timeout_ms=5000)


def test_mtls_without_a_client_certificate_is_refused(kafka_secure_broker):
    security = kafka_secure_broker.security
    config = {**security.client("MTLS").librdkafka_config, "socket.timeout.ms": 3000}
    del config["ssl.certificate.location"], config["ssl.key.location"]
    errors = []
    producer = Producer({**config, "error_cb": errors.append})
    producer.produce("never", b"x")
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors, "a client without a certificate got through"
    assert producer.flush(1) == 1
    producer.purge()
    producer.flush(0)


@pytest.mark.kafka_security(listeners=["SASL_SSL"], mechanisms=["SCRAM-SHA-512"],
                            users={"carol": "carol-pw"})
def test_fresh_broker_with_its_own_users(fresh_kafka_broker):
    security = fresh_kafka_broker.security
    assert sorted(security.bootstrap_servers) == ["PLAINTEXT", "SASL_SSL"]
    client = security.client("SASL_SSL")
    assert (client.mechanism, client.username, client.password) == ("SCRAM-SHA-512", "carol", "carol-pw")
    fresh_kafka_broker.create_topics("mine")
    assert confluent_round_trip(client.librdkafka_config, "mine") == [b"one", b"two"]
