"""The share coordinator's inter-broker APIs (KIP-932), with the versions Kafka 4.4.0 serves:
InitializeShareGroupState (83) v0, ReadShareGroupState (84) v0, WriteShareGroupState (85) v0-1
(v1 carries the delivery complete count), DeleteShareGroupState (86) v0 and
ReadShareGroupStateSummary (87) v0-1 (v1 answers the delivery complete count).

A broker's persister sends these to the broker leading the key's partition of
``__share_group_state`` (kbroker.coordinator.share.coordinator); here each share partition of the
request runs on the local shard, as Kafka's ShareCoordinatorService does, and answers by itself:
NOT_COORDINATOR when this broker does not host its shard, the shard's refusals otherwise.

As Kafka: without CLUSTER_ACTION on the cluster every partition answers
CLUSTER_AUTHORIZATION_FAILED; a request with no group id, no topics or a topic without
partitions gets an empty answer; the answer lists topics and their partitions in the order of
Kafka's HashMaps (by hash bucket), which clients do not depend on but a byte comparison does.
"""

from __future__ import annotations

import asyncio
import logging

from kbroker.coordinator.share import operations as ops
from kbroker.coordinator.share.persister import (ReadResult, SharePartitionKey, StateBatch,
                                                 SummaryResult, WriteResult)
from kbroker.handlers import handles
from kbroker.protocol.errors import Errors
from kbroker.security.authorizer import Op, ResourceType, allowed

log = logging.getLogger("kbroker.share_coordinator")


@handles("InitializeShareGroupState")
async def handle_initialize(ctx, request):
    from kbroker.protocol.messages.initialize_share_group_state import \
        InitializeShareGroupStateResponse as R

    return await _serve(ctx, request, R, R.InitializeStateResult, "initialize", WriteResult,
                        lambda key, p: ops.initialize(key, p.state_epoch, p.start_offset),
                        _write_partition(R.PartitionResult))


@handles("ReadShareGroupState")
async def handle_read(ctx, request):
    from kbroker.protocol.messages.read_share_group_state import ReadShareGroupStateResponse as R

    def partition(index: int, result: ReadResult):
        if result.error is not Errors.NONE:
            return R.PartitionResult(partition=index, error_code=result.error.code,
                                     error_message=result.error_message)
        return R.PartitionResult(
            partition=index, state_epoch=result.state_epoch, start_offset=result.start_offset,
            state_batches=[R.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                        delivery_state=b.delivery_state,
                                        delivery_count=b.delivery_count)
                           for b in result.batches])

    return await _serve(ctx, request, R, R.ReadStateResult, "read", ReadResult,
                        lambda key, p: ops.read(key, p.leader_epoch), partition)


@handles("WriteShareGroupState")
async def handle_write(ctx, request):
    from kbroker.protocol.messages.write_share_group_state import \
        WriteShareGroupStateResponse as R

    def op(key, p):
        batches = [StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                   for b in p.state_batches]
        return ops.write(key, p.state_epoch, p.leader_epoch, p.start_offset, batches,
                         p.delivery_complete_count)

    return await _serve(ctx, request, R, R.WriteStateResult, "write", WriteResult, op,
                        _write_partition(R.PartitionResult))


@handles("DeleteShareGroupState")
async def handle_delete(ctx, request):
    from kbroker.protocol.messages.delete_share_group_state import \
        DeleteShareGroupStateResponse as R

    return await _serve(ctx, request, R, R.DeleteStateResult, "delete", WriteResult,
                        lambda key, p: ops.delete(key), _write_partition(R.PartitionResult))


@handles("ReadShareGroupStateSummary")
async def handle_read_summary(ctx, request):
    from kbroker.protocol.messages.read_share_group_state_summary import \
        ReadShareGroupStateSummaryResponse as R

    def partition(index: int, result: SummaryResult):
        if result.error is not Errors.NONE:
            return R.PartitionResult(partition=index, error_code=result.error.code,
                                     error_message=result.error_message)
        return R.PartitionResult(
            partition=index, state_epoch=result.state_epoch, leader_epoch=result.leader_epoch,
            start_offset=result.start_offset,
            delivery_complete_count=result.delivery_complete_count)

    return await _serve(ctx, request, R, R.ReadStateSummaryResult, "read summary",
                        SummaryResult, lambda key, p: ops.read_summary(key, p.leader_epoch),
                        partition)


def _write_partition(cls):
    def build(index: int, result: WriteResult):
        if result.error is Errors.NONE:
            return cls(partition=index)
        return cls(partition=index, error_code=result.error.code,
                   error_message=result.error_message)
    return build


async def _serve(ctx, request, response_cls, topic_cls, verb: str, result_cls, make_op,
                 build_partition):
    if not allowed(ctx, Op.CLUSTER_ACTION, ResourceType.CLUSTER):
        error = Errors.CLUSTER_AUTHORIZATION_FAILED
        return response_cls(results=[topic_cls(topic_id=t.topic_id, partitions=[
            build_partition(p.partition, result_cls(error, error.message))
            for p in t.partitions]) for t in request.topics])
    if not request.group_id or not request.topics or any(not t.partitions
                                                         for t in request.topics):
        log.warning("%s share group state: a request without a group id, topics or "
                    "partitions gets an empty answer", verb)
        return response_cls(results=[])
    # topic id -> partition -> its operation's result, in Kafka's HashMap order; a partition
    # named twice runs twice and answers once (the last), as there.
    runs: dict = {}
    for t in request.topics:
        for p in t.partitions:
            key = SharePartitionKey(request.group_id, t.topic_id, p.partition)
            runs.setdefault(t.topic_id, {})[p.partition] = _run(ctx, key, make_op(key, p),
                                                               result_cls, verb)
    flat = [(topic_id, index, coro) for topic_id, parts in runs.items()
            for index, coro in parts.items()]
    results = await asyncio.gather(*(coro for _, _, coro in flat))
    answers: dict = {}
    for (topic_id, index, _), result in zip(flat, results):
        answers.setdefault(topic_id, {})[index] = result
    return response_cls(results=[
        topic_cls(topic_id=topic_id, partitions=[
            build_partition(index, answers[topic_id][index])
            for index in java_hash_order(answers[topic_id], _int_hash)])
        for topic_id in java_hash_order(answers, _uuid_hash)])


async def _run(ctx, key: SharePartitionKey, op, result_cls, verb: str):
    coordinator = ctx.share_coordinator
    result = await coordinator.run(key, op, result_cls)
    if result.error in (Errors.NOT_COORDINATOR, Errors.COORDINATOR_LOAD_IN_PROGRESS,
                        Errors.COORDINATOR_NOT_AVAILABLE):
        # Kafka words what the coordinator runtime raised this way.
        result = result_cls(result.error,
                            f"Unable to {verb} share group state: {result.error_message}")
    return result


def _int_hash(value: int) -> int:
    return value  # Java's Integer.hashCode


def _uuid_hash(topic_id) -> int:
    """Kafka's ``Uuid.hashCode``: the two halves of msb ^ lsb, xored."""
    value = topic_id.int
    h = (value >> 64) ^ (value & (1 << 64) - 1)
    return _int32((h >> 32) ^ h)


def _int32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def java_hash_order(keys, hash_of) -> list:
    """``keys`` (inserted in this order) as a Java HashMap of default capacity iterates them:
    by bucket, then insertion order within a bucket (a resize keeps that order)."""
    keys = list(keys)
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2

    def bucket(k) -> int:
        h = _int32(hash_of(k)) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(keys, key=bucket)  # stable: insertion order within a bucket
