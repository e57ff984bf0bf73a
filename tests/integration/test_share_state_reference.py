"""The share coordinator's inter-broker APIs (83-87) and FindCoordinator(SHARE) against Apache
Kafka 4.4.0, side by side: the same raw requests to a reference Kafka and to kbroker, and the
answers must be equal (topic ids, which each broker draws, are replaced by the topic's name).

Covered: ApiVersions ranges of 83-87; the configs __share_group_state is created with, and the
records both brokers write to it; FindCoordinator key type 2 (v6; a malformed key; v5);
initialize, write, read (recording a new leader epoch), read summary v0/v1, delete; and bad
input: an uninitialized partition, a negative partition, an unknown topic, a partition past the
topic's count, older leader and state epochs (FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH), a request
without a group id, and a request naming two partitions at once.
"""

from __future__ import annotations

import base64
import os
import time
import uuid

import pytest

from kbroker.protocol import messages
from tests.broker_process import BrokerProcess
from tests.integration.clients import Wire, ensure_topic

API_VERSIONS, METADATA, FIND_COORDINATOR = 18, 3, 10
INITIALIZE, READ, WRITE, DELETE, SUMMARY = 83, 84, 85, 86, 87
TOPIC = f"share-state-ref-{uuid.uuid4().hex[:8]}"  # unique: a reused reference keeps state
# The reference broker: the session's (tests/shared_kafka.py), with Kafka's default 50 partitions
# of __share_group_state (_records below counts on them); KBROKER_SHARE_REF_KAFKA=host:port reuses
# a running one instead.
KAFKA_SETTINGS = {"share.coordinator.state.topic.num.partitions": "50"}


@pytest.fixture(scope="module")
def brokers(tmp_path_factory, reference_kafka):
    reuse = os.environ.get("KBROKER_SHARE_REF_KAFKA")
    kafka = reuse or reference_kafka.get(KAFKA_SETTINGS).bootstrap
    kbroker = BrokerProcess(tmp_path_factory.mktemp("kbroker") / "data", {})
    try:
        kbroker.start()
        yield {"kafka": kafka, "kbroker": kbroker.bootstrap}
    finally:
        kbroker.kill()


def _topic_ids(bootstrap):
    ensure_topic(bootstrap, TOPIC, 2)
    with Wire(bootstrap, timeout=30) as wire:
        meta = wire.call(METADATA, 12, messages.request_class(METADATA)(
            topics=[messages.request_class(METADATA).MetadataRequestTopic(name=TOPIC)],
            allow_auto_topic_creation=False))
    return {TOPIC: meta.topics[0].topic_id}


def _plain(obj, names):
    """A response as nested tuples, topic ids replaced by names (each broker draws its own)."""
    if isinstance(obj, uuid.UUID):
        return names.get(obj, "<unknown topic id>")
    if isinstance(obj, list):
        return [_plain(o, names) for o in obj]
    fields = getattr(obj, "FIELD_NAMES", None)
    if fields is None:
        return obj
    return tuple((f, _plain(getattr(obj, f), names)) for f in fields)


def _kafka_uuid(topic_id):
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def scenario(bootstrap):
    ids = _topic_ids(bootstrap)
    tid = ids[TOPIC]
    names = {tid: TOPIC}
    missing = uuid.UUID(int=0x1234)
    names[missing] = "missing"
    trace = []
    with Wire(bootstrap, timeout=30) as wire:
        got = wire.call(API_VERSIONS, 3, messages.request_class(API_VERSIONS)(
            client_software_name="kbroker-tests", client_software_version="1"))
        trace.append(("ApiVersions", sorted((a.api_key, a.min_version, a.max_version)
                                            for a in got.api_keys if 83 <= a.api_key <= 87)))

        def find(keys, version=6, key_type=2):
            R = messages.request_class(FIND_COORDINATOR)
            request = R(key_type=key_type, coordinator_keys=keys) if version >= 4 else \
                R(key_type=key_type, key=keys[0])
            return wire.call(FIND_COORDINATOR, version, request)

        key = f"g1:{_kafka_uuid(tid)}:0"
        # Kafka creates __share_group_state on the first lookup and answers
        # COORDINATOR_NOT_AVAILABLE meanwhile; kbroker answers once it is created.
        deadline = time.monotonic() + 60
        while True:
            answer = find([key]).coordinators[0]
            if answer.error_code == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        named = lambda text: text.replace(_kafka_uuid(tid), TOPIC)  # noqa: E731
        trace.append(("FindCoordinator", answer.error_code, named(answer.key),
                      answer.error_message))
        bad = find(["no-colons", f"g1:{_kafka_uuid(tid)}:x", f":{_kafka_uuid(tid)}:0"])
        trace.append(("FindCoordinator bad", [(named(c.key), c.error_code, c.node_id,
                                               c.error_message) for c in bad.coordinators]))
        trace.append(("FindCoordinator v5", [c.error_code for c in find([key], 5).coordinators]))
        old = find([key], 3)
        trace.append(("FindCoordinator v3", old.error_code, old.error_message, old.node_id))

        def call(api, version, **fields):
            response = wire.call(api, version, messages.request_class(api)(**fields))
            return _plain(response, names)

        def init(group, topic_id, partition, state_epoch, start_offset):
            R = messages.request_class(INITIALIZE)
            return call(INITIALIZE, 0, group_id=group, topics=[R.InitializeStateData(
                topic_id=topic_id, partitions=[R.PartitionData(
                    partition=partition, state_epoch=state_epoch, start_offset=start_offset)])])

        def write(group, topic_id, partitions, version=1):
            R = messages.request_class(WRITE)
            return call(WRITE, version, group_id=group, topics=[R.WriteStateData(
                topic_id=topic_id, partitions=[R.PartitionData(
                    partition=p, state_epoch=se, leader_epoch=le, start_offset=so,
                    delivery_complete_count=dcc,
                    state_batches=[R.StateBatch(first_offset=a, last_offset=b, delivery_state=s,
                                                delivery_count=c) for a, b, s, c in batches])
                    for p, se, le, so, dcc, batches in partitions])])

        def read(group, topic_id, partitions):
            R = messages.request_class(READ)
            return call(READ, 0, group_id=group, topics=[R.ReadStateData(
                topic_id=topic_id, partitions=[R.PartitionData(partition=p, leader_epoch=le)
                                               for p, le in partitions])])

        def summary(group, topic_id, partitions, version=1):
            R = messages.request_class(SUMMARY)
            return call(SUMMARY, version, group_id=group, topics=[R.ReadStateSummaryData(
                topic_id=topic_id, partitions=[R.PartitionData(partition=p, leader_epoch=le)
                                               for p, le in partitions])])

        def delete(group, topic_id, partitions):
            R = messages.request_class(DELETE)
            return call(DELETE, 0, group_id=group, topics=[R.DeleteStateData(
                topic_id=topic_id, partitions=[R.PartitionData(partition=p)
                                               for p in partitions])])

        # Kafka names the coordinator before its shards have loaded (NOT_COORDINATOR until
        # then): wait until every state partition the steps touch answers.
        deadline = time.monotonic() + 60
        for topic_id, partition in ((tid, 0), (tid, 1), (tid, 5), (tid, -1), (missing, 0)):
            while _summary_error(wire, topic_id, partition) in (14, 15, 16):
                assert time.monotonic() < deadline, "the share coordinator did not load"
                time.sleep(0.2)

        steps = [
            ("read uninitialized", lambda: read("g1", tid, [(0, 0)])),
            ("write uninitialized", lambda: write("g1", tid, [(0, 0, 0, 0, -1, [])])),
            ("summary uninitialized", lambda: summary("g1", tid, [(0, 0)])),
            ("delete uninitialized", lambda: delete("g1", tid, [0])),
            ("init", lambda: init("g1", tid, 0, 1, 0)),
            ("init unknown topic", lambda: init("g1", missing, 0, 1, 0)),
            ("init partition past count", lambda: init("g1", tid, 5, 1, 0)),
            ("init negative partition", lambda: init("g1", tid, -1, 1, 0)),
            ("read new leader epoch", lambda: read("g1", tid, [(0, 3)])),
            ("write", lambda: write("g1", tid, [(0, 1, 3, 0, -1, [(0, 9, 0, 1), (3, 4, 2, 1)])])),
            ("write more", lambda: write("g1", tid, [(0, 1, 3, 5, 4, [(5, 7, 2, 2),
                                                                      (10, 12, 4, 5)])])),
            ("read", lambda: read("g1", tid, [(0, 3)])),
            ("read negative leader epoch", lambda: read("g1", tid, [(0, -1)])),
            ("write negative leader epoch", lambda: write("g1", tid, [(0, 1, -1, -1, -1, [])])),
            ("write negative state epoch", lambda: write("g1", tid, [(0, -1, 3, -1, -1, [])])),
            ("init negative state epoch", lambda: init("g1", tid, 0, -1, 0)),
            ("write start behind", lambda: write("g1", tid, [(0, 1, 3, 2, 9, [(2, 3, 2, 1)])])),
            ("summary start behind", lambda: summary("g1", tid, [(0, 3)])),
            ("summary v1", lambda: summary("g1", tid, [(0, 3)])),
            ("summary v0", lambda: summary("g1", tid, [(0, 3)], 0)),
            ("write v0", lambda: write("g1", tid, [(0, 1, 3, -1, -1, [(13, 13, 2, 1)])], 0)),
            ("write old leader epoch", lambda: write("g1", tid, [(0, 1, 2, -1, -1, [])])),
            ("read old leader epoch", lambda: read("g1", tid, [(0, 2)])),
            ("init newer state epoch", lambda: init("g1", tid, 0, 2, 6)),
            ("write old state epoch", lambda: write("g1", tid, [(0, 1, 3, -1, -1, [])])),
            ("init old state epoch", lambda: init("g1", tid, 0, 1, 0)),
            ("read after re-init", lambda: read("g1", tid, [(0, 3)])),
            ("summary after re-init", lambda: summary("g1", tid, [(0, 3)])),
            ("two partitions", lambda: init("g1", tid, 1, 0, 0)),
            ("read two", lambda: read("g1", tid, [(1, 0), (0, 3)])),
            ("write two", lambda: write("g1", tid, [(1, 0, 0, -1, -1, [(0, 0, 2, 1)]),
                                                    (0, 2, 3, -1, -1, [(6, 8, 4, 1)])])),
            ("read two again", lambda: read("g1", tid, [(0, 3), (1, 0)])),
            ("no group id", lambda: read("", tid, [(0, 0)])),
            ("no partitions", lambda: call(READ, 0, group_id="g1", topics=[
                messages.request_class(READ).ReadStateData(topic_id=tid, partitions=[])])),
            ("delete", lambda: delete("g1", tid, [0, 1])),
            ("read deleted", lambda: read("g1", tid, [(0, 3)])),
            ("summary deleted", lambda: summary("g1", tid, [(0, 3)])),
        ]
        for name, step in steps:
            trace.append((name, step()))
        trace.append(("__share_group_state records", _state_records(wire, tid, names)))
        D = messages.request_class(32)
        described = wire.call(32, 4, D(resources=[D.DescribeConfigsResource(
            resource_type=2, resource_name="__share_group_state", configuration_keys=[
                "cleanup.policy", "retention.ms", "compression.type", "min.insync.replicas",
                "segment.bytes"])], include_synonyms=False, include_documentation=False))
        trace.append(("__share_group_state configs", sorted(
            (c.name, c.value, c.config_source) for c in described.results[0].configs)))
    return trace


def _summary_error(wire, topic_id, partition):
    R = messages.request_class(SUMMARY)
    response = wire.call(SUMMARY, 1, R(group_id="g1", topics=[R.ReadStateSummaryData(
        topic_id=topic_id, partitions=[R.PartitionData(partition=partition, leader_epoch=0)])]))
    return response.results[0].partitions[0].error_code


def _state_records(wire, tid, names):
    """What the scenario wrote to __share_group_state for its topic: per share partition, in
    log order, record type, group and value (timestamps only as set or not)."""
    from kbroker.coordinator.share import records as rec
    from kbroker.protocol.records import decode_records, iter_batches

    FETCH = 1
    R = messages.request_class(FETCH)
    out = []
    partitions = sorted({rec.partition_for(f"g1:{_kafka_uuid(tid)}:{p}", 50) for p in (0, 1)})
    for index in partitions:
        response = wire.call(FETCH, 12, R(
            replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
            session_id=0, session_epoch=-1, topics=[R.FetchTopic(
                topic="__share_group_state", partitions=[R.FetchPartition(
                    partition=index, fetch_offset=0, log_start_offset=-1,
                    partition_max_bytes=1 << 20, current_leader_epoch=-1)])]))
        data = response.responses[0].partitions[0]
        for header in iter_batches(memoryview(bytes(data.records or b""))):
            if header.is_control:
                continue
            for record in decode_records(header, 1 << 24):
                decoded = rec.decode(record.key, record.value)
                if decoded is None or decoded.key.topic_id != tid:
                    continue
                value = decoded.value
                if value is not None:
                    value = _plain(value, names)
                    value = tuple((f, (v > 0) if f.endswith("_timestamp") else v)
                                  for f, v in value)
                out.append((decoded.key.partition, decoded.record_type, decoded.key.group_id,
                            value))
    # By share partition, each in log order (their state partitions differ between brokers).
    return sorted(out, key=lambda r: r[0])


def test_share_state_apis_answer_as_kafka(brokers):
    # One after the other: each creates its topic first (their ids differ, their names match).
    traces = {name: scenario(bootstrap) for name, bootstrap in brokers.items()}
    differences = [f"kbroker {got}\nkafka   {want}"
                   for got, want in zip(traces["kbroker"], traces["kafka"]) if got != want]
    assert not differences, "\n".join(differences)
    assert len(traces["kbroker"]) == len(traces["kafka"])
    records = next(t[1] for t in traces["kafka"] if t[0] == "__share_group_state records")
    assert len(records) >= 10 and {r[1] for r in records} == {0, 1}  # snapshots and updates
