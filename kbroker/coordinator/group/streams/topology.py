"""A streams group's topology (what its members sent on joining) and its configured form against
the topics that exist (Kafka's StreamsTopology and InternalTopicManager).

The topology: subtopologies, each with its source topics, the repartition topics it writes to and
reads from, its state changelog topics (with the partitions, replication factor and configs the
application asks for) and its copartition groups (indexes into its source and repartition source
topics). It is written once, by the first member, as a StreamsGroupTopology record.

Configuring it, in Kafka's order:
1. every source topic must exist, else the status MISSING_SOURCE_TOPICS ("Source topics a, b
   are missing.") and no tasks;
2. repartition topics without a partition count get one by a fixed-point over the
   subtopologies (the most partitions among the source topics of the subtopology writing to
   it); a loop that never resolves, or a repartition source topic nobody writes to, is the error
   STREAMS_INVALID_TOPOLOGY;
3. copartition groups: repartition topics in a group take the partition count of its external
   topics (which must all agree, else INCORRECTLY_PARTITIONED_TOPICS), or of its fixed
   repartition topics, or the largest of them;
4. changelog topics get the task count of their subtopology (its most partitioned source);
5. internal topics that exist must have the decided count (INCORRECTLY_PARTITIONED_TOPICS);
   those missing are to be created (the status MISSING_INTERNAL_TOPICS; the heartbeat's handler
   creates them with the configs and replication factor the topology names).

The result is a :class:`ConfiguredTopology`: ready (each subtopology's task count) or not, with
the status to report and the topics to create. It is derived, never stored: a group recomputes it
when its topology, or the metadata of the topics it uses, changed.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field
from types import MappingProxyType

from kbroker.protocol.errors import Errors, KafkaError
from kbroker.protocol.messages.streams_group_topology_value import StreamsGroupTopologyValue as V

log = logging.getLogger("kbroker.coordinator.group")


class Status(enum.IntEnum):
    """The status codes of StreamsGroupHeartbeat."""
    STALE_TOPOLOGY = 0
    MISSING_SOURCE_TOPICS = 1
    INCORRECTLY_PARTITIONED_TOPICS = 2
    MISSING_INTERNAL_TOPICS = 3
    SHUTDOWN_APPLICATION = 4
    ASSIGNMENT_DELAYED = 5
    MISSING_CLIENT_TAGS = 6


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: int = 0           # 0: decided by the coordinator
    replication_factor: int = 0   # 0: the broker's default
    configs: tuple = ()           # ((key, value), ...) in the application's order


@dataclass(frozen=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple = ()
    source_topic_regex: tuple = ()
    state_changelog_topics: tuple = ()      # TopicInfo
    repartition_sink_topics: tuple = ()
    repartition_source_topics: tuple = ()   # TopicInfo
    copartition_groups: tuple = ()          # ((source idx...), (regex idx...), (repart idx...))

    def copartitioned_topic_sets(self) -> list[set]:
        """The topics of each copartition group. An index outside the subtopology's topics
        cannot come from Kafka Streams: STREAMS_INVALID_TOPOLOGY (Kafka fails on it with an
        internal error)."""
        out = []
        for sources, _regexes, repartitions in self.copartition_groups:
            for index, topics in ((i, self.source_topics) for i in sources):
                if not 0 <= index < len(topics):
                    raise invalid_topology(f"Copartition group of subtopology "
                                           f"{self.subtopology_id} refers to source topic "
                                           f"index {index}, which does not exist.")
            for index in repartitions:
                if not 0 <= index < len(self.repartition_source_topics):
                    raise invalid_topology(f"Copartition group of subtopology "
                                           f"{self.subtopology_id} refers to repartition source "
                                           f"topic index {index}, which does not exist.")
            out.append({self.source_topics[i] for i in sources}
                       | {self.repartition_source_topics[i].name for i in repartitions})
        return out


@dataclass(frozen=True)
class StreamsTopology:
    epoch: int
    subtopologies: MappingProxyType   # id -> Subtopology

    @classmethod
    def from_request(cls, topology) -> "StreamsTopology":
        """From StreamsGroupHeartbeat's Topology."""
        return cls(topology.epoch, MappingProxyType({
            s.subtopology_id: Subtopology(
                s.subtopology_id, tuple(s.source_topics), tuple(s.source_topic_regex),
                tuple(_topic_info(t) for t in s.state_changelog_topics),
                tuple(s.repartition_sink_topics),
                tuple(_topic_info(t) for t in s.repartition_source_topics),
                tuple((tuple(g.source_topics), tuple(g.source_topic_regex),
                       tuple(g.repartition_source_topics)) for g in s.copartition_groups))
            for s in topology.subtopologies}))

    @classmethod
    def from_record(cls, value: V) -> "StreamsTopology":
        return cls.from_request(value)  # the record has the request's shape

    def to_record(self) -> V:
        def info(t: TopicInfo):
            return V.TopicInfo(name=t.name, partitions=t.partitions,
                               replication_factor=t.replication_factor,
                               topic_configs=[V.TopicConfig(key=k, value=v) for k, v in t.configs])
        return V(epoch=self.epoch, subtopologies=[
            V.Subtopology(subtopology_id=s.subtopology_id, source_topics=list(s.source_topics),
                          source_topic_regex=list(s.source_topic_regex),
                          state_changelog_topics=[info(t) for t in s.state_changelog_topics],
                          repartition_sink_topics=list(s.repartition_sink_topics),
                          repartition_source_topics=[info(t) for t in
                                                     s.repartition_source_topics],
                          copartition_groups=[V.CopartitionGroup(
                              source_topics=list(a), source_topic_regex=list(b),
                              repartition_source_topics=list(c))
                              for a, b, c in s.copartition_groups])
            for s in self.subtopologies.values()])

    def required_topics(self) -> set:
        """Source, repartition source and changelog topics (what the group's metadata hash
        covers and what it follows for changes)."""
        out = set()
        for s in self.subtopologies.values():
            out.update(s.source_topics)
            out.update(t.name for t in s.repartition_source_topics)
            out.update(t.name for t in s.state_changelog_topics)
        return out

    def source_topic_subtopologies(self) -> dict:
        """Topic -> subtopology id, for the source and repartition source topics."""
        out = {}
        for s in self.subtopologies.values():
            for topic in s.source_topics:
                out[topic] = s.subtopology_id
            for t in s.repartition_source_topics:
                out[t.name] = s.subtopology_id
        return out


def _topic_info(t) -> TopicInfo:
    configs = tuple((c.key, c.value) for c in (t.topic_configs or ()))
    return TopicInfo(t.name, t.partitions, t.replication_factor, configs)


# --- configured topology ---------------------------------------------------------------------------

@dataclass(frozen=True)
class InternalTopic:
    name: str
    partitions: int
    replication_factor: int | None   # None: the broker's default
    configs: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ConfiguredSubtopology:
    number_of_tasks: int
    source_topics: frozenset
    repartition_source_topics: dict   # name -> InternalTopic
    repartition_sink_topics: frozenset
    state_changelog_topics: dict      # name -> InternalTopic

    @property
    def stateful(self) -> bool:
        return bool(self.state_changelog_topics)

    def input_topics(self) -> set:
        return set(self.source_topics) | set(self.repartition_source_topics)


class TopicConfigurationError(Exception):
    """The topics do not fit the topology yet: reported as a status, not an error."""

    def __init__(self, status: Status, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class ConfiguredTopology:
    epoch: int
    metadata_hash: int
    subtopologies: dict | None          # sorted id -> ConfiguredSubtopology; None when not ready
    topics_to_create: dict              # name -> InternalTopic
    problem: TopicConfigurationError | None

    @property
    def ready(self) -> bool:
        return self.problem is None


def invalid_topology(message: str) -> KafkaError:
    return KafkaError(Errors.STREAMS_INVALID_TOPOLOGY, message)


def configure(group_id: str, member_id: str, metadata_hash: int, topology: StreamsTopology,
              image) -> ConfiguredTopology:
    """The topology against the topics of ``image``; raises KafkaError STREAMS_INVALID_TOPOLOGY
    when it cannot work whatever the topics."""
    subtopologies = list(topology.subtopologies.values())
    try:
        _check_source_topics(subtopologies, image)
        decided: dict = {}

        def count(topic: str) -> int | None:
            existing = image.topic(topic)
            if existing is not None:
                return existing.num_partitions
            return decided.get(topic)

        decided.update(_repartition_counts(subtopologies, count))
        _enforce_copartitioning(subtopologies, decided, count)
        decided.update(_changelog_counts(subtopologies, count))
        configured = {s.subtopology_id: _configured(s, count, decided)
                      for s in sorted(subtopologies, key=lambda s: s.subtopology_id)}
        to_create = _missing_internal_topics(configured, topology, image)
    except TopicConfigurationError as problem:
        log.warning("group %s (member %s): topic configuration failed for topology epoch %d: %s",
                    group_id, member_id, topology.epoch, problem.message)
        return ConfiguredTopology(topology.epoch, metadata_hash, None, {}, problem)
    problem = None
    if to_create:
        problem = TopicConfigurationError(Status.MISSING_INTERNAL_TOPICS,
                                          f"Internal topics are missing: "
                                          f"{summarize(to_create)}")
        log.info("group %s (member %s): valid topic configuration, but internal topics are "
                 "missing for topology epoch %d: %s", group_id, member_id, topology.epoch,
                 summarize(to_create))
    else:
        log.info("group %s (member %s): valid topic configuration; topology epoch %d is now "
                 "initialized", group_id, member_id, topology.epoch)
    return ConfiguredTopology(topology.epoch, metadata_hash, configured, to_create, problem)


def summarize(topics) -> str:
    """At most three names, then how many more (Kafka's summary)."""
    topics = list(topics)
    if not topics:
        return "<none>"
    shown = ", ".join(topics[:3])
    if len(topics) > 3:
        shown += f" and {len(topics) - 3} additional topics"
    return shown


def _check_source_topics(subtopologies, image) -> None:
    missing = sorted({t for s in subtopologies for t in s.source_topics
                      if image.topic(t) is None})
    if missing:
        raise TopicConfigurationError(Status.MISSING_SOURCE_TOPICS,
                                      f"Source topics {summarize(missing)} are missing.")


def _repartition_counts(subtopologies, count) -> dict:
    """Partition counts of the repartition topics: fixed by the topology, or the most
    partitions among the inputs of the subtopology writing to them, to a fixed point."""
    counts = {t.name: t.partitions for s in subtopologies for t in s.repartition_source_topics
              if t.partitions != 0}
    while True:
        needed = progress = False
        for s in subtopologies:
            for sink in s.repartition_sink_topics:
                if sink in counts:
                    continue
                candidates = [counts[t.name] for t in s.repartition_source_topics
                              if t.name in counts]
                candidates += [c for c in (count(t) for t in s.source_topics) if c is not None]
                if candidates:
                    counts[sink] = max(candidates)
                    progress = True
                else:
                    needed = True
        if not needed:
            break
        if not progress:
            raise invalid_topology("Failed to compute number of partitions for all repartition "
                                   "topics. There may be loops in the topology that cannot be "
                                   "resolved.")
    for s in subtopologies:
        if any(t.name not in counts for t in s.repartition_source_topics):
            raise invalid_topology("Failed to compute number of partitions for all repartition "
                                   "topics, because a repartition source topic is never used as "
                                   "a sink topic.")
    return counts


def _enforce_copartitioning(subtopologies, decided: dict, count) -> None:
    fixed = {t.name for s in subtopologies for t in s.repartition_source_topics
             if t.partitions != 0}
    flexible = {t.name for s in subtopologies for t in s.repartition_source_topics
                if t.partitions == 0}
    for s in subtopologies:
        for group in s.copartitioned_topic_sets():
            if not group:
                continue
            repartition = {t: _known(count, t) for t in group if t in fixed or t in flexible}
            external = {t: _known(count, t) for t in group if t not in repartition}
            if set(group) == set(repartition):
                if fixed:
                    # Kafka checks every fixed repartition topic of the topology, not only
                    # this group's.
                    first = _known(count, next(iter(fixed)))
                    if any(_known(count, t) != first for t in fixed):
                        raise TopicConfigurationError(
                            Status.INCORRECTLY_PARTITIONED_TOPICS,
                            f"Following topics do not have the same number of partitions: "
                            f"[{_sorted_map(repartition)}]")
                    wanted = first
                else:
                    wanted = max(repartition.values())
                    if wanted == 0:
                        raise invalid_topology("All topics in the copartition group had "
                                               "undefined partition number: "
                                               f"[{', '.join(sorted(repartition))}]")
            else:
                values = set(external.values())
                if len(values) > 1:
                    raise TopicConfigurationError(
                        Status.INCORRECTLY_PARTITIONED_TOPICS,
                        f"Following topics do not have the same number of partitions: "
                        f"[{_sorted_map(external)}]")
                wanted = next(iter(values))
            for topic, partitions in repartition.items():
                if topic in fixed and partitions != wanted:
                    raise TopicConfigurationError(
                        Status.INCORRECTLY_PARTITIONED_TOPICS,
                        f"Number of partitions [{partitions}] of repartition topic [{topic}] "
                        f"doesn't match number of partitions [{wanted}] of the source topic.")
                decided[topic] = wanted


def _known(count, topic: str) -> int:
    value = count(topic)
    if value is None:
        raise KafkaError(Errors.UNKNOWN_SERVER_ERROR,
                         f"Number of partitions is not set for topic: {topic}")
    return value


def _sorted_map(counts: dict) -> str:
    """As Java prints a TreeMap: {a=1, b=2}."""
    return "{" + ", ".join(f"{t}={counts[t]}" for t in sorted(counts)) + "}"


def _changelog_counts(subtopologies, count) -> dict:
    out = {}
    for s in subtopologies:
        inputs = list(s.source_topics) + [t.name for t in s.repartition_source_topics]
        if not inputs:
            raise invalid_topology(f"No source topics found for subtopology {s.subtopology_id}")
        tasks = max(_known(count, t) for t in inputs)
        for t in s.state_changelog_topics:
            out[t.name] = tasks
    return out


def _internal(t: TopicInfo, decided: dict) -> InternalTopic:
    partitions = t.partitions if t.partitions != 0 else decided[t.name]
    return InternalTopic(t.name, partitions, t.replication_factor or None, dict(t.configs))


def _configured(s: Subtopology, count, decided: dict) -> ConfiguredSubtopology:
    inputs = list(s.source_topics) + [t.name for t in s.repartition_source_topics]
    return ConfiguredSubtopology(
        max(_known(count, t) for t in inputs), frozenset(s.source_topics),
        {t.name: _internal(t, decided) for t in s.repartition_source_topics},
        frozenset(s.repartition_sink_topics),
        {t.name: _internal(t, decided) for t in s.state_changelog_topics})


def _missing_internal_topics(configured: dict, topology: StreamsTopology, image) -> dict:
    to_create = {}
    for s in configured.values():
        to_create.update(s.repartition_source_topics)
        to_create.update(s.state_changelog_topics)
    for topic in sorted(topology.required_topics()):
        existing = image.topic(topic)
        if existing is None:
            continue
        expected = to_create.pop(topic, None)
        if expected is not None and existing.num_partitions != expected.partitions:
            raise TopicConfigurationError(
                Status.INCORRECTLY_PARTITIONED_TOPICS,
                f"Existing topic {topic} has different number of partitions: expected "
                f"{expected.partitions}, found {existing.num_partitions}")
    return to_create
