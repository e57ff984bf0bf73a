"""Admin APIs against a real broker, with real clients: confluent-kafka's AdminClient (librdkafka),
kafka-python's KafkaAdminClient, and one smoke test with the Java driver (kafka-clients).

Covers CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs, DeleteRecords, DescribeCluster and DescribeLogDirs, and their error paths.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   ConfigSource, NewPartitions, NewTopic, ResourceType)

from kbroker.protocol.errors import Errors
from tests.broker_process import BrokerProcess

TIMEOUT = 15
# AdminClient.alter_configs (AlterConfigs) is deprecated in confluent-kafka; we still serve it.
pytestmark = pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
JAVA_DRIVER = Path(__file__).resolve().parents[2] / "compat_tests/java/target/kbroker-java-driver.jar"


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    """One broker for the tests that do not need special broker settings."""
    process = BrokerProcess(tmp_path_factory.mktemp("admin") / "data",
                            {"num.partitions": 2, "log.retention.ms": 360000000})
    process.start()
    yield process
    process.kill()


@pytest.fixture
def admin(shared_broker):
    return AdminClient({"bootstrap.servers": shared_broker.bootstrap})


@pytest.fixture
def kp_admin(shared_broker):
    from kafka.admin import KafkaAdminClient
    client = KafkaAdminClient(bootstrap_servers=shared_broker.bootstrap, request_timeout_ms=10000)
    yield client
    client.close()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def kafka_error(future):
    """The KafkaError a future failed with."""
    with pytest.raises(KafkaException) as info:
        future.result(TIMEOUT)
    return info.value.args[0]


def only_error(futures):
    """The KafkaError of a one-future result dict (the dict must stay referenced while waiting:
    confluent-kafka's parent future is dropped with it and the child never completes)."""
    (future,) = futures.values()
    return kafka_error(future)


def create(admin, name, partitions=1, config=None, **kw):
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})],
                                  operation_timeout=TIMEOUT, **kw)
    futures[name].result(TIMEOUT)


def topic_names(admin) -> set:
    return set(admin.list_topics(timeout=TIMEOUT).topics)


def partition_count(admin, name) -> int:
    return len(admin.list_topics(name, timeout=TIMEOUT).topics[name].partitions)


def describe_topic(admin, name) -> dict:
    resource = ConfigResource(ResourceType.TOPIC, name)
    return admin.describe_configs([resource], request_timeout=TIMEOUT)[resource].result(TIMEOUT)


# --- CreateTopics / DeleteTopics ---------------------------------------------------------------

def test_create_describe_delete_topic(admin):
    name = unique("crud")
    create(admin, name, 3, {"retention.ms": "3600000", "cleanup.policy": "compact"})
    assert name in topic_names(admin)
    assert partition_count(admin, name) == 3
    configs = describe_topic(admin, name)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["cleanup.policy"].value == "compact"
    admin.delete_topics([name], operation_timeout=TIMEOUT)[name].result(TIMEOUT)
    assert name not in topic_names(admin)
    # The name is free again, with a fresh configuration.
    create(admin, name, 1)
    assert describe_topic(admin, name)["cleanup.policy"].value == "delete"


def test_create_topic_defaults_come_from_the_broker(admin):
    name = unique("defaults")
    futures = admin.create_topics([NewTopic(name)], operation_timeout=TIMEOUT)
    futures[name].result(TIMEOUT)
    assert partition_count(admin, name) == 2  # num.partitions=2 on this broker


def test_validate_only_creates_nothing(admin):
    name = unique("validate")
    futures = admin.create_topics([NewTopic(name, 4, 1)], validate_only=True,
                                  operation_timeout=TIMEOUT)
    futures[name].result(TIMEOUT)
    assert name not in topic_names(admin)
    bad = admin.create_topics([NewTopic(name, 4, 1, config={"retention.ms": "soon"})],
                              validate_only=True, operation_timeout=TIMEOUT)
    assert kafka_error(bad[name]).code() == Errors.INVALID_CONFIG


def test_create_topic_errors(admin):
    existing = unique("exists")
    create(admin, existing)
    cases = {
        existing: (NewTopic(existing, 1, 1), "TOPIC_ALREADY_EXISTS"),
        "bad name!": (NewTopic("bad name!", 1, 1), "INVALID_TOPIC_EXCEPTION"),
        "..": (NewTopic("..", 1, 1), "INVALID_TOPIC_EXCEPTION"),
        "x" * 250: (NewTopic("x" * 250, 1, 1), "INVALID_TOPIC_EXCEPTION"),
        "rf3": (NewTopic(unique("rf3"), 1, 3), "INVALID_REPLICATION_FACTOR"),
        "zero-partitions": (NewTopic(unique("p0"), 0, 1), "INVALID_PARTITIONS"),
        "bad-config": (NewTopic(unique("cfg"), 1, 1, config={"retention.ms": "soon"}),
                       "INVALID_CONFIG"),
        "unknown-config": (NewTopic(unique("cfg"), 1, 1, config={"no.such.config": "1"}),
                           "INVALID_CONFIG"),
        "other-broker": (NewTopic(unique("assign"), 1, replica_assignment=[[7]]),
                         "INVALID_REPLICA_ASSIGNMENT"),
    }
    for label, (topic, expected) in cases.items():
        error = kafka_error(admin.create_topics([topic], operation_timeout=TIMEOUT)[topic.topic])
        assert error.code() == Errors[expected], (label, error)
    rf = only_error(admin.create_topics([NewTopic(unique("rf"), 1, 2)]))
    assert "replication factor of 2 cannot be reached because only 1 broker(s)" in rf.str()
    config = only_error(admin.create_topics(
        [NewTopic(unique("cfg"), 1, 1, config={"segment.ms": "-5"})]))
    assert "segment.ms" in config.str()


def test_manual_assignment_to_this_broker(admin):
    name = unique("manual")
    futures = admin.create_topics([NewTopic(name, 3, replica_assignment=[[1], [1], [1]])],
                                  operation_timeout=TIMEOUT)
    futures[name].result(TIMEOUT)
    assert partition_count(admin, name) == 3


def test_delete_topic_errors(admin):
    error = kafka_error(admin.delete_topics(["no-such-topic"],
                                            operation_timeout=TIMEOUT)["no-such-topic"])
    assert error.code() == Errors.UNKNOWN_TOPIC_OR_PARTITION


def test_delete_topic_disabled(broker_factory):
    broker = broker_factory({"delete.topic.enable": "false"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    create(admin, "kept")
    error = kafka_error(admin.delete_topics(["kept"], operation_timeout=TIMEOUT)["kept"])
    assert error.code() == Errors.TOPIC_DELETION_DISABLED
    assert "kept" in topic_names(admin)


def test_deleted_topic_stays_deleted_after_restart(broker_factory):
    broker = broker_factory()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    create(admin, "gone", 2)
    create(admin, "stays", 1)
    admin.delete_topics(["gone"], operation_timeout=TIMEOUT)["gone"].result(TIMEOUT)
    assert not list(broker.data_dir.glob("gone-*"))
    broker.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    names = topic_names(admin)
    assert "stays" in names and "gone" not in names


# --- CreatePartitions --------------------------------------------------------------------------

def test_create_partitions(admin):
    name = unique("grow")
    create(admin, name, 1)
    admin.create_partitions([NewPartitions(name, 3)], validate_only=True)[name].result(TIMEOUT)
    assert partition_count(admin, name) == 1
    admin.create_partitions([NewPartitions(name, 3)])[name].result(TIMEOUT)
    assert partition_count(admin, name) == 3
    same = kafka_error(admin.create_partitions([NewPartitions(name, 3)])[name])
    assert same.code() == Errors.INVALID_PARTITIONS
    assert "already has 3 partition(s)" in same.str()
    fewer = kafka_error(admin.create_partitions([NewPartitions(name, 2)])[name])
    assert fewer.code() == Errors.INVALID_PARTITIONS
    assert "currently has 3 partitions, which is higher than the requested 2" in fewer.str()
    unknown = kafka_error(admin.create_partitions([NewPartitions("no-such-topic", 2)])
                          ["no-such-topic"])
    assert unknown.code() == Errors.UNKNOWN_TOPIC_OR_PARTITION
    # New partitions take writes.
    producer = Producer({"bootstrap.servers": admin_bootstrap(admin)})
    producer.produce(name, b"v", partition=2)
    assert producer.flush(TIMEOUT) == 0


def admin_bootstrap(admin) -> str:
    broker = next(iter(admin.list_topics(timeout=TIMEOUT).brokers.values()))
    return f"{broker.host}:{broker.port}"


# --- DescribeConfigs / AlterConfigs / IncrementalAlterConfigs ----------------------------------

def test_describe_configs_sources_and_synonyms(admin):
    name = unique("describe")
    create(admin, name, 1, {"segment.bytes": "1048576"})
    configs = describe_topic(admin, name)
    segment = configs["segment.bytes"]
    assert segment.value == "1048576"
    assert segment.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert [s.name for s in segment.synonyms.values()][0] == "segment.bytes"
    # retention.ms comes from the broker's log.retention.ms.
    retention = configs["retention.ms"]
    assert retention.value == "360000000"
    assert retention.source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert "log.retention.ms" in retention.synonyms
    assert configs["compression.type"].source == ConfigSource.DEFAULT_CONFIG.value
    assert not configs["compression.type"].is_read_only

    broker_resource = ConfigResource(ResourceType.BROKER, "1")
    broker_configs = admin.describe_configs([broker_resource])[broker_resource].result(TIMEOUT)
    assert broker_configs["num.partitions"].value == "2"
    assert broker_configs["num.partitions"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert broker_configs["log.retention.ms"].value == "360000000"

    unknown = ConfigResource(ResourceType.TOPIC, "no-such-topic")
    error = kafka_error(admin.describe_configs([unknown])[unknown])
    assert error.code() == Errors.UNKNOWN_TOPIC_OR_PARTITION


def test_alter_configs_replaces_all_overrides(admin):
    name = unique("alter")
    create(admin, name, 1, {"retention.ms": "1000000", "segment.ms": "2000000"})
    resource = ConfigResource(ResourceType.TOPIC, name, set_config={"retention.ms": "5000000"})
    admin.alter_configs([resource])[resource].result(TIMEOUT)
    configs = describe_topic(admin, name)
    assert configs["retention.ms"].value == "5000000"
    assert configs["segment.ms"].source == ConfigSource.DEFAULT_CONFIG.value  # reset

    bad = ConfigResource(ResourceType.TOPIC, name, set_config={"max.message.bytes": "many"})
    error = kafka_error(admin.alter_configs([bad])[bad])
    assert error.code() == Errors.INVALID_CONFIG and "max.message.bytes" in error.str()
    validate = ConfigResource(ResourceType.TOPIC, name, set_config={"retention.ms": "7"})
    admin.alter_configs([validate], validate_only=True)[validate].result(TIMEOUT)
    assert describe_topic(admin, name)["retention.ms"].value == "5000000"


def test_incremental_alter_configs(admin):
    name = unique("incremental")
    create(admin, name, 1, {"retention.ms": "1000000"})

    def alter(*entries, validate_only=False):
        resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=list(entries))
        return admin.incremental_alter_configs([resource],
                                               validate_only=validate_only)[resource]

    alter(ConfigEntry("segment.ms", "3600000", incremental_operation=AlterConfigOpType.SET),
          ConfigEntry("cleanup.policy", "compact",
                      incremental_operation=AlterConfigOpType.APPEND)).result(TIMEOUT)
    configs = describe_topic(admin, name)
    assert configs["retention.ms"].value == "1000000"  # untouched
    assert configs["segment.ms"].value == "3600000"
    assert configs["cleanup.policy"].value == "delete,compact"
    alter(ConfigEntry("cleanup.policy", "delete",
                      incremental_operation=AlterConfigOpType.SUBTRACT),
          ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)
          ).result(TIMEOUT)
    configs = describe_topic(admin, name)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["retention.ms"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    not_list = kafka_error(alter(ConfigEntry("segment.ms", "1",
                                             incremental_operation=AlterConfigOpType.APPEND)))
    assert not_list.code() == Errors.INVALID_CONFIG
    assert "Can't APPEND to key segment.ms because its type is not LIST." in not_list.str()
    invalid = kafka_error(alter(ConfigEntry("retention.ms", "forever",
                                            incremental_operation=AlterConfigOpType.SET)))
    assert invalid.code() == Errors.INVALID_CONFIG and "retention.ms" in invalid.str()
    alter(ConfigEntry("segment.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
          validate_only=True).result(TIMEOUT)
    assert describe_topic(admin, name)["segment.ms"].value == "3600000"
    unknown = ConfigResource(ResourceType.TOPIC, "no-such-topic", incremental_configs=[
        ConfigEntry("segment.ms", "1", incremental_operation=AlterConfigOpType.SET)])
    error = kafka_error(admin.incremental_alter_configs([unknown])[unknown])
    assert error.code() == Errors.UNKNOWN_TOPIC_OR_PARTITION


def test_dynamic_broker_config(broker_factory):
    broker = broker_factory()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("log.retention.ms", "123456789", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)
    create(admin, "follows-broker")
    retention = describe_topic(admin, "follows-broker")["retention.ms"]
    assert retention.value == "123456789"
    assert retention.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    read_only = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("log.dirs", "/tmp/elsewhere", incremental_operation=AlterConfigOpType.SET)])
    error = kafka_error(admin.incremental_alter_configs([read_only])[read_only])
    assert error.code() == Errors.INVALID_REQUEST
    # Dynamic configs outlive the process, as in Kafka.
    broker.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    retention = describe_topic(admin, "follows-broker")["retention.ms"]
    assert retention.value == "123456789"
    assert retention.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value


# --- DeleteRecords -----------------------------------------------------------------------------

def test_delete_records(admin, shared_broker):
    name = unique("records")
    create(admin, name, 1)
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap, "linger.ms": 0})
    for i in range(10):
        producer.produce(name, f"v{i}".encode(), partition=0)
        producer.flush(TIMEOUT)
    deleted = admin.delete_records([TopicPartition(name, 0, 4)])
    result = next(iter(deleted.values())).result(TIMEOUT)
    assert result.low_watermark == 4
    low, high = _watermarks(shared_broker, name)
    assert (low, high) == (4, 10)
    too_far = admin.delete_records([TopicPartition(name, 0, 11)])
    assert kafka_error(next(iter(too_far.values()))).code() == Errors.OFFSET_OUT_OF_RANGE
    everything = admin.delete_records([TopicPartition(name, 0, -1)])
    assert next(iter(everything.values())).result(TIMEOUT).low_watermark == 10
    assert _watermarks(shared_broker, name) == (10, 10)


def _watermarks(broker, topic):
    from confluent_kafka import Consumer
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "watermarks"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT)
    finally:
        consumer.close()


# --- DescribeCluster / DescribeLogDirs ---------------------------------------------------------

def test_describe_cluster(admin, shared_broker):
    cluster = admin.describe_cluster(request_timeout=TIMEOUT).result(TIMEOUT)
    assert [node.id for node in cluster.nodes] == [1]
    assert cluster.controller.id == 1
    assert cluster.nodes[0].port == shared_broker.port
    stored = json.loads((shared_broker.data_dir / "kbroker-metadata.json").read_text())
    assert cluster.cluster_id == stored["cluster_id"]


def test_describe_log_dirs(admin, kp_admin, shared_broker):
    name = unique("logdirs")
    create(admin, name, 2)
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap})
    producer.produce(name, b"x" * 1000, partition=1)
    producer.flush(TIMEOUT)
    answers = kp_admin.describe_log_dirs()
    text = json.dumps(answers, default=str)
    assert os.path.abspath(shared_broker.data_dir) in text
    assert name in text


# --- kafka-python ------------------------------------------------------------------------------

def test_kafka_python_admin(kp_admin):
    from kafka.admin import ConfigResource as KpResource, ConfigResourceType, NewTopic as KpTopic
    from kafka.errors import InvalidPartitionsError, TopicAlreadyExistsError

    name = unique("kp")
    kp_admin.create_topics([KpTopic(name, 2, 1, topic_configs={"retention.ms": "1234567"})])
    with pytest.raises(TopicAlreadyExistsError):
        kp_admin.create_topics([KpTopic(name, 2, 1)])
    with pytest.raises(InvalidPartitionsError):
        kp_admin.create_topics([KpTopic(unique("kp0"), 0, 1)])
    described = kp_admin.describe_configs([KpResource(ConfigResourceType.TOPIC, name)],
                                          include_synonyms=True)
    assert "1234567" in json.dumps(described, default=str)
    kp_admin.delete_topics([name])
    assert name not in kp_admin.list_topics()


# --- Java (kafka-clients) ----------------------------------------------------------------------

def test_java_admin_smoke(shared_broker):
    # Installed by the test command: missing is a broken install, not a reason to skip.
    assert JAVA_DRIVER.exists(), "build the Java driver: scripts/install-test-deps.sh"
    def driver(*args):
        out = subprocess.run(["java", "-jar", str(JAVA_DRIVER), "admin", "--bootstrap",
                              shared_broker.bootstrap, *args], capture_output=True, text=True,
                             timeout=60)
        events = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
        assert out.returncode == 0, (out.stdout, out.stderr)
        return events

    name = unique("java")
    driver("create-topic", "--topic", name, "--partitions", "3", "--config", "retention.ms=777777")
    [described] = [e for e in driver("describe-topic", "--topic", name) if e["event"] == "topic"]
    assert [p["replicas"] for p in described["partitions"]] == [[1], [1], [1]]
    driver("delete-topic", "--topic", name)
    [listed] = [e for e in driver("list-topics") if e["event"] == "topics"]
    assert name not in listed["topics"]


def test_metadata_entries_follow_the_topic_at_every_version(admin, shared_broker):
    # A single node's topic entries are encoded once and reused (100,000 partitions took over a
    # second a request): each version gets its own bytes, and a new partition shows at once.
    from tests.integration.clients import Wire

    name = unique("meta")
    admin.create_topics([NewTopic(name, 2, 1)])[name].result(TIMEOUT)

    def listed(wire, version):
        response = wire.metadata([name], version=version)
        (topic,) = response.topics
        node = response.brokers[0].node_id
        assert topic.error_code == 0 and topic.name == name
        assert all(p.leader_id == node and p.replica_nodes == [node] and p.isr_nodes == [node]
                   and p.error_code == 0 and (version < 7 or p.leader_epoch >= 0)
                   for p in topic.partitions)
        return sorted(p.partition_index for p in topic.partitions)

    with Wire(shared_broker.bootstrap) as wire:
        wire.api_versions()
        for version in (12, 9, 4, 12, 9):
            assert listed(wire, version) == [0, 1]
        admin.create_partitions([NewPartitions(name, 5)])[name].result(TIMEOUT)
        for version in (12, 9, 4):
            assert listed(wire, version) == [0, 1, 2, 3, 4]
