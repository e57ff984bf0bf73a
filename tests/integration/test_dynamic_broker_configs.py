"""Dynamic broker configs (AlterConfigs / IncrementalAlterConfigs on a BROKER resource) and the
config keys refused at start-up, with real clients over real sockets: confluent-kafka's
AdminClient and Producer (librdkafka) and kafka-python's KafkaAdminClient."""

from __future__ import annotations

import subprocess
import sys

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   ConfigSource, NewTopic, ResourceType)

from kbroker.protocol.errors import Errors

TIMEOUT = 15


def incremental(admin, name, *entries):
    resource = ConfigResource(ResourceType.BROKER, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET) for key, value in entries])
    futures = admin.incremental_alter_configs([resource])
    return futures[resource]


def error_of(future):
    with pytest.raises(KafkaException) as info:
        future.result(TIMEOUT)
    return info.value.args[0]


def kp_alter(broker, name, configs):
    """kafka-python's AlterConfigs: the result it reports for the one resource."""
    from kafka.admin import ConfigResource as KpResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        response = client.alter_configs([KpResource(ConfigResourceType.BROKER, name, configs=configs)])
    finally:
        client.close()
    (by_name,) = response.values()
    return by_name[name]


def describe_broker(admin, name="1"):
    resource = ConfigResource(ResourceType.BROKER, name)
    return admin.describe_configs([resource], request_timeout=TIMEOUT)[resource].result(TIMEOUT)


def test_read_only_and_per_broker_keys_get_kafkas_errors(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    error = error_of(incremental(admin, "1", ("log.dirs", "/elsewhere"), ("num.partitions", "4")))
    assert error.code() == Errors.INVALID_REQUEST.code
    assert error.str() == "Cannot update these configs dynamically: Set(log.dirs, num.partitions)"
    error = error_of(incremental(admin, "1", ("num.io.threads", "64")))
    assert "value should not be greater than double the current value 8" in error.str()


def test_kafka_python_alter_configs_accepts_a_thread_count(broker):
    # AlterConfigs (key 33), which issue 11 found refusing log.cleaner.threads
    result = kp_alter(broker, "1", {"log.cleaner.threads": "2"})
    assert getattr(result, "errno", 0) == 0, result
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    threads = describe_broker(admin)["log.cleaner.threads"]
    assert threads.value == "2" and threads.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value


def test_dynamic_message_max_bytes_reaches_the_log(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("capped", 1, 1)])["capped"].result(TIMEOUT)
    incremental(admin, "1", ("message.max.bytes", "2000")).result(TIMEOUT)
    assert describe_broker(admin)["message.max.bytes"].source == \
        ConfigSource.DYNAMIC_BROKER_CONFIG.value
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0,
                         "compression.type": "none"})
    results = []
    for value in (b"x" * 5000, b"small"):  # one batch each
        producer.produce("capped", value, on_delivery=lambda err, msg: results.append(err))
        producer.flush(TIMEOUT)
    assert results[0] is not None and results[0].code() == Errors.MESSAGE_TOO_LARGE.code
    assert results[1] is None


def test_dynamic_compression_type_reaches_topics_without_their_own(broker):
    """compression.type and its levels are cluster-wide dynamic keys (KIP-390): a topic without
    its own value recompresses new batches at once; one with its own keeps it."""
    from tests.integration.clients import Wire

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([
            NewTopic("follows-broker", 1, 1),
            NewTopic("own-type", 1, 1, config={"compression.type": "gzip"})]).values():
        future.result(TIMEOUT)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0,
                         "compression.type": "none"})

    def codecs_after_producing(topic):
        producer.produce(topic, b"v" * 100)
        producer.flush(TIMEOUT)
        with Wire(broker.bootstrap) as wire:
            return [b.codec for b in wire.fetch(topic, 0, 0)[1]]

    assert codecs_after_producing("follows-broker")[-1] == 0
    incremental(admin, "1", ("compression.type", "zstd"),
                ("compression.zstd.level", "7")).result(TIMEOUT)
    assert describe_broker(admin)["compression.type"].value == "zstd"
    assert codecs_after_producing("follows-broker")[-2:] == [0, 4]  # earlier batches stay
    assert codecs_after_producing("own-type")[-1] == 1


def test_min_insync_replicas_refuses_acks_all_on_a_single_node(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("needs-two", 1, 1, config={"min.insync.replicas": "2"})])[
        "needs-two"].result(TIMEOUT)
    results = []
    for acks in ("all", "1"):
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": acks,
                             "enable.idempotence": False, "message.send.max.retries": 0})
        producer.produce("needs-two", b"v", on_delivery=lambda err, msg: results.append(err))
        producer.flush(TIMEOUT)
    assert results[0] is not None and results[0].code() == Errors.NOT_ENOUGH_REPLICAS.code
    assert results[1] is None


def test_topic_values_kbroker_cannot_honour_are_invalid_config(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([NewTopic("tiered", 1, 1, config={"remote.storage.enable": "true"})])
    with pytest.raises(KafkaException) as info:
        futures["tiered"].result(TIMEOUT)
    error = info.value.args[0]
    assert error.code() == Errors.INVALID_CONFIG.code
    assert "remote.storage.enable" in error.str() and "Tiered Storage" in error.str()


@pytest.mark.parametrize("setting, feature", [
    ("sasl.enabled.mechanisms=GSSAPI,PLAIN,SCRAM-SHA-1", "mechanism SCRAM-SHA-1 (kbroker serves"),
    ("listener.name.plaintext.ssl.engine.factory.class=x", "per-listener setting"),
    ("authorizer.class.name=com.example.MyAuthorizer", "Java plugin classes"),
])
def test_unimplemented_features_stop_start_up_with_one_line(tmp_path, setting, feature):
    args = [sys.executable, "-m", "kbroker.cli.main", "serve", "--set", f"log.dirs={tmp_path}",
            "--set", setting]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    key = setting.partition("=")[0]
    (line,) = done.stderr.strip().splitlines()
    assert key in line and feature in line and "not implemented" in line
