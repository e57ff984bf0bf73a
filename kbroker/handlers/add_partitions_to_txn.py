"""AddPartitionsToTxn (key 24), v0-5.

v0-3 (clients): one transaction; every partition must exist (UNKNOWN_TOPIC_OR_PARTITION for
those that do not, OPERATION_NOT_ATTEMPTED for the others, nothing added); then the coordinator
adds them (Ongoing, written to ``__transaction_state``) and every partition gets its answer.
v0-1 answer INVALID_PRODUCER_EPOCH where later versions answer PRODUCER_FENCED.
v4+ (KIP-890, broker to coordinator): a batch of transactions, each with ``verify_only``; a
verify-only transaction is checked, not changed: each partition is NONE when it is in the open
transaction, TRANSACTION_ABORTABLE when not. A v4+ batch entry without verify_only adds as v3.
"""

from __future__ import annotations

from kbroker.handlers import handles
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.security.authorizer import Op, ResourceType, allowed


def _exists(ctx, topic: str, index: int) -> bool:
    meta = ctx.metadata.topic(topic)
    return meta is not None and 0 <= index < meta.num_partitions


async def _add(ctx, transactional_id, producer_id, producer_epoch, topics, verify_only):
    """{(topic, partition): error} for one transaction."""
    wanted = [(t.name, p) for t in topics for p in t.partitions]
    if not allowed(ctx, Op.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        return {tp: Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED for tp in wanted}
    denied = {tp for tp in wanted if not allowed(ctx, Op.WRITE, ResourceType.TOPIC, tp[0])}
    if denied:  # checked before existence, as Kafka does
        return {tp: Errors.TOPIC_AUTHORIZATION_FAILED if tp in denied
                else Errors.OPERATION_NOT_ATTEMPTED for tp in wanted}
    # From the metadata image: the coordinator need not host the partitions (a cluster).
    unknown = {tp for tp in wanted if not _exists(ctx, *tp)}
    if unknown:
        return {tp: Errors.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown
                else Errors.OPERATION_NOT_ATTEMPTED for tp in wanted}
    try:
        if verify_only:
            return ctx.txn.verify_partitions(transactional_id, producer_id, producer_epoch,
                                             wanted)
        # v5's adds come from a partition leader for a transactions v2 producer (KIP-890).
        error = await ctx.txn.add_partitions(transactional_id, producer_id, producer_epoch,
                                             wanted, 2 if ctx.api_version >= 5 else 0)
    except KafkaError as exc:
        error = exc.error
    if error is Errors.PRODUCER_FENCED and ctx.api_version < 2:
        error = Errors.INVALID_PRODUCER_EPOCH
    return {tp: error for tp in wanted}


def _topic_results(R, results: dict):
    by_topic: dict[str, list] = {}
    for (topic, partition), error in results.items():
        by_topic.setdefault(topic, []).append(R.AddPartitionsToTxnPartitionResult(
            partition_index=partition, partition_error_code=error.code))
    return [R.AddPartitionsToTxnTopicResult(name=topic, results_by_partition=parts)
            for topic, parts in by_topic.items()]


@handles("AddPartitionsToTxn")
async def handle_add_partitions_to_txn(ctx, request):
    from kbroker.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnResponse as R

    if ctx.api_version < 4:
        results = await _add(ctx, request.v3_and_below_transactional_id,
                             request.v3_and_below_producer_id,
                             request.v3_and_below_producer_epoch, request.v3_and_below_topics,
                             False)
        return R(throttle_time_ms=0, results_by_topic_v3_and_below=_topic_results(R, results))
    out = []
    for txn in request.transactions:
        results = await _add(ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch,
                             txn.topics, txn.verify_only)
        out.append(R.AddPartitionsToTxnResult(transactional_id=txn.transactional_id,
                                              topic_results=_topic_results(R, results)))
    return R(throttle_time_ms=0, error_code=0, results_by_transaction=out)
