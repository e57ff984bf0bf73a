"""FindCoordinator (key 10), v0-6.

Key type 0 (group): this broker, which leads every partition of ``__consumer_offsets``; the topic
is created on the first request (``offsets.topic.num.partitions`` partitions, compacted), as Kafka
does. A shard that is still loading is still named: the group requests themselves answer
COORDINATOR_LOAD_IN_PROGRESS. v4+ (KIP-699) batches keys in ``coordinator_keys``.
Key type 1 (transaction): this broker, which leads every partition of ``__transaction_state``
(created on the first request, ``transaction.state.log.num.partitions`` partitions, compacted).
Key type 2 (share, KIP-932; v6+, else INVALID_REQUEST): a broker's persister looks up the share
coordinator of ``group:topicId:partition``, the leader of its ``__share_group_state`` partition
(created on the first request). Brokers only: without CLUSTER_ACTION on the cluster every key of
the request answers CLUSTER_AUTHORIZATION_FAILED, as Kafka fails the whole request; a malformed
key answers INVALID_REQUEST. Unknown types answer INVALID_REQUEST.

Cluster mode: the coordinator is the leader of the key's partition of the internal topic
(``partition_for``), with its endpoint on the request's listener; an offline partition answers
COORDINATOR_NOT_AVAILABLE, as does a first creation of the internal topic that fails because
fewer brokers are alive than ``offsets.topic.replication.factor`` /
``transaction.state.log.replication.factor`` (Kafka refuses to create it smaller and the client
retries until enough brokers have joined).
"""

from __future__ import annotations

import logging

from kbroker.coordinator.share.records import parse_coordinator_key
from kbroker.handlers import handles
from kbroker.handlers.metadata import broker_endpoint
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.security.authorizer import Op, ResourceType, allowed

log = logging.getLogger("kbroker.find_coordinator")
GROUP, TRANSACTION, SHARE = 0, 1, 2


async def _find(ctx, key: str | None, key_type: int) -> tuple[Errors, object]:
    if key_type == GROUP:
        if key is None:
            return Errors.INVALID_REQUEST, "a group id is required"
        if not allowed(ctx, Op.DESCRIBE, ResourceType.GROUP, key):
            return Errors.GROUP_AUTHORIZATION_FAILED, None
        return await _ensure(ctx, ctx.groups, key)
    if key_type == TRANSACTION:
        if not key:
            return Errors.INVALID_REQUEST, "a transactional id is required"
        if not allowed(ctx, Op.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
            return Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None
        return await _ensure(ctx, ctx.txn, key)
    if key_type == SHARE:
        if ctx.api_version < 6:
            return Errors.INVALID_REQUEST, None
        try:
            parse_coordinator_key(key or "")
        except ValueError as exc:
            log.info("FindCoordinator: share coordinator key %r is invalid: %s", key, exc)
            return Errors.INVALID_REQUEST, None
        return await _ensure(ctx, ctx.share_coordinator, key)
    return Errors.INVALID_REQUEST, f"unsupported coordinator key type {key_type}"


async def _ensure(ctx, coordinator, key: str):
    """(error, message) or (NONE, (node, host, port)) of the coordinator of ``key``."""
    cluster = bool(ctx.metadata.brokers)
    try:
        await coordinator.runtime.create_topic_if_missing()
    except KafkaError as exc:
        # TOPIC_ALREADY_EXISTS: another broker created it first and this one has not seen it
        # yet; the client retries, as on Kafka (COORDINATOR_NOT_AVAILABLE until it is known).
        if cluster and exc.error in (Errors.INVALID_REPLICATION_FACTOR, Errors.NOT_CONTROLLER,
                                     Errors.TOPIC_ALREADY_EXISTS):
            log.info("cannot create %s yet: %s", coordinator.runtime.topic, exc.message)
            return Errors.COORDINATOR_NOT_AVAILABLE, exc.message
        return exc.error, exc.message
    if not cluster:
        return Errors.NONE, (ctx.node_id, *ctx.advertised_endpoint())
    image = ctx.metadata
    topic = image.topic(coordinator.runtime.topic)
    index = coordinator.partition_for(key)
    leader = topic.state(index).leader if topic is not None else -1
    broker = image.brokers.get(leader)
    endpoint = broker_endpoint(broker, ctx.listener) if broker is not None else None
    if endpoint is None:
        return Errors.COORDINATOR_NOT_AVAILABLE, None
    return Errors.NONE, (leader, *endpoint)


async def _answer(ctx, key, key_type):
    """(error, message, node id, host, port) for one key."""
    error, found = await _find(ctx, key, key_type)
    if error is Errors.NONE:
        return error, None, *found
    return error, found, -1, "", -1


@handles("FindCoordinator")
async def handle_find_coordinator(ctx, request):
    from kbroker.protocol.messages.find_coordinator import FindCoordinatorResponse as R

    if request.key_type == SHARE and ctx.api_version >= 6 and not allowed(
            ctx, Op.CLUSTER_ACTION, ResourceType.CLUSTER):
        error = Errors.CLUSTER_AUTHORIZATION_FAILED
        return R(throttle_time_ms=0, coordinators=[R.Coordinator(
            key=key, node_id=-1, host="", port=-1, error_code=error.code,
            error_message=error.message) for key in request.coordinator_keys])
    if ctx.api_version >= 4:
        coordinators = []
        for key in request.coordinator_keys:
            error, message, node, host, port = await _answer(ctx, key, request.key_type)
            if message is None and request.key_type == SHARE:
                message = ""  # what Kafka's answer carries when it sets none
            coordinators.append(R.Coordinator(
                key=key, node_id=node, host=host, port=port, error_code=error.code,
                error_message=message))
        return R(throttle_time_ms=0, coordinators=coordinators)
    error, message, node, host, port = await _answer(ctx, request.key, request.key_type)
    if message is None and error is not Errors.NONE and request.key_type == SHARE:
        message = error.message  # Kafka's answer to a failed pre-v4 lookup
    return R(throttle_time_ms=0, error_code=error.code,
             error_message=message if ctx.api_version >= 1 else None,
             node_id=node, host=host, port=port)
