"""DescribeTopicPartitions v0 (KIP-966, issue 36 part 4) side by side with Apache Kafka 4.4.0 (the
run's shared reference broker): named topics with missing and illegal names, pagination through
the cursor at several partition limits (inside a topic and between topics), the cursor's
validation, and listing every topic; then Kafka's own ``kafka-topics.sh --describe`` (the Java
Admin client, which uses this API when a broker advertises it) paging at 2 partitions per answer.
ACL filtering is checked on kbroker with an authorizer in tests/security/test_acls.py
(``test_describe_topic_partitions_filters_by_describe``).
"""

from __future__ import annotations

import subprocess
import uuid

import pytest

from kbroker.protocol import messages
from tests.broker_process import BrokerProcess
from tests.integration.clients import Wire, ensure_topic
from tests.integration.test_kafka_reference import side_by_side
from tests.shared_kafka import run_kafka_tool

DESCRIBE_TOPIC_PARTITIONS = 75
SETTINGS = {"num.partitions": "1"}
SIZES = {"a": 3, "b": 5, "c": 1}


@pytest.fixture(scope="module")
def brokers(tmp_path_factory, reference_kafka):
    kafka = reference_kafka.get(SETTINGS)
    kbroker = BrokerProcess(tmp_path_factory.mktemp("dtp") / "data", SETTINGS)
    try:
        kbroker.start()
        yield {"kafka": kafka.bootstrap, "kbroker": kbroker.bootstrap}
    finally:
        kbroker.kill()


@pytest.fixture(scope="module")
def topics(brokers):
    """Three topics of the module (unique names: the reference broker is shared)."""
    prefix = f"dtp-{uuid.uuid4().hex[:6]}"
    names = {key: f"{prefix}-{key}" for key in SIZES}
    for bootstrap in brokers.values():
        for key, name in names.items():
            ensure_topic(bootstrap, name, SIZES[key])
    return names


def describe(bootstrap, names, limit=2000, cursor=None):
    cls = messages.request_class(DESCRIBE_TOPIC_PARTITIONS)
    request = cls(topics=[cls.TopicRequest(name=n) for n in names],
                  response_partition_limit=limit,
                  cursor=None if cursor is None else cls.Cursor(topic_name=cursor[0],
                                                                partition_index=cursor[1]))
    with Wire(bootstrap) as wire:
        return wire.call(DESCRIBE_TOPIC_PARTITIONS, 0, request)


def trace(response, own: set | None = None):
    """What must match: per topic (error, name, has an id, internal, partitions as (index,
    leader, epoch, replicas, ISR, ELRs, offline)), the authorized operations field, and the
    cursor. Leaders are this single broker on both (node 1)."""
    topics = [(t.error_code, t.name, t.topic_id.int != 0, t.is_internal,
               [(p.error_code, p.partition_index, p.leader_id, p.leader_epoch,
                 list(p.replica_nodes), list(p.isr_nodes), p.eligible_leader_replicas,
                 p.last_known_elr, list(p.offline_replicas)) for p in t.partitions],
               t.topic_authorized_operations)
              for t in response.topics if own is None or t.name in own]
    cursor = None if response.next_cursor is None else (response.next_cursor.topic_name,
                                                        response.next_cursor.partition_index)
    return topics, cursor


def named_pages(bootstrap, names, limit):
    """Every page of a named describe, following the cursor."""
    pages, cursor = [], None
    for _ in range(20):
        topics, cursor = trace(describe(bootstrap, names, limit, cursor))
        pages.append((topics, cursor))
        if cursor is None:
            return pages
    raise AssertionError(f"no last page: {pages}")


@pytest.mark.parametrize("limit", [1, 2, 3, 4, 9, 2000])
def test_named_topics_page_through_the_cursor(brokers, topics, limit):
    names = [topics["b"], topics["a"], f"{topics['a']}-missing", topics["c"], "bad name!"]
    pages = side_by_side(brokers, named_pages, names, limit)
    described = [p for topics_, _ in pages for t in topics_ if t[0] == 0 for p in t[4]]
    assert len(described) == sum(SIZES.values())  # every partition once


def test_a_cursor_is_validated(brokers, topics):
    names = [topics["a"], topics["b"]]
    # The cursor's topic must be one of those named; its partition index not negative.
    assert side_by_side(brokers, lambda b: trace(describe(b, names, 10, (topics["c"], 0)))) == (
        [(42, topics["a"], False, False, [], -(2**31)),
         (42, topics["b"], False, False, [], -(2**31))], None)
    assert side_by_side(brokers, lambda b: trace(describe(b, names, 10, (topics["b"], -1))))[0][0][0] \
        == 42
    # A cursor past a topic's last partition describes none of it and goes on.
    side_by_side(brokers, lambda b: trace(describe(b, names, 10, (topics["a"], 7))))


def test_every_topic_is_listed_in_name_order(brokers, topics):
    """No names: every topic (the shared reference broker has others too; only the module's
    are compared), sorted, from the cursor on."""
    own = set(topics.values())
    first = side_by_side(brokers, lambda b: trace(describe(b, [], 2000, (topics["a"], 1)), own))
    assert [t[1] for t in first[0]] == [topics["a"], topics["b"], topics["c"]]
    assert [p[1] for p in first[0][0][4]] == [1, 2]


def test_kafka_topics_describe_pages(brokers, topics):
    """Kafka 4.4.0's kafka-topics.sh --describe, two partitions per answer."""
    run_kafka = run_kafka_tool()

    def tool(bootstrap):
        cmd = run_kafka.java_cmd("org.apache.kafka.tools.TopicCommand",
                                 ["--bootstrap-server", bootstrap, "--describe", "--topic",
                                  topics["b"], "--partition-size-limit-per-response", "2"],
                                 run_kafka.DEFAULT_VERSION, None, heap="256M")
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        return sorted(line.split("\t")[2].strip() for line in done.stdout.splitlines()
                      if "\tPartition:" in line)

    assert side_by_side(brokers, tool) == [f"Partition: {i}" for i in range(5)]
