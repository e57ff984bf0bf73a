"""Where a partition's leader is, for answers that say "not here" (KIP-951).

Produce (v10+) and Fetch (v12+) answer NOT_LEADER_OR_FOLLOWER with the partition's
``current_leader`` (id and epoch) and the response's ``node_endpoints`` (v10+ / v16+) naming
that leader's host and port, so a client moves at once instead of refreshing its metadata first.
Everything comes from the current metadata image; on a single node there is nowhere else to go,
so nothing is added.
"""

from __future__ import annotations

from kbroker.protocol.errors import Errors, KafkaError


def missing_partition_error(ctx, topic: str | None, index: int, unknown):
    """The error for a partition this broker does not host: in a cluster, a partition the
    metadata knows is hosted elsewhere (NOT_LEADER_OR_FOLLOWER, as Kafka's
    getPartitionOrError); otherwise ``unknown`` (UNKNOWN_TOPIC_OR_PARTITION / _ID)."""
    image = ctx.metadata
    if topic is not None and image.brokers:
        metadata = image.topic(topic)
        if metadata is not None and 0 <= index < metadata.num_partitions:
            return Errors.NOT_LEADER_OR_FOLLOWER
    return unknown


def current_leader(ctx, topic: str | None, index: int) -> tuple[int, int] | None:
    """``(leader id, leader epoch)`` of the partition in the current image, or None (a single
    node, or a partition the image does not know)."""
    image = ctx.metadata
    if topic is None or not image.brokers:
        return None
    metadata = image.topic(topic)
    if metadata is None or not 0 <= index < metadata.num_partitions:
        return None
    state = metadata.state(index)
    return state.leader, state.leader_epoch


def node_endpoints(ctx, leader_ids, NodeEndpoint) -> list:
    """The endpoints (on the listener this request came in on) of the given live brokers."""
    brokers = ctx.metadata.brokers
    out = []
    for node_id in sorted({i for i in leader_ids if i >= 0}):
        broker = brokers.get(node_id)
        if broker is None or not broker.endpoints:
            continue
        endpoint = broker.endpoints.get(ctx.listener) or next(iter(broker.endpoints.values()))
        out.append(NodeEndpoint(node_id=node_id, host=endpoint[0], port=endpoint[1],
                                rack=broker.rack))
    return out


def is_not_leader(exc: KafkaError) -> bool:
    return exc.error == Errors.NOT_LEADER_OR_FOLLOWER
