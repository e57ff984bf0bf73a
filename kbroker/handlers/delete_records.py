"""DeleteRecords (key 21), v0-2.

Moves a partition's log start offset forward (KIP-107): records below it become unreadable at once
and whole segments below it are deleted. Per partition:
- offset -1 means the high watermark (delete everything committed);
- an offset above the high watermark, or below -1, is OFFSET_OUT_OF_RANGE;
- an offset at or below the current log start offset changes nothing and is not an error;
- the answer's ``low_watermark`` is the log start offset afterwards (-1 with an error);
- a partition this broker does not host is UNKNOWN_TOPIC_OR_PARTITION.
Kafka waits (up to ``timeout_ms``) for followers to move their log start offset too; with one
replica the new low watermark is final as soon as the leader's log has moved, so we answer at once.
v1 is v0 with throttling after the response (KIP-219); v2 is flexible.
"""

from __future__ import annotations

import logging

from kbroker.handlers import handles
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.security.authorizer import Op, ResourceType, check

log = logging.getLogger("kbroker.delete_records")


@handles("DeleteRecords")
def handle_delete_records(ctx, request):
    from kbroker.protocol.messages.delete_records import DeleteRecordsResponse as R

    replicas = ctx.partitions
    topics = []
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            out = R.DeleteRecordsPartitionResult(partition_index=wanted.partition_index,
                                                 low_watermark=-1)
            partition = replicas.get(topic.name, wanted.partition_index)
            try:
                check(ctx, Op.DELETE, ResourceType.TOPIC, topic.name)
                if partition is None:
                    raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION)
                out.low_watermark = delete_records(partition, wanted.offset)
            except KafkaError as exc:
                log.info("DeleteRecords %s-%d before %d from %s: %s", topic.name,
                         wanted.partition_index, wanted.offset, ctx.client_id, exc)
                out.error_code = exc.code
            partitions.append(out)
        topics.append(R.DeleteRecordsTopicResult(name=topic.name, partitions=partitions))
    return R(throttle_time_ms=0, topics=topics)


def delete_records(partition, offset: int) -> int:
    """Make ``offset`` (-1: the high watermark) the log start offset; the new log start offset."""
    before = partition.log_start_offset
    after = partition.delete_records_before(offset)
    if after != before:
        log.info("log start offset of %s-%d moved from %d to %d (DeleteRecords)",
                 partition.topic, partition.index, before, after)
    return after
