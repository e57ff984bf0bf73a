"""Leader elections and reassignments asked for by a client, decided against one image.

Pure functions: each takes the image, the live brokers and the request, and returns the
per-partition outcome and the :class:`MetadataDelta` to commit. The controller runs them as the
validation step of its pipeline, so they always see the image the write will be conditional on.
The rules are Kafka's ZooKeeper controller's:

- **ElectLeaders** (KIP-460): ELECTION_NOT_NEEDED when the preferred replica already leads
  (preferred) or the leader is alive (unclean); PREFERRED_LEADER_NOT_AVAILABLE when the
  preferred replica is dead or out of the ISR; ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica
  can lead; UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist.
- **AlterPartitionReassignments** (KIP-455): a target is checked as
  ``KafkaController.validateReassignment`` does; starting one writes the full replica set
  (target, then original) with the adding and removing replicas, cancelling one puts the
  original back. A target equal to the current set with nothing in progress is already done.
- **Completing a reassignment** (the elected controller, on a settled image): once every target
  replica is in the ISR, the leader moves into the target if it is not there, the removed
  replicas leave the ISR (leader epoch bumped), and the assignment becomes the target, in one
  change.
"""

from __future__ import annotations

import logging

from kbroker.metadata import leader_election
from kbroker.metadata.delta import Assignment, MetadataDelta
from kbroker.metadata.image import MetadataImage, PartitionState, TopicMetadata
from kbroker.metadata.placement import reassignment_problem
from kbroker.protocol.errors import Errors

log = logging.getLogger("kbroker.controller")

Outcome = tuple[Errors, str | None]


def _unknown(name: str, index: int) -> Outcome:
    return (Errors.UNKNOWN_TOPIC_OR_PARTITION, f"The partition {name}-{index} does not exist.")


def _partition(image: MetadataImage, name: str, index: int) -> TopicMetadata | None:
    topic = image.topic(name)
    return topic if topic is not None and 0 <= index < topic.num_partitions else None


# --- ElectLeaders ---------------------------------------------------------------------------------

def elections(image: MetadataImage, live: set[int], preferred: bool, partitions, epoch: int,
              unclean) -> tuple[dict, dict]:
    """(outcomes of the partitions needing no write, states to write) for ElectLeaders on
    ``partitions`` (None: every partition)."""
    if partitions is None:
        partitions = [(t.name, i) for t in image.topics().values()
                      for i in range(t.num_partitions)]
    outcomes, states = {}, {}
    for name, index in partitions:
        topic = _partition(image, name, index)
        if topic is None:
            outcomes[(name, index)] = _unknown(name, index)
            continue
        outcome = _election(topic, index, live, preferred, epoch, unclean)
        if isinstance(outcome, PartitionState):
            states[(name, index)] = outcome
        else:
            outcomes[(name, index)] = outcome
    return outcomes, states


def _election(topic: TopicMetadata, index: int, live: set[int], preferred: bool, epoch: int,
              unclean):
    state, replicas = topic.state(index), topic.assignments[index]
    where = f"{topic.name}-{index}"
    if preferred:
        if replicas and state.leader == replicas[0]:
            return Errors.ELECTION_NOT_NEEDED, None
        changes = leader_election.preferred(_one(topic, index), live, epoch)
        if not changes:
            return (Errors.PREFERRED_LEADER_NOT_AVAILABLE,
                    f"Failed to elect leader for partition {where} under strategy "
                    f"PreferredReplicaPartitionLeaderElectionStrategy")
        return changes[0][2]
    if state.leader in live:
        return Errors.ELECTION_NOT_NEEDED, None
    changes = leader_election.on_live_brokers(_one(topic, index), live, epoch, unclean)
    if not changes or changes[0][2].leader == -1:
        return (Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                f"Failed to elect leader for partition {where} under strategy "
                f"OfflinePartitionLeaderElectionStrategy(true)")
    return changes[0][2]


def _one(topic: TopicMetadata, index: int) -> MetadataImage:
    """An image holding only partition ``index`` of ``topic`` (for the election rules)."""
    states = [PartitionState(-1, -1, ())] * topic.num_partitions
    states[index] = topic.state(index)
    return MetadataImage.build("", [topic.with_states(states)])


# --- reassignments --------------------------------------------------------------------------------

def reassignments(image: MetadataImage, partitions=None) -> dict:
    """(topic, index) -> (replicas, adding, removing) of each reassignment in progress."""
    found = {}
    for topic in image.topics().values():
        for index, (adding, removing) in topic.reassigning.items():
            if partitions is None or (topic.name, index) in partitions:
                if index < topic.num_partitions:
                    found[(topic.name, index)] = (topic.assignments[index], adding, removing)
    return dict(sorted(found.items()))


def alter_reassignments(image: MetadataImage, live: set[int], wanted,
                        allow_replication_factor_change: bool) -> tuple[dict, MetadataDelta]:
    """Start (target replicas) or cancel (None) reassignments of ``[(topic, index, replicas or
    None)]``: (outcome of every partition, NONE for those the delta changes; the assignment
    changes to commit)."""
    outcomes, per_topic = {}, {}
    for name, index, target in wanted:
        topic = _partition(image, name, index)
        if topic is None:
            outcomes[(name, index)] = _unknown(name, index)
            continue
        moving = topic.reassigning.get(index)
        current = topic.assignments[index]
        original = tuple(r for r in current if moving is None or r not in moving[0])
        if target is None:
            if moving is None:
                outcomes[(name, index)] = (Errors.NO_REASSIGNMENT_IN_PROGRESS, None)
            else:
                per_topic.setdefault(name, {})[index] = (original, None)
                outcomes[(name, index)] = (Errors.NONE, None)
            continue
        problem = reassignment_problem(target, live)
        if problem is not None:
            outcomes[(name, index)] = (Errors.INVALID_REPLICA_ASSIGNMENT, problem)
            continue
        if not allow_replication_factor_change and len(target) != len(original):
            outcomes[(name, index)] = (Errors.INVALID_REPLICATION_FACTOR,
                                       "The replication factor is changed from "
                                       f"{len(original)} to {len(target)}")
            continue
        target = tuple(target)
        if target == current and moving is None:
            outcomes[(name, index)] = (Errors.NONE, None)  # already there
            continue
        full = tuple(dict.fromkeys(target + original))
        adding = tuple(r for r in target if r not in original)
        removing = tuple(r for r in original if r not in target)
        per_topic.setdefault(name, {})[index] = (full, (adding, removing))
        outcomes[(name, index)] = (Errors.NONE, None)
    assignments = {name: _reassigned(image.topic(name), changes)
                   for name, changes in per_topic.items()}
    return outcomes, MetadataDelta(assignments=assignments)


def _reassigned(topic: TopicMetadata, changes: dict) -> Assignment:
    """``topic``'s replica sets and reassignments in progress after ``changes``: index ->
    (replicas, (adding, removing) or None when it ends)."""
    assignments = list(topic.assignments)
    reassigning = dict(topic.reassigning)
    for index, (replicas, moving) in changes.items():
        assignments[index] = replicas
        reassigning.pop(index, None)
        if moving is not None and (moving[0] or moving[1]):
            reassigning[index] = moving
        log.info("%s-%d: replicas %s%s", topic.name, index, list(replicas),
                 f" (adding {list(moving[0])}, removing {list(moving[1])})"
                 if moving else " (reassignment ended)")
    return Assignment(tuple(assignments), reassigning)


def completed_reassignments(image: MetadataImage, live: set[int], epoch: int) -> MetadataDelta:
    """The reassignments whose target replicas are all in the ISR, finished: states that move
    the leader into the target and drop the removed replicas, and the target assignments."""
    states, per_topic = {}, {}
    for topic in image.topics().values():
        for index, (adding, removing) in topic.reassigning.items():
            if index >= topic.num_partitions:
                continue
            state = topic.state(index)
            target = tuple(r for r in topic.assignments[index] if r not in removing)
            if state.missing or not all(r in state.isr for r in target):
                continue  # the new replicas are still catching up
            isr = tuple(r for r in state.isr if r in target)
            leader = state.leader
            if leader not in target or leader not in live:
                leader = next((r for r in target if r in isr and r in live), -1)
                if leader == -1:
                    continue
            if leader != state.leader or isr != state.isr:
                states[(topic.name, index)] = PartitionState(
                    leader, state.leader_epoch + 1, isr, state.version, epoch)
            per_topic.setdefault(topic.name, {})[index] = (target, None)
    return MetadataDelta(assignments={name: _reassigned(image.topic(name), changes)
                                      for name, changes in per_topic.items()}, states=states)
