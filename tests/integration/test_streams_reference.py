"""Streams groups' topology descriptions (KIP-1331) on kbroker and Apache Kafka 4.4.0 side by side.

Kafka 4.4.0 stores a streams group's full topology description through a plugin
(``group.streams.topology.description.plugin.class``, unset by default: the feature is off).
Without one, which is kbroker's only state (it loads no Java plugins), Kafka:
- never asks a member to push its description (StreamsGroupHeartbeat v1's
  TopologyDescriptionRequired stays false), so a Kafka Streams 4.4 client never sends one;
- answers a StreamsGroupTopologyDescriptionUpdate (key 93) UNSUPPORTED_VERSION with its message,
  whatever the group, member or fields;
- says NOT_STORED (1) in StreamsGroupDescribe v1 for every group described without error when
  IncludeTopologyDescription is set, NOT_REQUESTED (0) otherwise, with no description.

The session's reference Kafka 4.4.0 (tests/shared_kafka.py) and one kbroker for the module; each scenario runs on
both with raw requests of our generated codecs, and the traces must be equal.
"""

from __future__ import annotations

import time
import uuid

import pytest

from kbroker.protocol import messages
from tests.broker_process import BrokerProcess
from tests.integration.clients import Wire
from tests.integration.test_kafka_reference import side_by_side

SETTINGS = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "1",
            "num.partitions": "1", "group.streams.initial.rebalance.delay.ms": "0"}
STREAMS_HB, STREAMS_DESCRIBE, TOPOLOGY_UPDATE, FIND_COORDINATOR = 88, 89, 93, 10
# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR (while Kafka creates
# __consumer_offsets after the first FindCoordinator)
RETRIABLE = {14, 15, 16}


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


def request(api_key, **fields):
    return messages.request_class(api_key)(**fields)


def join(wire, group: str, member: str, source: str):
    """A streams group member's first heartbeat (v1), retried while the coordinator loads."""
    deadline = time.monotonic() + 60
    while wire.call(FIND_COORDINATOR, 3, request(FIND_COORDINATOR, key=group, key_type=0)
                    ).error_code != 0 and time.monotonic() < deadline:
        time.sleep(0.2)  # Kafka creates __consumer_offsets on the first FindCoordinator
    Q = messages.request_class(STREAMS_HB)
    topology = Q.Topology(epoch=1, subtopologies=[
        Q.Subtopology(subtopology_id="0", source_topics=[source])])
    while True:
        response = wire.call(STREAMS_HB, 1, Q(
            group_id=group, member_id=member, member_epoch=0, rebalance_timeout_ms=30000,
            process_id=str(uuid.uuid4()), topology=topology, active_tasks=[], standby_tasks=[],
            warmup_tasks=[]))
        if response.error_code not in RETRIABLE or time.monotonic() > deadline:
            return response
        time.sleep(0.2)


def description():
    Q = messages.request_class(TOPOLOGY_UPDATE)
    source = Q.TopologyDescriptionNode(name="KSTREAM-SOURCE-0000000000", node_type=1,
                                       source_topics=["words"], successors=["KSTREAM-SINK-1"])
    sink = Q.TopologyDescriptionNode(name="KSTREAM-SINK-1", node_type=3, sink_topic="counts")
    return Q.TopologyDescription(
        subtopologies=[Q.TopologyDescriptionSubtopology(subtopology_id="0",
                                                        nodes=[source, sink])],
        global_stores=[])


def pushes(bootstrap, suffix):
    """A real member's push, then pushes for a missing group, with empty ids, a stale epoch."""
    group = f"sg-describe-{suffix}"
    member = str(uuid.uuid4())
    trace = []
    with Wire(bootstrap, timeout=30) as wire:
        hb = join(wire, group, member, f"words-{suffix}")
        trace.append(("heartbeat", hb.error_code, hb.member_epoch,
                      hb.topology_description_required))
        cases = [(group, member, 1), (group, member, 7), (f"missing-{suffix}", member, 1),
                 (group, "", 1), ("", member, 1), (group, str(uuid.uuid4()), 1)]
        for group_id, member_id, epoch in cases:
            r = wire.call(TOPOLOGY_UPDATE, 0, request(
                TOPOLOGY_UPDATE, group_id=group_id, member_id=member_id, topology_epoch=epoch,
                topology_description=description()))
            trace.append(("push", group_id == group, bool(member_id), epoch, r.throttle_time_ms,
                          r.error_code, r.error_message))
        # Its heartbeats afterwards still do not ask for a description.
        Q = messages.request_class(STREAMS_HB)
        hb = wire.call(STREAMS_HB, 1, Q(group_id=group, member_id=member,
                                        member_epoch=hb.member_epoch))
        trace.append(("heartbeat", hb.error_code, hb.topology_description_required))
    return trace


def test_topology_description_update_without_a_plugin(brokers):
    trace = side_by_side(brokers, pushes, uuid.uuid4().hex[:8])
    assert trace[0][1] == 0 and trace[-1] == ("heartbeat", 0, False)  # a real member
    assert {step[5] for step in trace[1:-1]} == {35}  # UNSUPPORTED_VERSION


def describes(bootstrap, suffix):
    group = f"sg-status-{suffix}"
    trace = []
    with Wire(bootstrap, timeout=30) as wire:
        hb = join(wire, group, str(uuid.uuid4()), f"words-{suffix}")
        trace.append(("heartbeat", hb.error_code))
        ids = [group, f"missing-{suffix}", ""]
        for version, include in ((1, True), (1, False), (0, False)):
            r = wire.call(STREAMS_DESCRIBE, version, request(
                STREAMS_DESCRIBE, group_ids=ids, include_topology_description=include))
            for g in sorted(r.groups, key=lambda g: ids.index(g.group_id)):
                trace.append((version, include, ids.index(g.group_id), g.error_code,
                              g.error_message, getattr(g, "topology_description_status", None),
                              getattr(g, "topology_description", None) is None))
    return trace


def test_describe_topology_description_status_without_a_plugin(brokers):
    trace = side_by_side(brokers, describes, uuid.uuid4().hex[:8])
    assert (1, True, 0, 0, None, 1, True) in trace  # the group: NOT_STORED


def topology_checks(bootstrap, suffix):
    """Joins whose topology names Kafka's internal topics or invalid topic names: KafkaApis
    refuses them (STREAMS_INVALID_TOPOLOGY with its message) before the coordinator checks the
    rest of the request (here also missing its rebalance timeout)."""
    Q = messages.request_class(STREAMS_HB)
    cases = [
        ["__consumer_offsets", f"ok-{suffix}"],
        [f"ok-{suffix}", "bad name!", "__transaction_state"],
        [f"ok-{suffix}", "bad name!", "..", "x" * 250],
        [f"ok-{suffix}", f"ok-{suffix}"],
    ]
    trace = []
    with Wire(bootstrap, timeout=30) as wire:
        join(wire, f"sg-topo-warm-{suffix}", str(uuid.uuid4()), f"w-{suffix}")
        for sources in cases:
            for timeout_ms in (30000, -1):
                topology = Q.Topology(epoch=1, subtopologies=[
                    Q.Subtopology(subtopology_id="0", source_topics=sources[:1],
                                  repartition_sink_topics=sources[1:])])
                r = wire.call(STREAMS_HB, 1, Q(
                    group_id=f"sg-topo-{suffix}", member_id=str(uuid.uuid4()), member_epoch=0,
                    rebalance_timeout_ms=timeout_ms, process_id=str(uuid.uuid4()),
                    topology=topology, active_tasks=[], standby_tasks=[], warmup_tasks=[]))
                trace.append((len(sources), timeout_ms, r.error_code,
                              (r.error_message or "").replace(suffix, "S")))
    return trace


def test_topology_topics_are_checked_before_the_request(brokers):
    trace = side_by_side(brokers, topology_checks, uuid.uuid4().hex[:8])
    assert trace[0][2] == 130 and "__consumer_offsets" in trace[0][3]  # STREAMS_INVALID_TOPOLOGY
