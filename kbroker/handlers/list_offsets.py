"""ListOffsets (key 2), v1-11.

Special timestamps: -1 latest (the high watermark, or the last stable offset for read_committed),
-2 earliest (log start offset), -3 the offset of the largest timestamp (v7+, KIP-734), -4 earliest
local (v8+, KIP-405; the log start offset here, with no tiered storage), -5 latest tiered (v9+;
no tiered storage, so offset -1). Any other value finds the first offset whose timestamp is at or
after it, through the time index; none found gives offset -1 and timestamp -1.
``current_leader_epoch`` (v4+) is checked like Fetch. Offsets above the high watermark are never
returned to consumers.
"""

from __future__ import annotations

from kbroker.handlers import handles
from kbroker.protocol.errors import Errors, KafkaError

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
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
                if partition is None:
                    raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION)
                partition.check_leader_epoch(wanted.current_leader_epoch)
                offset, timestamp, epoch = _lookup(partition, wanted.timestamp, read_committed)
                out.offset, out.timestamp = offset, timestamp
                out.leader_epoch = epoch if ctx.api_version >= 4 else -1  # LeaderEpoch is v4+
            except KafkaError as exc:
                out.error_code = exc.error.code
            partitions.append(out)
        topics.append(R.ListOffsetsTopicResponse(name=topic.name, partitions=partitions))
    return R(throttle_time_ms=0, topics=topics)


def _lookup(partition, timestamp: int, read_committed: bool):
    log = partition.log
    epoch = partition.leader_epoch
    if timestamp == LATEST:
        offset = partition.last_stable_offset if read_committed else partition.high_watermark
        return offset, -1, epoch
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return partition.log_start_offset, -1, epoch
    if timestamp == LATEST_TIERED:
        return -1, -1, -1
    if timestamp == MAX_TIMESTAMP:
        found = log.max_timestamp_offset()
    elif timestamp < 0:
        raise KafkaError(Errors.INVALID_REQUEST, f"unknown special timestamp {timestamp}")
    else:
        found = log.offset_for_timestamp(timestamp)
    if found is None:
        return -1, -1, -1
    offset, found_timestamp, found_epoch = found
    if offset >= partition.high_watermark:
        return -1, -1, -1
    return offset, found_timestamp, found_epoch
