"""MirrorMaker 2 between Apache Kafka 4.4.0 and kbroker, both ways at once
(:func:`compat_tests.pipeline.mirror_maker.mirror_and_fail_over`): topics and their configs are
mirrored, consumer-group offsets are translated (checkpoints, ``sync.group.offsets.enabled``),
and a consumer group fails over to the other cluster and resumes at the translated offset, losing
nothing. A Kafka JVM, kbroker and MirrorMaker's JVM on 2 cores: `make test-long` runs it;
test_mirror_maker.py runs the same scenario between two kbroker nodes in `make test`."""

from __future__ import annotations

import sys

import pytest

from compat_tests.pipeline.connect import CONNECT_VERSION, ROOT, missing
from compat_tests.pipeline.mirror_maker import mirror_and_fail_over
from tests.broker_process import BrokerProcess


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    if missing():
        pytest.fail(missing())
    sys.path.insert(0, str(ROOT / "tools" / "kafka_ref"))
    import run_kafka

    kafka = run_kafka.start_kafka(port=run_kafka.free_port(), heap="512M", extra_props={
        "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "1"})
    kbroker = BrokerProcess(tmp_path_factory.mktemp("mm2") / "data", {
        "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "1"}).start()
    try:
        yield {"kafka": kafka.bootstrap, "kbroker": kbroker.bootstrap}
    finally:
        kbroker.kill()
        kafka.stop()


@pytest.mark.compat("mirrormaker 2: Kafka 4.4.0 <-> kbroker, configs, offsets, failover",
                    client="mirrormaker2", version=CONNECT_VERSION)
def test_mirror_both_ways_and_fail_over_a_consumer_group(clusters, tmp_path):
    mirror_and_fail_over(tmp_path, clusters, [("kafka", "kbroker", "orders", "orders-app"),
                                              ("kbroker", "kafka", "events", "events-app")])
