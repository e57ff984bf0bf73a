"""DescribeTopicPartitions (key 75), v0 (KIP-966): Metadata's topic half, paginated.

Kafka 4.x's Admin client describes topics with it when a broker advertises it (``describeTopics``,
``kafka-topics.sh --describe``) and falls back to Metadata otherwise. Answered as Kafka's
DescribeTopicPartitionsRequestHandler and KRaftMetadataCache.describeTopicResponse do:

- the topics asked for (every topic, internal ones included, when the list is empty), sorted by
  name, from the cursor's topic on (its partitions from the cursor's index);
- at most ``ResponsePartitionLimit`` partitions in one answer, capped by the broker's
  ``max.request.partition.size.limit`` (2000) and at least 1. When the limit ends inside a
  topic, ``NextCursor`` names that topic and the first partition not sent; when it ends between
  topics, the next topic at partition 0 (which need not exist);
- each partition: leader (-1 when it is offline; the partition's error code stays 0, as
  Kafka's), leader epoch, replicas, ISR, offline replicas; the eligible-leader-replica lists
  (KIP-966) are empty, as on a Kafka cluster without ``eligible.leader.replicas.version``
  (kbroker has no ELR);
- a named topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an
  illegal name); listed only when topics were named;
- DESCRIBE on each topic: a named topic without it is TOPIC_AUTHORIZATION_FAILED whether or not
  it exists (after the others, as Kafka's), an unnamed one is left out; every other entry
  carries its authorized operations.

A cursor whose topic is not in a non-empty topic list, or with a negative partition index, fails
the whole request with INVALID_REQUEST: every named topic gets the error, as Kafka's
``getErrorResponse`` answers.
"""

from __future__ import annotations

import logging

from kbroker.handlers import handles
from kbroker.metadata.image import INTERNAL_TOPICS, topic_name_problem
from kbroker.protocol.errors import Errors
from kbroker.protocol.primitives import ZERO_UUID
from kbroker.security.authorizer import Op, ResourceType, allowed, authorized_operations

log = logging.getLogger("kbroker.describe_topic_partitions")
NOT_REQUESTED = -(2**31)  # the field's default: no authorized operations given


@handles("DescribeTopicPartitions")
def handle_describe_topic_partitions(ctx, request):
    from kbroker.protocol.messages.describe_topic_partitions import \
        DescribeTopicPartitionsResponse as R

    image = ctx.metadata
    named = [t.name for t in request.topics]
    cursor = request.cursor
    first = cursor.topic_name if cursor is not None else ""
    candidates = set(named) if named else set(image.topics())
    candidates = sorted(n for n in candidates if n >= first)
    if cursor is not None and ((named and cursor.topic_name not in candidates)
                               or cursor.partition_index < 0):
        log.info("DescribeTopicPartitions from %s: invalid cursor %s-%d", ctx.client_id,
                 cursor.topic_name, cursor.partition_index)
        return R(throttle_time_ms=0, next_cursor=None, topics=[
            R.DescribeTopicPartitionsResponseTopic(
                error_code=Errors.INVALID_REQUEST.code, name=name, topic_id=ZERO_UUID,
                is_internal=False, partitions=[], topic_authorized_operations=NOT_REQUESTED)
            for name in named])
    wanted, denied = [], []
    for name in candidates:
        (wanted if allowed(ctx, Op.DESCRIBE, ResourceType.TOPIC, name) else denied).append(name)
    limit = max(min(ctx.config.get("max.request.partition.size.limit"),
                    request.response_partition_limit), 1)
    response = R(throttle_time_ms=0, topics=[], next_cursor=None)
    remaining = limit
    for name in wanted:
        if remaining == 0:
            # Every partition of the topics before fitted: go on from this one (which need
            # not exist).
            response.next_cursor = R.Cursor(topic_name=name, partition_index=0)
            break
        topic = image.topic(name)
        if topic is None:
            if named:  # listing every topic, one deleted meanwhile is skipped
                error = Errors.INVALID_TOPIC_EXCEPTION if topic_name_problem(name) \
                    else Errors.UNKNOWN_TOPIC_OR_PARTITION
                response.topics.append(_topic(R, ctx, error, name, ZERO_UUID,
                                              name in INTERNAL_TOPICS, []))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        end = min(topic.num_partitions, start + remaining)
        response.topics.append(_topic(R, ctx, Errors.NONE, name, topic.topic_id,
                                      topic.is_internal, _partitions(R, ctx, topic, start, end)))
        if end < topic.num_partitions:
            response.next_cursor = R.Cursor(topic_name=name, partition_index=end)
            break
        remaining -= max(end - start, 0)
    if named:  # denied names are told apart only when named, as Kafka's
        response.topics.extend(R.DescribeTopicPartitionsResponseTopic(
            error_code=Errors.TOPIC_AUTHORIZATION_FAILED.code, name=name, topic_id=ZERO_UUID,
            is_internal=False, partitions=[], topic_authorized_operations=NOT_REQUESTED)
            for name in denied)
    return response


def _topic(R, ctx, error: Errors, name: str, topic_id, is_internal: bool, partitions: list):
    return R.DescribeTopicPartitionsResponseTopic(
        error_code=error.code, name=name, topic_id=topic_id, is_internal=is_internal,
        partitions=partitions,
        topic_authorized_operations=authorized_operations(ctx, ResourceType.TOPIC, name))


def _partitions(R, ctx, topic, start: int, end: int) -> list:
    P = R.DescribeTopicPartitionsResponsePartition
    out = []
    if topic.states:  # a cluster: from the partition states and the live brokers
        live = ctx.metadata.brokers
        for index in range(start, end):
            state, replicas = topic.state(index), topic.assignments[index]
            out.append(P(error_code=0, partition_index=index,
                         leader_id=state.leader if state.leader in live else -1,
                         leader_epoch=state.leader_epoch, replica_nodes=list(replicas),
                         isr_nodes=list(state.isr), eligible_leader_replicas=[],
                         last_known_elr=[],
                         offline_replicas=[r for r in replicas if r not in live]))
        return out
    node = ctx.node_id
    for index in range(start, end):
        partition = ctx.partitions.get(topic.name, index)
        out.append(P(error_code=0, partition_index=index, leader_id=node,
                     leader_epoch=partition.leader_epoch if partition is not None else 0,
                     replica_nodes=[node], isr_nodes=[node], eligible_leader_replicas=[],
                     last_known_elr=[], offline_replicas=[]))
    return out
