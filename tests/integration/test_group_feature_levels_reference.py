"""``group.version`` and ``streams.version`` side by side with Apache Kafka 4.4.0 (issue 36, part 6):
both finalized at 1 on a new cluster; lowered to 0 with a safe downgrade (a plain one is refused
with Kafka's message), the consumer and streams group APIs stay advertised and answer
UNSUPPORTED_VERSION without a message, a librdkafka consumer on ``group.protocol=consumer`` gets
the same fatal error from both, and raised back to 1 a consumer-protocol member is served again.

The module starts a Kafka of its own: it changes cluster-wide feature levels, which the run's
shared reference Kafka (tests/shared_kafka.py) must never see.
"""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from confluent_kafka import Consumer, KafkaError

from kbroker.protocol import messages
from tests.broker_process import BrokerProcess
from tests.integration.clients import Wire, ensure_topic
from tests.shared_kafka import SHARED_SETTINGS, run_kafka_tool

API_VERSIONS, UPDATE_FEATURES = 18, 57
CGH, CGD, SGH, SGD = 68, 69, 88, 89
SAFE_DOWNGRADE = 2
SETTINGS = {"group.initial.rebalance.delay.ms": "0", **SHARED_SETTINGS}


@pytest.fixture(scope="module")
def bootstraps(tmp_path_factory):
    run_kafka = run_kafka_tool()
    base = tmp_path_factory.mktemp("feature-levels")
    kafka = run_kafka.start_kafka(port=run_kafka.free_port(), heap="512M",
                                  data_dir=str(base / "kafka"), temp=True,
                                  extra_props=dict(SHARED_SETTINGS))
    kbroker = BrokerProcess(base / "data", SETTINGS)
    try:
        kbroker.start()
        yield {"kafka": kafka.bootstrap, "kbroker": kbroker.bootstrap}
    finally:
        kbroker.kill()
        kafka.stop()


def both(bootstraps, step, *args) -> dict:
    with ThreadPoolExecutor(2) as pool:
        futures = {name: pool.submit(step, bootstrap, *args)
                   for name, bootstrap in bootstraps.items()}
        return {name: future.result() for name, future in futures.items()}


def same(results: dict):
    assert results["kbroker"] == results["kafka"], results
    return results["kafka"]


def levels(bootstrap: str) -> dict:
    with Wire(bootstrap) as wire:
        r = wire.api_versions(version=4)
        supported = {f.name: (f.min_version, f.max_version) for f in r.supported_features}
        finalized = {f.name: f.max_version_level for f in r.finalized_features}
        advertised = {k.api_key for k in r.api_keys}
    names = ("group.version", "streams.version")
    return ({n: supported.get(n) for n in names}, {n: finalized.get(n) for n in names},
            [key in advertised for key in (CGH, CGD, SGH, SGD)])


def update(bootstrap: str, feature: str, level: int, upgrade_type: int = 1):
    cls = messages.request_class(UPDATE_FEATURES)
    with Wire(bootstrap) as wire:
        r = wire.call(UPDATE_FEATURES, 1, cls(
            timeout_ms=30000, validate_only=False, feature_updates=[cls.FeatureUpdateKey(
                feature=feature, max_version_level=level, upgrade_type=upgrade_type,
                allow_downgrade=False)]))
    return r.error_code, r.error_message, [(x.feature, x.error_code, x.error_message)
                                           for x in r.results]


def group_apis(bootstrap: str) -> dict:
    """Each API's (error code, message) for well-formed requests."""
    member = uuid.uuid4().hex[:22]
    with Wire(bootstrap) as wire:
        cls = messages.request_class(CGH)
        cgh = wire.call(CGH, 1, cls(group_id="levels-cg", member_id=member, member_epoch=0,
                                    rebalance_timeout_ms=30000, subscribed_topic_names=["t"],
                                    topic_partitions=[]))
        cls = messages.request_class(CGD)
        cgd = wire.call(CGD, 0, cls(group_ids=["levels-cg"], include_authorized_operations=False))
        cls = messages.request_class(SGH)
        sgh = wire.call(SGH, 0, cls(
            group_id="levels-sg", member_id=member, member_epoch=0, rebalance_timeout_ms=30000,
            process_id="p", active_tasks=[], standby_tasks=[], warmup_tasks=[],
            topology=cls.Topology(epoch=0, subtopologies=[])))
        cls = messages.request_class(SGD)
        sgd = wire.call(SGD, 0, cls(group_ids=["levels-sg"], include_authorized_operations=False))
    return {"ConsumerGroupHeartbeat": (cgh.error_code, cgh.error_message),
            "ConsumerGroupDescribe": (cgd.groups[0].error_code, cgd.groups[0].error_message),
            "StreamsGroupHeartbeat": (sgh.error_code, sgh.error_message),
            "StreamsGroupDescribe": (sgd.groups[0].error_code, sgd.groups[0].error_message)}


def consumer_outcome(bootstrap: str, topic: str, timeout: float = 30.0):
    """What a librdkafka consumer on the consumer protocol sees first: ("assigned", n) or
    ("error", code name, fatal)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"levels-{uuid.uuid4()}",
                         "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is not None and \
                    msg.error().code() != KafkaError._PARTITION_EOF:
                return ("error", msg.error().name(), msg.error().fatal())
            if consumer.assignment():
                return ("assigned", len(consumer.assignment()))
        return ("nothing",)
    finally:
        consumer.close()


def test_new_clusters_finalize_both_at_1(bootstraps):
    supported, finalized, advertised = same(both(bootstraps, levels))
    assert supported == {"group.version": (0, 1), "streams.version": (0, 1)}
    assert finalized == {"group.version": 1, "streams.version": 1}
    assert advertised == [True, True, True, True]


def test_level_0_switches_the_protocols_off_and_1_back_on(bootstraps):
    for name, bootstrap in bootstraps.items():
        ensure_topic(bootstrap, "levels-topic", 2)
    try:
        for feature in ("group.version", "streams.version"):
            refused = same(both(bootstraps, update, feature, 0))
            assert refused[0] == 95 and refused[1].endswith(  # INVALID_UPDATE_VERSION
                "Can't downgrade the version of this feature without setting the upgrade type "
                "to either safe or unsafe downgrade.")
            assert same(both(bootstraps, update, feature, 0, SAFE_DOWNGRADE)) == \
                (0, None, [(feature, 0, "NONE")])
        _, finalized, advertised = same(both(bootstraps, levels))
        assert finalized == {"group.version": None, "streams.version": None}  # 0: not listed
        assert advertised == [True, True, True, True]  # still advertised, as Kafka 4.4.0
        answers = same(both(bootstraps, group_apis))
        assert set(answers.values()) == {(35, None)}  # UNSUPPORTED_VERSION, no message
        # librdkafka raises its fatal error: the cluster does not serve the protocol.
        assert same(both(bootstraps, consumer_outcome, "levels-topic"))[:2] == \
            ("error", "_FATAL")
        too_high = same(both(bootstraps, update, "group.version", 2))
        assert too_high[1].endswith("Invalid update version 2 for feature group.version. Local "
                                    "controller 1 only supports versions 0-1")
    finally:
        for feature in ("group.version", "streams.version"):
            same(both(bootstraps, update, feature, 1))
    assert same(both(bootstraps, levels))[1] == {"group.version": 1, "streams.version": 1}
    assert same(both(bootstraps, consumer_outcome, "levels-topic")) == ("assigned", 2)
