"""Fault injection driven through the Admin API (IncrementalAlterConfigs on the BROKER
resource), with real clients retrying through the injected failures."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   NewTopic, ResourceType)

from kbroker.protocol.errors import Errors
from tests.observability.conftest import log_lines

TIMEOUT = 20


def set_rules(broker, *rules, op=AlterConfigOpType.SET):
    """IncrementalAlterConfigs on broker 1; returns the future's result (raises on error)."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry(name, value, incremental_operation=op) for name, value in rules])
    return admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)


def refusal(broker, *rules):
    with pytest.raises(KafkaException) as info:
        set_rules(broker, *rules)
    return info.value.args[0]


def create_topic(broker, name, partitions=1):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(TIMEOUT)


def fault_lines(broker, rule, expected=1):
    return log_lines(broker, lambda line: f"fault kbroker.fault.{rule}:" in line, expected)


def produce(broker, topic, count, **config):
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, **config})
    acked = []
    for i in range(count):
        producer.produce(topic, value=b"v%d" % i,
                         on_delivery=lambda err, msg: acked.append(err))
        producer.flush(TIMEOUT)
    return acked


def test_not_leader_on_produce_is_retried_by_librdkafka(dev_broker):
    create_topic(dev_broker, "orders")
    set_rules(dev_broker, ("kbroker.fault.nl",
                           "api=Produce error=NOT_LEADER_OR_FOLLOWER count=2 topic=orders"))
    assert produce(dev_broker, "orders", 3) == [None, None, None]
    assert len(fault_lines(dev_broker, "nl", 2)) == 2
    # The rule stays visible, spent, in DescribeConfigs.
    admin = AdminClient({"bootstrap.servers": dev_broker.bootstrap})
    resource = ConfigResource(ResourceType.BROKER, "1")
    entries = admin.describe_configs([resource])[resource].result(TIMEOUT)
    assert entries["kbroker.fault.nl"].value == \
        "api=Produce error=NOT_LEADER_OR_FOLLOWER count=2 topic=orders"


def test_not_leader_on_produce_is_retried_by_kafka_python(dev_broker):
    from kafka import KafkaProducer

    create_topic(dev_broker, "kp")
    set_rules(dev_broker, ("kbroker.fault.kp", "api=Produce error=NOT_LEADER_OR_FOLLOWER count=1"))
    producer = KafkaProducer(bootstrap_servers=dev_broker.bootstrap, retries=5,
                             retry_backoff_ms=50)
    metadata = producer.send("kp", b"hello").get(TIMEOUT)
    producer.close()
    assert metadata.offset == 0
    assert len(fault_lines(dev_broker, "kp")) == 1


def test_request_timed_out_on_produce_is_retried(dev_broker):
    create_topic(dev_broker, "slow")
    set_rules(dev_broker, ("kbroker.fault.rto", "api=Produce error=REQUEST_TIMED_OUT count=1"))
    assert produce(dev_broker, "slow", 2) == [None, None]
    assert len(fault_lines(dev_broker, "rto")) == 1


def test_coordinator_load_in_progress_on_offset_fetch_is_retried(dev_broker):
    create_topic(dev_broker, "g")
    assert produce(dev_broker, "g", 1) == [None]
    consumer = Consumer({"bootstrap.servers": dev_broker.bootstrap, "group.id": "loader",
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition("g", 0, 1)], asynchronous=False)
        set_rules(dev_broker, ("kbroker.fault.load",
                               "api=OffsetFetch error=COORDINATOR_LOAD_IN_PROGRESS count=2"))
        (committed,) = consumer.committed([TopicPartition("g", 0)], timeout=TIMEOUT)
    finally:
        consumer.close()
    assert committed.offset == 1
    assert len(fault_lines(dev_broker, "load", 2)) == 2


def test_dropped_connection_mid_fetch_consumer_resumes(dev_broker):
    create_topic(dev_broker, "drop")
    assert produce(dev_broker, "drop", 5) == [None] * 5
    set_rules(dev_broker, ("kbroker.fault.drop", "api=Fetch close count=1 topic=drop"))
    consumer = Consumer({"bootstrap.servers": dev_broker.bootstrap, "group.id": "dropper",
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("drop", 0, 0)])
    values, deadline = [], time.monotonic() + TIMEOUT
    try:
        while len(values) < 5 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                values.append(message.value())
    finally:
        consumer.close()
    assert values == [b"v%d" % i for i in range(5)]
    assert len(fault_lines(dev_broker, "drop")) == 1


def test_delay_and_throttle_still_answer(dev_broker):
    create_topic(dev_broker, "late")
    set_rules(dev_broker, ("kbroker.fault.late", "api=Produce delay.ms=200 count=1"),
              ("kbroker.fault.throttle", "api=Metadata throttle.ms=100 count=1"))
    assert produce(dev_broker, "late", 2) == [None, None]
    assert len(fault_lines(dev_broker, "late")) == 1


def test_deleting_a_rule_stops_it(dev_broker):
    create_topic(dev_broker, "gone")
    set_rules(dev_broker, ("kbroker.fault.gone", "api=Produce error=NOT_LEADER_OR_FOLLOWER"))
    set_rules(dev_broker, ("kbroker.fault.gone", None), op=AlterConfigOpType.DELETE)
    assert produce(dev_broker, "gone", 1) == [None]
    assert fault_lines(dev_broker, "gone", 0) == []


def test_unknown_api_error_and_field_are_refused_with_the_closest_name(dev_broker):
    error = refusal(dev_broker, ("kbroker.fault.x", "api=Produse error=NOT_LEADER_OR_FOLLOWER"))
    assert error.code() == Errors.INVALID_REQUEST.code
    assert "unknown API 'Produse' (did you mean 'Produce'?)" in error.str()
    error = refusal(dev_broker, ("kbroker.fault.x", "api=Produce error=NOT_LEADER"))
    assert "unknown error 'NOT_LEADER' (did you mean 'NOT_LEADER_OR_FOLLOWER'?)" in error.str()
    error = refusal(dev_broker, ("kbroker.fault.x", "api=Fetch clos"))
    assert "unknown field 'clos' (did you mean 'close'?)" in error.str()
    error = refusal(dev_broker, ("kbroker.fault.x", "api=Produce"))
    assert "a rule needs an effect" in error.str()


def test_refused_outside_dev_mode(broker):
    error = refusal(broker, ("kbroker.fault.x", "api=Produce error=NOT_LEADER_OR_FOLLOWER"))
    assert error.code() == Errors.INVALID_REQUEST.code
    assert "fault injection works only on a broker in dev mode" in error.str()


def test_wire_level_effects_throttle_error_and_close(dev_broker):
    """The answers themselves, read off the wire: throttle_time_ms carried, an error in a
    top-level error code, and a closed connection."""
    from kbroker.protocol.messages.find_coordinator import FindCoordinatorRequest
    from kbroker.protocol.messages.metadata import MetadataRequest
    from tests.integration.clients import Wire

    set_rules(dev_broker, ("kbroker.fault.a", "api=Metadata throttle.ms=150 client.id=wire"),
              ("kbroker.fault.b", "api=FindCoordinator error=COORDINATOR_NOT_AVAILABLE count=1"),
              ("kbroker.fault.c", "api=Heartbeat close"))
    with Wire(dev_broker.bootstrap, client_id="wire") as wire:
        wire.send(3, 12, MetadataRequest(topics=None))
        assert wire.receive(3, 12)[1].throttle_time_ms == 150
        wire.send(10, 3, FindCoordinatorRequest(key="g", key_type=0))
        assert wire.receive(10, 3)[1].error_code == Errors.COORDINATOR_NOT_AVAILABLE.code
        wire.send(10, 3, FindCoordinatorRequest(key="g", key_type=0))  # the one hit is spent
        assert wire.receive(10, 3)[1].error_code == Errors.NONE.code
    with Wire(dev_broker.bootstrap, client_id="other") as wire:  # client.id narrows the rule
        wire.send(3, 12, MetadataRequest(topics=None))
        assert wire.receive(3, 12)[1].throttle_time_ms == 0
        from kbroker.protocol.messages.heartbeat import HeartbeatRequest
        wire.send(12, 4, HeartbeatRequest(group_id="g", generation_id=1, member_id="m"))
        assert wire.closed_by_broker()


def test_java_producer_retries_through_not_leader(dev_broker):
    """Apache Kafka's Java producer (idempotent, acks=all) through two NOT_LEADER_OR_FOLLOWER."""
    import json
    import subprocess
    from pathlib import Path

    jar = Path(__file__).resolve().parents[2] / "compat_tests/java/target/kbroker-java-driver.jar"
    if not jar.exists():
        pytest.fail(f"{jar} is missing: run scripts/install-test-deps.sh")
    create_topic(dev_broker, "java")
    set_rules(dev_broker, ("kbroker.fault.java", "api=Produce error=NOT_LEADER_OR_FOLLOWER count=2"))
    proc = subprocess.run(["java", "-jar", str(jar), "produce", "--bootstrap", dev_broker.bootstrap,
                           "--topic", "java", "--count", "5", "--acks", "all"],
                          capture_output=True, timeout=120)
    events = [json.loads(line) for line in proc.stdout.decode().splitlines() if line.startswith("{")]
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert events[-1] == {"event": "done", "produced": 5, "requested": 5}
    assert len(fault_lines(dev_broker, "java", 2)) == 2
