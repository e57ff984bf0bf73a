"""ListOffsets (key 2), v1-11.

Answered by the partition (:meth:`Partition.offset_for_timestamp`, Kafka's
Partition.fetchOffsetForTimestamp over the log's own offset-by-timestamp code). Special
timestamps: -1 latest (the high watermark, or the last stable offset for read_committed, with the
current leader epoch), -2 earliest (log start offset, with the epoch of the leader-epoch cache's
first entry when it covers the log start offset, else -1), -3 the offset of the largest timestamp
(v7+, KIP-734), -4 earliest local (v8+, KIP-405; answered as earliest, with no tiered storage), -5
latest tiered (v9+; no tiered storage, so offset -1). Any other value finds the first offset whose
timestamp is at or after it, through the time index; none found gives offset -1, timestamp -1.
``current_leader_epoch`` (v4+) is checked like Fetch. Offsets at or above the high watermark are
never returned to consumers; a request from a replica id other than -1 is bounded by the log end
offset instead, as in Kafka. A partition hosted elsewhere in a cluster, or followed here, answers
NOT_LEADER_OR_FOLLOWER (ListOffsets has no KIP-951 leader fields).
"""

from __future__ import annotations

from kbroker.handlers import handles
from kbroker.handlers.leader_hint import missing_partition_error
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.security.authorizer import Op, ResourceType, check

READ_COMMITTED = 1


@handles("ListOffsets")
def handle_list_offsets(ctx, request):
    from kbroker.protocol.messages.list_offsets import ListOffsetsResponse as R

    read_committed = request.isolation_level == READ_COMMITTED
    topics = []
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            out = R.ListOffsetsPartitionResponse(partition_index=wanted.partition_index,
                                                 timestamp=-1, offset=-1, leader_epoch=-1)
            partition = ctx.partitions.get(topic.name, wanted.partition_index)
            try:
                check(ctx, Op.DESCRIBE, ResourceType.TOPIC, topic.name)
                if partition is None:
                    raise KafkaError(missing_partition_error(
                        ctx, topic.name, wanted.partition_index,
                        Errors.UNKNOWN_TOPIC_OR_PARTITION))
                partition.check_leader_epoch(wanted.current_leader_epoch)
                found = partition.offset_for_timestamp(wanted.timestamp, read_committed,
                                                       request.replica_id)
                if found is not None:
                    out.offset, out.timestamp, epoch = found
                    out.leader_epoch = epoch if ctx.api_version >= 4 else -1  # LeaderEpoch: v4+
            except KafkaError as exc:
                out.error_code = exc.error.code
            partitions.append(out)
        topics.append(R.ListOffsetsTopicResponse(name=topic.name, partitions=partitions))
    return R(throttle_time_ms=0, topics=topics)
