"""kbroker against Apache Kafka 4.4.0 side by side, on what the move to 4.4.0's schemas changed.

The session's reference Kafka 4.4.0 (``tools/kafka_ref``, the version our schemas are pinned to;
shared by the modules that compare, tests/shared_kafka.py) and one kbroker run for the module. Each scenario runs on both, with raw requests of our generated codecs,
and the two traces must be equal:
- ApiVersions: for every API kbroker serves, the range Kafka 4.4.0 advertises; and Kafka's answer
  is the table pinned in tests/protocol/test_advertised_versions.py;
- ApiVersions v5 (KIP-1242): the cluster id and node id a client expects, matching, wrong or
  given alone;
- DeleteGroups v3 (KIP-1331): its per-group error message;
- TxnOffsetCommit v5 and v6 (KIP-1319): topics by id, UNKNOWN_TOPIC_ID, GROUP_ID_NOT_FOUND for a
  missing group, an unknown partition, commits without a member or during a rebalance.
"""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from kbroker.coordinator.group import records as group_records
from kbroker.protocol import messages
from kbroker.protocol.primitives import ZERO_UUID
from tests.broker_process import BrokerProcess
from tests.integration.clients import Wire, ensure_topic, wait_until
from tests.protocol.test_advertised_versions import KAFKA_4_4_0, KAFKA_4_4_0_WITH_TELEMETRY


SETTINGS = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "1",
            "num.partitions": "1"}
METADATA, OFFSET_COMMIT, FIND_COORDINATOR, JOIN_GROUP, API_VERSIONS = 3, 8, 10, 11, 18
INIT_PRODUCER_ID, END_TXN, TXN_OFFSET_COMMIT, DESCRIBE_CLUSTER, DELETE_GROUPS = 22, 26, 28, 60, 42


@pytest.fixture(scope="module")
def brokers(tmp_path_factory, reference_kafka):
    """{"kafka": bootstrap, "kbroker": bootstrap}, side by side (Kafka: the session's)."""
    kafka = reference_kafka.get(SETTINGS)
    assert kafka.version == "4.4.0"
    kbroker = BrokerProcess(tmp_path_factory.mktemp("kbroker") / "data", SETTINGS)
    try:
        kbroker.start()
        yield {"kafka": kafka.bootstrap, "kbroker": kbroker.bootstrap}
    finally:
        kbroker.kill()


def side_by_side(brokers, scenario, *args):
    """Run ``scenario(bootstrap, *args)`` on both brokers at once; their traces must be equal."""
    with ThreadPoolExecutor(2) as pool:
        futures = {name: pool.submit(scenario, bootstrap, *args)
                   for name, bootstrap in brokers.items()}
        traces = {name: future.result() for name, future in futures.items()}
    assert traces["kbroker"] == traces["kafka"], \
        "\n".join(f"{name:8} {trace}" for name, trace in traces.items())
    return traces["kafka"]


def call(bootstrap, api_key, version, request):
    with Wire(bootstrap, timeout=30) as wire:
        return wire.call(api_key, version, request)


def request(api_key, **fields):
    return messages.request_class(api_key)(**fields)


def api_versions(bootstrap, version=3, **fields):
    return call(bootstrap, API_VERSIONS, version, request(
        API_VERSIONS, client_software_name="kbroker-tests", client_software_version="1",
        **fields))


LOADING = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR


def find_coordinator(bootstrap, key, key_type):
    """Kafka creates its internal topics on the first FindCoordinator and answers
    COORDINATOR_NOT_AVAILABLE until they are loaded."""
    wait_until(lambda: call(bootstrap, FIND_COORDINATOR, 3, request(
        FIND_COORDINATOR, key=key, key_type=key_type)).error_code == 0, 60, 0.2,
        f"a coordinator for {key}")


# --- ApiVersions -------------------------------------------------------------------------------

def test_kafka_advertises_the_pinned_table(brokers):
    answer = api_versions(brokers["kafka"])
    assert answer.error_code == 0
    assert {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys} == KAFKA_4_4_0


def test_kbroker_advertises_kafkas_range_for_every_api_it_serves(brokers):
    ranges = {name: {k.api_key: (k.min_version, k.max_version)
                     for k in api_versions(bootstrap).api_keys}
              for name, bootstrap in brokers.items()}
    # The reference broker has no client telemetry exporter, so it leaves out GetTelemetry-
    # Subscriptions and PushTelemetry (KIP-714), which kbroker always serves: their range is
    # Kafka's with an exporter configured.
    kafka = {**ranges["kafka"], **{key: KAFKA_4_4_0_WITH_TELEMETRY[key] for key in (71, 72)}}
    assert ranges["kbroker"] == {key: kafka[key] for key in ranges["kbroker"]}


def expected_broker(bootstrap):
    described = call(bootstrap, DESCRIBE_CLUSTER, 0, request(DESCRIBE_CLUSTER))
    return described.cluster_id, described.brokers[0].broker_id


def api_versions_v5(bootstrap):
    cluster_id, node_id = expected_broker(bootstrap)
    cases = {
        "neither": {},
        "both ours": {"cluster_id": cluster_id, "node_id": node_id},
        "another cluster": {"cluster_id": "x" * 22, "node_id": node_id},
        "another node": {"cluster_id": cluster_id, "node_id": node_id + 5},
        "another node id -2": {"cluster_id": cluster_id, "node_id": -2},
        "empty cluster id": {"cluster_id": "", "node_id": node_id},
        "cluster id alone": {"cluster_id": cluster_id},
        "node id alone": {"node_id": node_id},
        "bad software name": {"client_software_name": "bad name!"},
    }
    trace = []
    for name, fields in cases.items():
        with Wire(bootstrap) as wire:
            answer = wire.call(API_VERSIONS, 5, request(
                API_VERSIONS, **{"client_software_name": "kbroker-tests",
                                 "client_software_version": "1", **fields}))
            # An error answer carries nothing else, and the connection stays usable.
            trace.append((name, answer.error_code, bool(answer.api_keys),
                          bool(answer.supported_features), answer.finalized_features_epoch >= 0,
                          wire.call(DESCRIBE_CLUSTER, 0, request(DESCRIBE_CLUSTER)).error_code))
    return trace


def test_api_versions_v5_checks_the_broker_the_client_expects(brokers):
    trace = side_by_side(brokers, api_versions_v5)
    errors = {name: error for name, error, *_ in trace}
    assert (errors["neither"], errors["both ours"], errors["another cluster"],
            errors["cluster id alone"]) == (0, 0, 129, 42)  # REBOOTSTRAP_REQUIRED, INVALID_REQUEST


# --- DeleteGroups v3 ---------------------------------------------------------------------------

def delete_groups(bootstrap, suffix):
    topic, busy, empty = f"dg-{suffix}", f"busy-{suffix}", f"empty-{suffix}"
    ensure_topic(bootstrap, topic)
    for group in (busy, empty):
        find_coordinator(bootstrap, group, 0)
    commit = messages.request_class(OFFSET_COMMIT)
    # A fresh Kafka answers COORDINATOR_LOAD_IN_PROGRESS for a moment after FindCoordinator
    # succeeded (its shard still loading): retried, as clients do; anything else fails here.
    committed = wait_until(lambda: (code := call(bootstrap, OFFSET_COMMIT, 8, commit(
        group_id=empty, topics=[commit.OffsetCommitRequestTopic(name=topic, partitions=[
            commit.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])])
    ).topics[0].partitions[0].error_code) not in LOADING and (code,), 30, 0.2,
        f"the coordinator of {empty} loaded")
    assert committed == (0,)
    join = messages.request_class(JOIN_GROUP)(
        group_id=busy, session_timeout_ms=30000, rebalance_timeout_ms=30000,
        protocol_type="consumer", protocols=[messages.request_class(JOIN_GROUP).
                                             JoinGroupRequestProtocol(name="range",
                                                                      metadata=b"\0" * 10)])
    first = wait_until(lambda: (r := call(bootstrap, JOIN_GROUP, 9, join)).error_code
                       not in LOADING and r, 30, 0.2, f"the coordinator of {busy} loaded")
    join.member_id = first.member_id
    assert call(bootstrap, JOIN_GROUP, 9, join).error_code == 0
    trace = []
    for version in (2, 3):
        answer = call(bootstrap, DELETE_GROUPS, version, request(
            DELETE_GROUPS, groups_names=[f"missing-{suffix}", busy, empty if version == 3 else ""]))
        trace.append(sorted((r.group_id.split("-")[0], r.error_code, r.error_message)
                            for r in answer.results))
    return trace


def test_delete_groups_v3(brokers):
    trace = side_by_side(brokers, delete_groups, uuid.uuid4().hex[:8])
    assert trace[1] == [("busy", 68, None), ("empty", 0, None), ("missing", 69, None)]


# --- TxnOffsetCommit v5 and v6 -----------------------------------------------------------------

def txn_offset_commits(bootstrap, suffix):
    cls = messages.request_class(TXN_OFFSET_COMMIT)
    topic, busy = f"txoc-{suffix}", f"busy-{suffix}"
    ensure_topic(bootstrap, topic)
    topic_id = call(bootstrap, METADATA, 12, request(METADATA, topics=[
        messages.request_class(METADATA).MetadataRequestTopic(name=topic)])).topics[0].topic_id
    unknown_id = uuid.uuid4()
    find_coordinator(bootstrap, busy, 0)
    join = messages.request_class(JOIN_GROUP)(
        group_id=busy, session_timeout_ms=30000, rebalance_timeout_ms=30000,
        protocol_type="consumer", protocols=[messages.request_class(JOIN_GROUP).
                                             JoinGroupRequestProtocol(name="range",
                                                                      metadata=b"\0" * 10)])
    join.member_id = call(bootstrap, JOIN_GROUP, 9, join).member_id
    joined = call(bootstrap, JOIN_GROUP, 9, join)  # no SyncGroup: CompletingRebalance
    assert joined.error_code == 0
    member, generation = join.member_id, joined.generation_id

    def topics(version, known=True, partitions=(0,)):
        return [cls.TxnOffsetCommitRequestTopic(
            name=(topic if known else f"nope-{suffix}") if version < 6 else "",
            topic_id=(topic_id if known else unknown_id) if version >= 6 else ZERO_UUID,
            partitions=[cls.TxnOffsetCommitRequestPartition(
                partition_index=p, committed_offset=3, committed_metadata="")
                for p in partitions])]

    def named(answer_topic):
        if answer_topic.topic_id == ZERO_UUID:
            return answer_topic.name.split("-")[0]
        return "known id" if answer_topic.topic_id == topic_id else "unknown id"

    trace = []
    with Wire(bootstrap, timeout=30) as wire:
        for version in (5, 6):
            transactional_id = f"tx{version}-{suffix}"
            find_coordinator(bootstrap, transactional_id, 1)
            box = {}

            def initialized():
                box["init"] = wire.call(INIT_PRODUCER_ID, 5, request(
                    INIT_PRODUCER_ID, transactional_id=transactional_id,
                    transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1))
                return box["init"].error_code == 0  # COORDINATOR_LOAD_IN_PROGRESS at first
            wait_until(initialized, 60, 0.2, "InitProducerId")
            init = box["init"]
            cases = [
                ("a new group", f"new{version}-{suffix}", -1, "", topics(version)),
                ("a missing group, generation 3", f"gone{version}-{suffix}", 3, "m",
                 topics(version)),
                ("an unknown topic", f"x{version}-{suffix}", -1, "", topics(version, False)),
                ("an unknown partition", f"y{version}-{suffix}", -1, "",
                 topics(version, True, (0, 7)) + topics(version, False)),
                ("a stale generation", busy, generation - 1, member, topics(version)),
                ("an unknown member", busy, generation, "who", topics(version)),
                ("the member, mid-rebalance", busy, generation, member, topics(version)),
                ("no member, mid-rebalance", busy, -1, "", topics(version)),
            ]
            for name, group, gen, member_id, commit_topics in cases:
                answer = wire.call(TXN_OFFSET_COMMIT, version, cls(
                    transactional_id=transactional_id, group_id=group,
                    producer_id=init.producer_id, producer_epoch=init.producer_epoch,
                    generation_id_or_member_epoch=gen, member_id=member_id,
                    topics=commit_topics))
                trace.append((version, name, sorted(
                    (named(t), sorted((p.partition_index, p.error_code) for p in t.partitions))
                    for t in answer.topics)))
            assert wire.call(END_TXN, 5, request(
                END_TXN, transactional_id=transactional_id, producer_id=init.producer_id,
                producer_epoch=init.producer_epoch, committed=True)).error_code == 0
        # The records written for the new group: OffsetCommitValue v4 with the topic id, which
        # Kafka 4.4 resolves for names too (v5) and keeps (KAFKA-20444).
        _, batches = wire.fetch("__consumer_offsets", 0, 0, max_bytes=8 << 20)
        for batch in batches:
            for record in ([] if batch.control else batch.raw_records()):
                record_type, key = group_records.decode_key(record.key)
                if record_type == 1 and key.group.startswith("new") and record.value:
                    value = group_records.decode_offset_commit_value(record.value, 0)
                    trace.append((key.group.split("-")[0], record.value[:2],
                                  value.offset, value.topic_id == topic_id))
    return trace


def test_txn_offset_commit_v5_and_v6(brokers):
    trace = side_by_side(brokers, txn_offset_commits, uuid.uuid4().hex[:8])
    errors = {(version, name): topics for version, name, topics in trace[:-2]}
    assert errors[(5, "a missing group, generation 3")] == [("txoc", [(0, 22)])]
    assert errors[(6, "a missing group, generation 3")] == [("known id", [(0, 69)])]
    assert errors[(6, "an unknown topic")] == [("unknown id", [(0, 100)])]
    assert errors[(6, "no member, mid-rebalance")] == [("known id", [(0, 0)])]
    assert trace[-2:] == [("new5", b"\x00\x04", 3, True), ("new6", b"\x00\x04", 3, True)]


# --- Metadata by topic id (v12+) ---------------------------------------------------------------

def metadata_by_id(bootstrap, suffix):
    """Java's KIP-848 consumer asks for the topics of a regex assignment by id with name ""."""
    cls = messages.request_class(METADATA)
    topic = f"mdid-{suffix}"
    ensure_topic(bootstrap, topic)
    topic_id = call(bootstrap, METADATA, 12, request(METADATA, topics=[
        cls.MetadataRequestTopic(name=topic)])).topics[0].topic_id
    unknown = uuid.uuid4()

    def answer(version, topics):
        r = call(bootstrap, METADATA, version, request(METADATA, topics=topics,
                                                       allow_auto_topic_creation=True))
        return sorted(((t.error_code, t.name == topic, t.name is None, t.topic_id == topic_id,
                        len(t.partitions)) for t in r.topics), key=repr)

    return [
        answer(13, [cls.MetadataRequestTopic(topic_id=topic_id, name="")]),
        answer(12, [cls.MetadataRequestTopic(topic_id=topic_id, name=None)]),
        answer(13, [cls.MetadataRequestTopic(topic_id=unknown, name="")]),
        # one id makes it a request by id: the name beside it is ignored, never auto-created
        answer(13, [cls.MetadataRequestTopic(topic_id=topic_id, name=""),
                    cls.MetadataRequestTopic(name=f"never-created-{suffix}")]),
        answer(11, [cls.MetadataRequestTopic(topic_id=topic_id, name=topic)]),
    ]


def test_metadata_by_topic_id(brokers):
    trace = side_by_side(brokers, metadata_by_id, uuid.uuid4().hex[:8])
    assert trace[0] == [(0, True, False, True, 1)]
    assert trace[2] == [(100, False, True, False, 0)]  # UNKNOWN_TOPIC_ID
