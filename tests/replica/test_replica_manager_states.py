"""ReplicaManager in cluster mode, without sockets: which partitions it hosts and what each is,
straight from the image's assignments and partition states."""

from __future__ import annotations

import uuid

from kbroker.log import LogConfig
from kbroker.log.log_manager import LogManager
from kbroker.metadata.delta import MetadataDelta
from kbroker.metadata.image import MetadataImage, PartitionState, TopicMetadata
from kbroker.replica.replica_manager import ReplicaManager


def apply(replicas, old, new):
    """What the controller hands its listeners: the two images and the delta between them
    (here every topic whose object differs)."""
    delta = MetadataDelta(
        created={n: t for n, t in new.topics().items() if old.topic(n) is not t},
        deleted=frozenset(n for n in old.topics() if new.topic(n) is None))
    for _ in replicas.apply(old, new, delta):
        pass


def make(tmp_path, cluster):
    log_manager = LogManager([str(tmp_path / "data")], 1, "c")
    log_manager.open()
    return ReplicaManager(log_manager, lambda topic: LogConfig(), node_id=1, cluster=cluster)


def test_a_cluster_broker_follows_states_even_before_any_broker_is_listed(tmp_path):
    """A restarting cluster's first broker reads the topics before anyone (itself included) has
    registered: it must still host only its own replicas, in the roles the states give."""
    replicas = make(tmp_path, cluster=True)
    topic = TopicMetadata("t", uuid.uuid4(), [(1, 2), (2, 3), (3, 1)], {}, [
        PartitionState(2, 3, (1, 2), 4), PartitionState(2, 1, (2, 3), 1),
        PartitionState(1, 7, (1, 3), 2)])
    empty = MetadataImage.build("c")
    image = empty.with_topic(topic)
    assert not image.brokers
    apply(replicas, empty, image)
    assert replicas.get("t", 1) is None  # not assigned to broker 1
    follower, leader = replicas.get("t", 0), replicas.get("t", 2)
    assert (follower.role, follower.leader_id, follower.leader_epoch) == ("follower", 2, 3)
    assert (leader.role, leader.leader_epoch, leader.isr) == ("leader", 7, {1, 3})
    # An image from before the current epoch (a late notification) changes nothing.
    stale = image.with_topic(topic.with_states([
        PartitionState(1, 2, (1, 2), 9), PartitionState(2, 1, (2, 3), 1),
        PartitionState(3, 6, (3,), 9)]))
    apply(replicas, image, stale)
    assert (follower.role, follower.leader_epoch) == ("follower", 3)
    assert (leader.role, leader.leader_epoch) == ("leader", 7)
    replicas.close()


def test_a_single_node_hosts_everything_as_before(tmp_path):
    replicas = make(tmp_path, cluster=False)
    topic = TopicMetadata("t", uuid.uuid4(), [(0,), (0,)])
    empty = MetadataImage.build("c")
    apply(replicas, empty, empty.with_topic(topic))
    for index in (0, 1):  # node 1 is not in (0,): a single node ignores assignments
        partition = replicas.get("t", index)
        assert (partition.role, partition.leader_epoch, partition.isr) == ("leader", 0, {1})
    replicas.close()
