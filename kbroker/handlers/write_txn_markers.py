"""WriteTxnMarkers (key 27), v1-2 (what Kafka 4 advertises): a transaction coordinator asks the
leader to write COMMIT/ABORT markers for a producer into partitions.

Each partition's marker goes through its Partition (or, for ``__consumer_offsets``, through the
group coordinator, which settles the transaction's offsets); the answer for a partition comes once
the marker is committed. Errors per partition: UNKNOWN_TOPIC_OR_PARTITION for a partition this
broker does not have, INVALID_PRODUCER_EPOCH for a marker older than the producer's epoch,
TRANSACTION_COORDINATOR_FENCED for one from an older coordinator epoch. Our own coordinator
writes local markers directly (same code); this API serves coordinators on other brokers.
v2's ``transaction_version`` 2 says the coordinator bumped the producer's epoch for the marker
(transactions v2), so the partition takes only a newer epoch (KAFKA-19999,
:mod:`kbroker.log.producer_state`).
"""

from __future__ import annotations

import asyncio

from kbroker.handlers import handles
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.security.authorizer import Op, ResourceType, allowed


@handles("WriteTxnMarkers")
async def handle_write_txn_markers(ctx, request):
    from kbroker.protocol.messages.write_txn_markers import WriteTxnMarkersResponse as R

    # Only brokers send markers: CLUSTER_ACTION on the cluster, else every partition is denied.
    denied = not allowed(ctx, Op.CLUSTER_ACTION, ResourceType.CLUSTER)
    # Every marker is appended first, then all commits are awaited together: one partition
    # waiting for its followers does not hold back the others.
    waits = []
    for marker in request.markers:
        for topic in marker.topics:
            for index in topic.partition_indexes:
                waits.append(_write(ctx, denied, marker, topic.name, index))
    errors = iter(await asyncio.gather(*waits))
    return R(markers=[R.WritableTxnMarkerResult(producer_id=marker.producer_id, topics=[
        R.WritableTxnMarkerTopicResult(name=topic.name, partitions=[
            R.WritableTxnMarkerPartitionResult(partition_index=index, error_code=next(errors).code)
            for index in topic.partition_indexes])
        for topic in marker.topics]) for marker in request.markers])


def _write(ctx, denied: bool, marker, topic: str, index: int):
    """Appends the marker now; an awaitable of its error once committed."""
    try:
        if denied:
            raise KafkaError(Errors.CLUSTER_AUTHORIZATION_FAILED)
        committed = ctx.txn.write_marker(topic, index, marker.producer_id, marker.producer_epoch,
                                         marker.coordinator_epoch, marker.transaction_result,
                                         marker.transaction_version)
    except KafkaError as exc:
        return _done(exc.error)
    return _committed(committed)


async def _done(error: Errors) -> Errors:
    return error


async def _committed(committed: asyncio.Future) -> Errors:
    try:
        # Shielded: a closed connection must not cancel the partition's commit future.
        await asyncio.shield(committed)
        return Errors.NONE
    except KafkaError as exc:
        return exc.error
