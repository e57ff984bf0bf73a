"""What ShareFetch (78) and ShareAcknowledge (79) check alike, as Kafka's KafkaApis.

- The request: a null group id, or a member id empty or longer than 36 characters, is
  INVALID_REQUEST for the whole request; READ on the group is needed
  (GROUP_AUTHORIZATION_FAILED).
- Each partition's acknowledgement batches (validateAcknowledgementBatches): first offset after
  last offset, a batch starting before the previous one ended (a batch may start *at* the
  previous batch's last offset: Kafka compares with ``<``), no types, a per-offset types list
  of the wrong length, a type outside 0..3 (0..4 from v2, KIP-1222's RENEW), or RENEW outside a
  renew-ack request: INVALID_REQUEST for that partition.
- A partition is then answered TOPIC_AUTHORIZATION_FAILED without READ on its topic and
  UNKNOWN_TOPIC_OR_PARTITION when the metadata has no such partition.
"""

from __future__ import annotations

from kbroker.coordinator.share.persister import SharePartitionKey
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.replica.partition import LEADER
from kbroker.security.authorizer import Op, ResourceType, allowed

MAX_MEMBER_ID_LENGTH = 36
RENEW = 4


def check_request(ctx, group_id, member_id) -> KafkaError | None:
    if group_id is None:
        return KafkaError(Errors.INVALID_REQUEST, "the group id is null")
    if not allowed(ctx, Op.READ, ResourceType.GROUP, group_id):
        return KafkaError(Errors.GROUP_AUTHORIZATION_FAILED)
    if not member_id or len(member_id) > MAX_MEMBER_ID_LENGTH:
        return KafkaError(Errors.INVALID_REQUEST, "the member id must be 1 to 36 characters")
    return None


def batches_error(batches, version: int, is_renew_ack: bool) -> bool:
    """Whether the acknowledgement batches of one partition are malformed."""
    max_type = RENEW if version >= 2 else 3
    previous_end = -1
    for batch in batches:
        types = batch.acknowledge_types
        if batch.first_offset > batch.last_offset or batch.first_offset < previous_end:
            return True
        if not types:
            return True
        if len(types) > 1 and batch.last_offset - batch.first_offset != len(types) - 1:
            return True
        if any(t < 0 or t > max_type for t in types):
            return True
        if RENEW in types and not is_renew_ack:
            return True
        previous_end = batch.last_offset
    return False


def topic_name(ctx, topic_id):
    meta = ctx.metadata.topic_by_id(topic_id)
    return meta.name if meta is not None else None


def partition_error(ctx, name: str | None, index: int) -> Errors | None:
    """TOPIC_AUTHORIZATION_FAILED / UNKNOWN_TOPIC_OR_PARTITION / NOT_LEADER_OR_FOLLOWER, or None
    when this broker leads the partition."""
    if name is None:
        return Errors.UNKNOWN_TOPIC_ID
    if not allowed(ctx, Op.READ, ResourceType.TOPIC, name):
        return Errors.TOPIC_AUTHORIZATION_FAILED
    replica = ctx.partitions.get(name, index)
    if replica is None:
        metadata = ctx.metadata.topic(name)
        if metadata is not None and 0 <= index < metadata.num_partitions:
            return Errors.NOT_LEADER_OR_FOLLOWER
        return Errors.UNKNOWN_TOPIC_OR_PARTITION
    if replica.role != LEADER:
        return Errors.NOT_LEADER_OR_FOLLOWER
    return None


def acknowledgements(ctx, group_id, topics, version: int, is_renew_ack: bool):
    """Split a request's acknowledgements into (errors {(topic id, index): Errors}, acks
    [(SharePartitionKey, [(first, last, types)])]) for the manager."""
    errors, acks = {}, []
    for topic in topics:
        name = topic_name(ctx, topic.topic_id)
        for partition in topic.partitions:
            batches = partition.acknowledgement_batches
            key = (topic.topic_id, partition.partition_index)
            if not batches:
                continue
            if batches_error(batches, version, is_renew_ack):
                errors[key] = Errors.INVALID_REQUEST
                continue
            error = partition_error(ctx, name, partition.partition_index)
            if error is not None:
                errors[key] = (Errors.UNKNOWN_TOPIC_OR_PARTITION
                               if error == Errors.UNKNOWN_TOPIC_ID else error)
                continue
            acks.append((SharePartitionKey(group_id, topic.topic_id, partition.partition_index),
                         [(b.first_offset, b.last_offset, list(b.acknowledge_types))
                          for b in batches]))
    return errors, acks
