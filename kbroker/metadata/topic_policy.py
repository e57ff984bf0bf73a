"""What may be done to topics, decided against one image: the controller's validation step.

Pure functions of an image, the live brokers and the request; each returns the change to make or
raises :class:`KafkaError` with Kafka's error and message. Handlers only translate requests, so
every rule lives here once, for both modes (Kafka's ``ReplicationControlManager``):

- **CreateTopics**, in Kafka's order: an illegal name or one colliding with an existing topic
  once '.' and '_' are unified is INVALID_TOPIC_EXCEPTION; an existing one TOPIC_ALREADY_EXISTS;
  a null config value, or one that fails validation, INVALID_CONFIG; manual assignments need
  ``num_partitions`` and ``replication_factor`` of -1 (INVALID_REQUEST) and must name live
  brokers, each once, for partitions 0..n-1 (INVALID_REPLICA_ASSIGNMENT); without them -1 means
  the broker's default, 0 or below -1 is INVALID_PARTITIONS / INVALID_REPLICATION_FACTOR, and a
  replication factor above the live brokers INVALID_REPLICATION_FACTOR.
- **CreatePartitions**: the count must exceed the current one (INVALID_PARTITIONS), manual
  assignments name one live replica list per new partition; no reassignment may be in progress
  (REASSIGNMENT_IN_PROGRESS).
- **Partition limit**: a change that would bring the cluster past ``MAX_PARTITIONS`` is
  POLICY_VIOLATION before anything is allocated (a fuzzed count of 15 million costs nothing;
  Kafka's controller refuses a request of more than 10,000 records the same way).
- **Internal topics** (``__consumer_offsets``, ``__transaction_state``): Kafka 4's controller
  lets a client delete them or add partitions to them (only ``kafka-topics.sh`` refuses,
  client-side), which silently loses every group's offsets or moves groups to other coordinator
  partitions. We refuse both: deletion is TOPIC_DELETION_DISABLED, growth POLICY_VIOLATION, and
  a ``cleanup.policy`` that no longer compacts INVALID_CONFIG, each naming the topic and why.

Replicas are placed by :mod:`kbroker.metadata.placement` over the live brokers (a single node:
itself). A new topic's partitions start led by their first replica with every replica in sync,
all alive when placed (the ZooKeeper store writes these states; the local store needs none).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Mapping, Sequence

from kbroker.config import ConfigError, validate_topic_configs
from kbroker.metadata.delta import Assignment, MetadataDelta
from kbroker.metadata.image import (MISSING_STATE, MetadataImage, PartitionState, TopicMetadata,
                                    topic_name_problem)
from kbroker.metadata.placement import assign_replicas, check_replication_factor
from kbroker.protocol.errors import Errors, KafkaError

# The most partitions one cluster holds; beyond it a change is refused before any work.
MAX_PARTITIONS = 200_000


@dataclass(frozen=True)
class NewTopic:
    """A CreateTopics entry: -1 partitions or replication factor means the broker's default;
    ``assignments`` (replica lists of partitions 0..n-1) replaces both."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: Sequence[Sequence[int]] | None = None
    configs: Mapping[str, str | None] | None = None


def new_topic(image: MetadataImage, live: Mapping[int, str | None], wanted: NewTopic,
              default_partitions: int, default_replication_factor: int,
              controller_epoch: int = 0) -> TopicMetadata:
    """The topic CreateTopics makes of ``wanted`` (``live``: broker id -> rack)."""
    name = wanted.name
    problem = topic_name_problem(name)
    if problem is not None:
        raise KafkaError(Errors.INVALID_TOPIC_EXCEPTION, problem)
    if image.topic(name) is not None:
        raise KafkaError(Errors.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    if "." in name or "_" in name:
        unified = name.replace(".", "_")
        for existing in image.topics():
            if existing.replace(".", "_") == unified:
                raise KafkaError(Errors.INVALID_TOPIC_EXCEPTION,
                                 f"Topic '{name}' collides with existing topic: {existing}")
    configs = checked_configs(wanted.configs or {})
    if wanted.assignments:
        assignments = manual_assignments(live, wanted)
        check_partition_limit(image, len(assignments))
    else:
        if wanted.replication_factor < -1 or wanted.replication_factor == 0:
            raise KafkaError(Errors.INVALID_REPLICATION_FACTOR,
                             "Replication factor must be larger than 0, or -1 to use the default "
                             "value.")
        if wanted.num_partitions < -1 or wanted.num_partitions == 0:
            raise KafkaError(Errors.INVALID_PARTITIONS,
                             "Number of partitions was set to an invalid non-positive value.")
        partitions = default_partitions if wanted.num_partitions == -1 else wanted.num_partitions
        replication_factor = (default_replication_factor if wanted.replication_factor == -1
                              else wanted.replication_factor)
        check_partition_limit(image, partitions)
        check_replication_factor(replication_factor, len(live))
        assignments = assign_replicas(live, partitions, replication_factor)
    topic_id = uuid.uuid4()
    while topic_id in image.topics_by_id or topic_id.int == 0:
        topic_id = uuid.uuid4()
    return TopicMetadata(name, topic_id, assignments, configs,
                         initial_states(assignments, controller_epoch))


def initial_states(assignments, controller_epoch: int) -> tuple[PartitionState, ...]:
    """The first replica leads at epoch 0, every replica in sync (all alive when placed)."""
    return tuple(PartitionState(r[0] if r else -1, 0, tuple(r), MISSING_STATE.version,
                                controller_epoch) for r in assignments)


def checked_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Topic config overrides as stored (strings), or INVALID_CONFIG naming the key."""
    nulls = [name for name, value in configs.items() if value is None]
    if nulls:
        raise KafkaError(Errors.INVALID_CONFIG,
                         "Null value not supported for topic configs: " + ",".join(nulls))
    try:
        validate_topic_configs(configs)
    except ConfigError as exc:
        raise KafkaError(Errors.INVALID_CONFIG, str(exc)) from None
    return dict(configs)


def manual_assignments(live, wanted: NewTopic) -> list[tuple[int, ...]]:
    """Check manual assignments (live brokers, each once); the replica lists by partition.
    ``wanted.assignments`` maps partition index -> replicas, or lists them in order."""
    if wanted.replication_factor != -1:
        raise KafkaError(Errors.INVALID_REQUEST, "A manual partition assignment was specified, "
                                                 "but replication factor was not set to -1.")
    if wanted.num_partitions != -1:
        raise KafkaError(Errors.INVALID_REQUEST, "A manual partition assignment was specified, "
                                                 "but numPartitions was not set to -1.")
    entries = (wanted.assignments.items() if isinstance(wanted.assignments, Mapping)
               else enumerate(wanted.assignments))
    layout = {}
    for index, replicas in entries:
        if index in layout:
            raise KafkaError(Errors.INVALID_REPLICA_ASSIGNMENT,
                             f"Found multiple manual partition assignments for partition {index}")
        layout[index] = checked_replicas(live, replicas)
    if set(layout) != set(range(len(layout))):
        raise KafkaError(Errors.INVALID_REPLICA_ASSIGNMENT,
                         "partitions should be a consecutive 0-based integer sequence")
    return [layout[p] for p in range(len(layout))]


def checked_replicas(live, broker_ids) -> tuple[int, ...]:
    """Kafka's validateManualPartitionAssignment: live brokers, each named once."""
    if not broker_ids:
        raise KafkaError(Errors.INVALID_REPLICA_ASSIGNMENT,
                         "The manual partition assignment includes an empty replica list.")
    for node in broker_ids:
        if node not in live:
            raise KafkaError(Errors.INVALID_REPLICA_ASSIGNMENT,
                             f"The manual partition assignment includes broker {node}, but no "
                             "such broker is registered.")
    if len(set(broker_ids)) != len(broker_ids):
        seen = set()
        node = next(n for n in broker_ids if n in seen or seen.add(n))
        raise KafkaError(Errors.INVALID_REPLICA_ASSIGNMENT,
                         f"The manual partition assignment includes the broker {node} more "
                         "than once.")
    return tuple(broker_ids)


def new_partitions(image: MetadataImage, live: Mapping[int, str | None], name: str, count: int,
                   assignments: Sequence[Sequence[int]] | None,
                   controller_epoch: int = 0) -> MetadataDelta:
    """CreatePartitions of ``name`` up to ``count``: the grown assignment and the new
    partitions' first states."""
    topic = image.topic(name)
    if topic is None:
        raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION,
                         f"The topic '{name}' does not exist.")
    current = topic.num_partitions
    if count == current:
        raise KafkaError(Errors.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
    if count < current:
        raise KafkaError(Errors.INVALID_PARTITIONS,
                         f"Topic currently has {current} partitions, which is higher than the "
                         f"requested {count}.")
    added = count - current
    if assignments is not None:
        if len(assignments) != added:
            raise KafkaError(Errors.INVALID_REPLICA_ASSIGNMENT,
                             f"Attempted to add {added} additional partition(s), but only "
                             f"{len(assignments)} assignment(s) were specified.")
        assignments = [checked_replicas(live, a) for a in assignments]
    if topic.is_internal:
        raise KafkaError(Errors.POLICY_VIOLATION,
                         f"Cannot add partitions to internal topic {name}: coordinators find "
                         f"their partition by hashing over its partition count, so every group "
                         f"or transaction would move.")
    if topic.reassigning:
        raise KafkaError(Errors.REASSIGNMENT_IN_PROGRESS,
                         f"A partition reassignment is in progress for the topic '{name}'.")
    check_partition_limit(image, added)
    if assignments is None:
        replication_factor = len(topic.assignments[0]) if topic.assignments else 1
        assignments = assign_replicas(live, added, replication_factor, current)
    grown = topic.assignments + tuple(tuple(a) for a in assignments)
    states = {(name, current + i): state for i, state in
              enumerate(initial_states(assignments, controller_epoch))}
    return MetadataDelta(assignments={name: Assignment(grown)}, states=states)


def check_partition_limit(image: MetadataImage, count: int) -> None:
    """POLICY_VIOLATION if ``count`` more partitions would exceed MAX_PARTITIONS."""
    hosted = image.partition_count()
    if count > MAX_PARTITIONS - hosted:
        raise KafkaError(Errors.POLICY_VIOLATION,
                         f"Creating {count} partition(s) would bring the cluster to "
                         f"{hosted + count} partitions; it holds at most {MAX_PARTITIONS}.")


def check_deletable(topic: TopicMetadata) -> None:
    if topic.is_internal:
        raise KafkaError(Errors.TOPIC_DELETION_DISABLED,
                         f"Topic {topic.name} is an internal topic and cannot be deleted: it holds "
                         f"the state of the broker's coordinators.")


SHARE_STATE_TOPIC = "__share_group_state"


def check_topic_configs(topic: TopicMetadata, configs: Mapping[str, str]) -> None:
    """An internal topic must stay compacted: retention would delete coordinator state. Except
    ``__share_group_state``, which Kafka keeps with ``cleanup.policy=delete`` and infinite
    retention: its ShareUpdate records are deltas on the last snapshot, so compacting them (or
    expiring them) would lose state."""
    if not topic.is_internal:
        return
    if topic.name == SHARE_STATE_TOPIC:
        policy = [p.strip() for p in configs.get("cleanup.policy", "delete").split(",")]
        retention = str(configs.get("retention.ms", "-1")).strip()
        if "compact" in policy or retention != "-1":
            raise KafkaError(Errors.INVALID_CONFIG,
                             f"{topic.name} must keep cleanup.policy=delete and retention.ms=-1: "
                             f"its records are deltas on a snapshot, and compaction or retention "
                             f"would lose share partition state.")
        return
    policy = configs.get("cleanup.policy", "compact")
    if "compact" not in [p.strip() for p in policy.split(",")]:
        raise KafkaError(Errors.INVALID_CONFIG,
                         f"cleanup.policy of internal topic {topic.name} must include 'compact': "
                         f"with '{policy}' retention would delete coordinator state.")


def existing(image: MetadataImage, name: str) -> TopicMetadata:
    topic = image.topic(name)
    if topic is None:
        raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
    return topic
