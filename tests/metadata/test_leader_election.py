"""The controller's election rules (Kafka's ZooKeeper controller), on hand-built images."""

from __future__ import annotations

import uuid

from kbroker.metadata import leader_election
from kbroker.metadata.image import MetadataImage, PartitionState, TopicMetadata


def _image(*states, replicas=(1, 2, 3), configs=None):
    topic = TopicMetadata("t", uuid.uuid4(), (replicas,) * len(states), configs or {}, states)
    return MetadataImage.build("c", [topic])


def _never(_topic):
    return False


def test_lost_leader_is_replaced_by_the_first_live_isr_replica():
    image = _image(PartitionState(1, 4, (1, 2, 3), version=7))
    ((_, _, state),) = leader_election.on_live_brokers(image, {2, 3}, 9, _never)
    assert (state.leader, state.leader_epoch, state.isr) == (2, 5, (2, 3))
    assert (state.version, state.controller_epoch) == (7, 9)  # written conditionally on v7


def test_a_live_replica_outside_the_isr_never_leads_cleanly():
    image = _image(PartitionState(1, 0, (1, 2)))
    ((_, _, state),) = leader_election.on_live_brokers(image, {3}, 1, _never)
    assert (state.leader, state.isr) == (-1, (1,))  # offline, the last in-sync replica kept


def test_unclean_election_takes_a_live_replica_when_allowed():
    image = _image(PartitionState(1, 0, (1, 2)))
    ((_, _, state),) = leader_election.on_live_brokers(image, {3}, 1, lambda t: True)
    assert (state.leader, state.isr) == (3, (3,))


def test_offline_partition_comes_back_with_its_isr_member():
    image = _image(PartitionState(-1, 3, (1,)))
    assert leader_election.on_live_brokers(image, {2, 3}, 1, _never) == []
    ((_, _, state),) = leader_election.on_live_brokers(image, {1, 2}, 1, _never)
    assert (state.leader, state.leader_epoch, state.isr) == (1, 4, (1,))


def test_a_lost_follower_leaves_the_isr_and_the_leader_stays():
    image = _image(PartitionState(1, 2, (1, 2, 3)))
    ((_, _, state),) = leader_election.on_live_brokers(image, {1, 2}, 1, _never)
    assert (state.leader, state.leader_epoch, state.isr) == (1, 3, (1, 2))


def test_nothing_changes_while_everyone_lives():
    image = _image(PartitionState(2, 2, (1, 2, 3)))
    assert leader_election.on_live_brokers(image, {1, 2, 3}, 1, _never) == []


def test_preferred_replica_takes_over_only_when_in_sync_and_alive():
    image = _image(PartitionState(2, 2, (2, 3)), PartitionState(2, 2, (1, 2, 3)))
    changes = leader_election.preferred(image, {1, 2, 3}, 1)
    assert [(p, s.leader) for _, p, s in changes] == [(1, 1)]
    assert leader_election.imbalanced_brokers(image, 10) == {1}
