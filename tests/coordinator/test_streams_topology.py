"""A streams topology configured against the topics that exist, as Kafka 4.4.0's
InternalTopicManager does it: statuses, partition counts of internal topics, and errors."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kbroker.coordinator.group.streams.topology import Status, StreamsTopology, configure
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.protocol.messages.streams_group_heartbeat import StreamsGroupHeartbeatRequest as Q


class Image:
    def __init__(self, **topics):
        self.topics = topics

    def topic(self, name):
        n = self.topics.get(name)
        return None if n is None else SimpleNamespace(num_partitions=n)


def topology(*subtopologies):
    return StreamsTopology.from_request(Q.Topology(epoch=0, subtopologies=list(subtopologies)))


def sub(sid, sources=(), sinks=(), repartition=(), changelogs=(), copartition=()):
    return Q.Subtopology(
        subtopology_id=sid, source_topics=list(sources), repartition_sink_topics=list(sinks),
        repartition_source_topics=[Q.TopicInfo(name=n, partitions=p) for n, p in repartition],
        state_changelog_topics=[Q.TopicInfo(name=n) for n in changelogs],
        copartition_groups=[Q.CopartitionGroup(source_topics=list(s),
                                               repartition_source_topics=list(r))
                            for s, r in copartition])


def test_repartition_and_changelog_counts_and_tasks():
    t = topology(sub("0", sources=["a", "b"], sinks=["rep"]),
                 sub("1", repartition=[("rep", 0)], changelogs=["store"]))
    c = configure("g", "m", 0, t, Image(a=2, b=5))
    assert c.problem.status is Status.MISSING_INTERNAL_TOPICS
    assert {n: i.partitions for n, i in c.topics_to_create.items()} == {"rep": 5, "store": 5}
    assert {s: x.number_of_tasks for s, x in c.subtopologies.items()} == {"0": 5, "1": 5}
    ready = configure("g", "m", 0, t, Image(a=2, b=5, rep=5, store=5))
    assert ready.ready and ready.topics_to_create == {}


def test_missing_source_topics_are_summarized():
    t = topology(sub("0", sources=["d", "a", "c", "b", "e"]))
    c = configure("g", "m", 0, t, Image())
    assert (c.problem.status, c.problem.message) == (
        Status.MISSING_SOURCE_TOPICS,
        "Source topics a, b, c and 2 additional topics are missing.")


def test_copartitioned_sources_must_agree():
    t = topology(sub("0", sources=["a", "b"], copartition=[((0, 1), ())]))
    c = configure("g", "m", 0, t, Image(a=2, b=3))
    assert (c.problem.status, c.problem.message) == (
        Status.INCORRECTLY_PARTITIONED_TOPICS,
        "Following topics do not have the same number of partitions: [{a=2, b=3}]")


def test_copartitioned_repartition_topic_follows_the_source():
    t = topology(sub("0", sources=["a"], sinks=["rep"]),
                 sub("1", sources=["b"], repartition=[("rep", 0)], copartition=[((0,), (0,))]))
    c = configure("g", "m", 0, t, Image(a=8, b=3))
    assert c.topics_to_create["rep"].partitions == 3


def test_existing_internal_topic_with_other_partition_count():
    t = topology(sub("0", sources=["a"], changelogs=["store"]))
    c = configure("g", "m", 0, t, Image(a=4, store=2))
    assert (c.problem.status, c.problem.message) == (
        Status.INCORRECTLY_PARTITIONED_TOPICS,
        "Existing topic store has different number of partitions: expected 4, found 2")


def test_unresolvable_topologies():
    never_written = topology(sub("0", repartition=[("rep", 0)]))
    with pytest.raises(KafkaError) as e:
        configure("g", "m", 0, never_written, Image())
    assert e.value.error is Errors.STREAMS_INVALID_TOPOLOGY
    assert "never used as a sink topic" in e.value.message
    no_source = topology(sub("0", changelogs=["store"]))
    with pytest.raises(KafkaError) as e:
        configure("g", "m", 0, no_source, Image())
    assert e.value.message == "No source topics found for subtopology 0"
