"""MirrorMaker 2 from one kbroker node to another (:func:`compat_tests.pipeline.mirror_maker.
mirror_and_fail_over`): kbroker is both the cluster MirrorMaker reads (topics, configs, groups'
committed offsets, its offset-syncs topic) and the one it writes (the mirrored topic, configs,
checkpoints, translated group offsets), and a consumer group fails over to the target and resumes
at the translated offset, losing nothing. The same scenario between Apache Kafka 4.4.0 and
kbroker, both ways, is test_mirror_maker_kafka.py (`make test-long`: three JVMs on 2 cores)."""

from __future__ import annotations

import pytest

from compat_tests.pipeline.connect import CONNECT_VERSION, missing
from compat_tests.pipeline.mirror_maker import mirror_and_fail_over
from tests.broker_process import BrokerProcess

SETTINGS = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "1"}


@pytest.fixture
def clusters(tmp_path):
    if missing():
        pytest.fail(missing())
    east = BrokerProcess(tmp_path / "east", SETTINGS).start()
    west = BrokerProcess(tmp_path / "west", SETTINGS).start()
    try:
        yield {"east": east.bootstrap, "west": west.bootstrap}
    finally:
        east.kill()
        west.kill()


@pytest.mark.compat("mirrormaker 2: kbroker -> kbroker, configs, offsets, failover",
                    client="mirrormaker2", version=CONNECT_VERSION)
def test_mirror_a_topic_and_fail_over_a_consumer_group(clusters, tmp_path):
    mirror_and_fail_over(tmp_path, clusters, [("east", "west", "orders", "orders-app")])
