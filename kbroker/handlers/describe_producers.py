"""DescribeProducers (key 61), v0: the active producers of each requested partition.

Per producer, from the partition's producer state: producer id, epoch, last sequence, last
timestamp (of its last batch), the epoch of the coordinator that wrote its last marker, and the
first offset of its open transaction (-1 if none) — what ``kafka-transactions.sh
describe-producers``, ``find-hanging`` and ``abort`` read. Errors per partition as Kafka's
``ReplicaManager.activeProducerState``: UNKNOWN_TOPIC_OR_PARTITION for a partition that does not
exist, NOT_LEADER_OR_FOLLOWER for one this broker does not host.
Not supported: ACLs (TOPIC_AUTHORIZATION_FAILED comes with them).
"""

from __future__ import annotations

from kbroker.handlers import handles
from kbroker.protocol.errors import Errors
from kbroker.security.authorizer import Op, ResourceType, allowed


@handles("DescribeProducers")
def handle_describe_producers(ctx, request):
    from kbroker.protocol.messages.describe_producers import DescribeProducersResponse as R

    image = ctx.metadata
    topics = []
    for topic in request.topics:
        metadata = image.topic(topic.name)
        answers = []
        denied = not allowed(ctx, Op.READ, ResourceType.TOPIC, topic.name)
        for index in topic.partition_indexes:
            partition = ctx.partitions.get(topic.name, index)
            if denied:
                answers.append(R.PartitionResponse(
                    partition_index=index, error_code=Errors.TOPIC_AUTHORIZATION_FAILED.code))
                continue
            if partition is None:
                exists = metadata is not None and 0 <= index < metadata.num_partitions
                error = Errors.NOT_LEADER_OR_FOLLOWER if exists else Errors.UNKNOWN_TOPIC_OR_PARTITION
                answers.append(R.PartitionResponse(
                    partition_index=index, error_code=error.code))
                continue
            answers.append(R.PartitionResponse(
                partition_index=index, error_code=0, active_producers=[
                    R.ProducerState(
                        producer_id=p.producer_id, producer_epoch=p.producer_epoch,
                        last_sequence=p.last_seq, last_timestamp=p.last_timestamp,
                        coordinator_epoch=p.coordinator_epoch,
                        current_txn_start_offset=p.current_txn_first_offset)
                    for p in partition.active_producers()]))
        topics.append(R.TopicResponse(name=topic.name, partitions=answers))
    return R(throttle_time_ms=0, topics=topics)
