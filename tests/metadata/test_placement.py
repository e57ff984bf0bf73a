"""Replica placement as Kafka's AdminUtils.assignReplicasToBrokers: the same lists for the same
start index and shift (rack-unaware and rack-aware), and the replication factor checked."""

from __future__ import annotations

import pytest

from kbroker.metadata.placement import assign_replicas, rack_alternated
from kbroker.protocol.errors import Errors, KafkaError


def test_rack_unaware_matches_kafka():
    # AdminUtilsTest.testReplicaAssignment (Kafka): brokers 0-4, 10 partitions, RF 3, start 0.
    racks = {b: None for b in range(5)}
    expected = [(0, 1, 2), (1, 2, 3), (2, 3, 4), (3, 4, 0), (4, 0, 1),
                (0, 2, 3), (1, 3, 4), (2, 4, 0), (3, 0, 1), (4, 1, 2)]
    assert assign_replicas(racks, 10, 3, start=0, shift=0) == expected


def test_rack_alternated_broker_list_matches_kafka():
    # AdminUtilsTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated(racks) == [0, 3, 1, 5, 4, 2]


def test_rack_aware_puts_every_replica_in_another_rack():
    racks = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    for replicas in assign_replicas(racks, 12, 3):
        assert len({racks[b] for b in replicas}) == 3 and len(set(replicas)) == 3


def test_leaders_spread_evenly():
    racks = {b: None for b in (1, 2, 3)}
    leaders = [r[0] for r in assign_replicas(racks, 6, 3)]
    assert sorted(leaders) == [1, 1, 2, 2, 3, 3]


def test_replication_factor_above_the_brokers_is_refused():
    with pytest.raises(KafkaError) as info:
        assign_replicas({1: None, 2: None}, 1, 3)
    assert info.value.error == Errors.INVALID_REPLICATION_FACTOR
    assert "only 2 broker(s) are registered" in info.value.message
