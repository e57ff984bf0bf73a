"""OffsetForLeaderEpoch (key 23), v2-4 (what Kafka 4 advertises).

For each partition: the end offset of the largest leader epoch at or below ``leader_epoch``
(the start offset of the next epoch, or the log end offset for the current one) and that epoch,
from the leader's leader-epoch cache (Kafka's LeaderEpochFileCache.endOffsetFor); -1/-1 when the
log knows no such epoch. A follower asks it to find where its log diverged (KIP-101/KIP-279); a
consumer (replica id -1, KIP-320) to detect truncation after a leader change.

``current_leader_epoch`` is fenced (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH); only the leader
answers (NOT_LEADER_OR_FOLLOWER otherwise, also for a partition the cluster hosts elsewhere).
Authorization as Kafka: CLUSTER_ACTION on the cluster allows every topic, otherwise DESCRIBE on
each topic (TOPIC_AUTHORIZATION_FAILED). ``replica_id`` (v3+) is informational here, as in Kafka.
"""

from __future__ import annotations

from kbroker.handlers import handles
from kbroker.handlers.leader_hint import missing_partition_error
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.security.authorizer import Op, ResourceType, allowed


@handles("OffsetForLeaderEpoch")
def handle_offset_for_leader_epoch(ctx, request):
    from kbroker.protocol.messages.offset_for_leader_epoch import \
        OffsetForLeaderEpochResponse as R

    cluster_action = allowed(ctx, Op.CLUSTER_ACTION, ResourceType.CLUSTER)
    topics = []
    for topic in request.topics:
        permitted = cluster_action or allowed(ctx, Op.DESCRIBE, ResourceType.TOPIC, topic.topic)
        partitions = []
        for wanted in topic.partitions:
            out = R.EpochEndOffset(partition=wanted.partition, leader_epoch=-1, end_offset=-1)
            try:
                if not permitted:
                    raise KafkaError(Errors.TOPIC_AUTHORIZATION_FAILED)
                partition = ctx.partitions.get(topic.topic, wanted.partition)
                if partition is None:
                    raise KafkaError(missing_partition_error(
                        ctx, topic.topic, wanted.partition, Errors.UNKNOWN_TOPIC_OR_PARTITION))
                out.leader_epoch, out.end_offset = partition.last_offset_for_leader_epoch(
                    wanted.current_leader_epoch, wanted.leader_epoch)
            except KafkaError as exc:
                out.error_code = exc.error.code
            partitions.append(out)
        topics.append(R.OffsetForLeaderTopicResult(topic=topic.topic, partitions=partitions))
    return R(throttle_time_ms=0, topics=topics)
