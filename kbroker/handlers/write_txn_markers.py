"""WriteTxnMarkers (key 27), v1-2 (what Kafka 4 advertises): a transaction coordinator asks the
leader to write COMMIT/ABORT markers for a producer into partitions.

Each partition's marker goes through its Partition (or, for ``__consumer_offsets``, through the
group coordinator, which settles the transaction's offsets); the answer for a partition comes once
the marker is committed. Errors per partition: UNKNOWN_TOPIC_OR_PARTITION for a partition this
broker does not have, INVALID_PRODUCER_EPOCH for a marker older than the producer's epoch,
TRANSACTION_COORDINATOR_FENCED for one from an older coordinator epoch. Our own coordinator
writes local markers directly (same code); this API serves coordinators on other brokers.
Not supported: ``transaction_version`` 2 markers (v2's field is accepted and not used).
"""

from __future__ import annotations

import asyncio

from kbroker.handlers import handles
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.security.authorizer import Op, ResourceType, allowed


@handles("WriteTxnMarkers")
async def handle_write_txn_markers(ctx, request):
    from kbroker.protocol.messages.write_txn_markers import WriteTxnMarkersResponse as R

    markers = []
    # Only brokers send markers: CLUSTER_ACTION on the cluster, else every partition is denied.
    denied = not allowed(ctx, Op.CLUSTER_ACTION, ResourceType.CLUSTER)
    for marker in request.markers:
        topics = []
        for topic in marker.topics:
            results = []
            for index in topic.partition_indexes:
                try:
                    if denied:
                        raise KafkaError(Errors.CLUSTER_AUTHORIZATION_FAILED)
                    committed = ctx.txn.write_marker(topic.name, index, marker.producer_id,
                                                     marker.producer_epoch,
                                                     marker.coordinator_epoch,
                                                     marker.transaction_result)
                    await asyncio.shield(committed)
                    error = Errors.NONE
                except KafkaError as exc:
                    error = exc.error
                results.append(R.WritableTxnMarkerPartitionResult(partition_index=index,
                                                                  error_code=error.code))
            topics.append(R.WritableTxnMarkerTopicResult(name=topic.name, partitions=results))
        markers.append(R.WritableTxnMarkerResult(producer_id=marker.producer_id, topics=topics))
    return R(markers=markers)
