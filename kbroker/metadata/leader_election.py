"""Leader election: which partition states the controller changes, decided from one image.

Pure functions over an image and the set of live brokers; the elected controller
(``zk.duties``) and ElectLeaders (``partition_changes``) write what they return through the
controller, each write conditional on the state version the image shows. Kafka's
ZooKeeper controller rules (``PartitionStateMachine``, ``Election.scala``,
``KafkaController.onReplicasBecomeOffline``):

- **Leader lost** (dead, or shutting down): the new leader is the first replica of the
  assignment that is alive and in the ISR (``offlinePartitionLeaderElection``); the ISR loses
  the brokers that are gone. With none in the ISR alive, the partition goes offline (leader
  -1) keeping its last in-sync replica in the ISR (Kafka never empties an ISR), unless
  ``unclean.leader.election.enable`` lets the first live replica lead with an ISR of itself,
  accepting the loss of what only the ISR had.
- **Offline partition** (leader -1) with an ISR member back: that member leads.
- **A follower lost**: the leader stays and the ISR drops the dead broker (or a broker no longer
  in the assignment, after a cancelled reassignment).
- **Preferred leader** (ElectLeaders, ``auto.leader.rebalance.enable``): the first replica of
  the assignment takes over when it is alive, in the ISR and not leading.

Every change bumps the leader epoch (Kafka's ZooKeeper controller does, ISR-only changes
included), so replicas fence requests from the old leadership.
"""

from __future__ import annotations

from typing import Callable, Iterator

from kbroker.metadata.image import MetadataImage, PartitionState, TopicMetadata

Change = tuple[str, int, PartitionState]  # topic, partition, the state to write


def _next(state: PartitionState, leader: int, isr, controller_epoch: int) -> PartitionState:
    return PartitionState(leader, state.leader_epoch + 1, tuple(isr), state.version,
                          controller_epoch)


def _partitions(image: MetadataImage) -> Iterator[tuple[TopicMetadata, int, PartitionState]]:
    for topic in image.topics().values():
        if not topic.states:
            continue
        for index, state in enumerate(topic.states):
            if state.leader_epoch >= 0:  # -1: the state znode is not there yet
                yield topic, index, state


def on_live_brokers(image: MetadataImage, live: set[int], controller_epoch: int,
                    unclean: Callable[[TopicMetadata], bool]) -> list[Change]:
    """The state changes that bring every partition in line with the live brokers."""
    changes = []
    for topic, index, state in _partitions(image):
        replicas = topic.assignments[index]
        # A broker that is no longer a replica (a cancelled reassignment) counts as gone.
        here = live & set(replicas)
        live_isr = [r for r in state.isr if r in here]
        if state.leader in here:
            if len(live_isr) != len(state.isr):
                changes.append((topic.name, index,
                                _next(state, state.leader, live_isr, controller_epoch)))
            continue
        candidates = [r for r in replicas if r in live_isr]
        if candidates:
            leader = candidates[0]
            changes.append((topic.name, index, _next(state, leader, live_isr, controller_epoch)))
            continue
        live_replicas = [r for r in replicas if r in here]
        if live_replicas and unclean(topic):
            leader = live_replicas[0]
            changes.append((topic.name, index, _next(state, leader, (leader,), controller_epoch)))
            continue
        if state.leader != -1:
            last = state.leader if state.leader in state.isr else (state.isr or (-1,))[0]
            isr = (last,) if last != -1 else ()
            changes.append((topic.name, index, _next(state, -1, isr, controller_epoch)))
    return changes


def preferred(image: MetadataImage, live: set[int], controller_epoch: int,
              wanted: set[tuple[str, int]] | None = None) -> list[Change]:
    """Move leadership to the preferred replica where it can lead now (of ``wanted``
    partitions, or all)."""
    changes = []
    for topic, index, state in _partitions(image):
        if wanted is not None and (topic.name, index) not in wanted:
            continue
        replicas = topic.assignments[index]
        if not replicas:
            continue
        first = replicas[0]
        if state.leader != first and first in live and first in state.isr:
            changes.append((topic.name, index, _next(state, first, state.isr, controller_epoch)))
    return changes


def imbalanced_brokers(image: MetadataImage, percentage: int) -> set[int]:
    """Brokers whose share of partitions led by someone else, among those it is preferred
    for, exceeds ``leader.imbalance.per.broker.percentage`` (Kafka's
    ``checkAndTriggerAutoLeaderRebalance``)."""
    preferred_count: dict[int, int] = {}
    not_leading: dict[int, int] = {}
    for topic, index, state in _partitions(image):
        replicas = topic.assignments[index]
        if not replicas:
            continue
        first = replicas[0]
        preferred_count[first] = preferred_count.get(first, 0) + 1
        if state.leader != first:
            not_leading[first] = not_leading.get(first, 0) + 1
    return {b for b, total in preferred_count.items()
            if not_leading.get(b, 0) * 100 > percentage * total}
