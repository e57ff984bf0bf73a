"""FindCoordinator (key 10), v0-6.

Key type 0 (group): this broker, which leads every partition of ``__consumer_offsets``; the topic
is created on the first request (``offsets.topic.num.partitions`` partitions, compacted), as Kafka
does. A shard that is still loading is still named: the group requests themselves answer
COORDINATOR_LOAD_IN_PROGRESS. v4+ (KIP-699) batches keys in ``coordinator_keys``.
Key type 1 (transaction): this broker, which leads every partition of ``__transaction_state``
(created on the first request, ``transaction.state.log.num.partitions`` partitions, compacted).
Not supported: key type 2 (share groups) and unknown types answer INVALID_REQUEST.
"""

from __future__ import annotations

import logging

from kbroker.handlers import handles
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.security.authorizer import Op, ResourceType, allowed

log = logging.getLogger("kbroker.find_coordinator")
GROUP, TRANSACTION = 0, 1


def _find(ctx, key: str | None, key_type: int) -> tuple[Errors, str | None]:
    if key_type == GROUP:
        if key is None:
            return Errors.INVALID_REQUEST, "a group id is required"
        if not allowed(ctx, Op.DESCRIBE, ResourceType.GROUP, key):
            return Errors.GROUP_AUTHORIZATION_FAILED, None
        try:
            ctx.groups.runtime.ensure_topic()
        except KafkaError as exc:
            return exc.error, exc.message
        return Errors.NONE, None
    if key_type == TRANSACTION:
        if not key:
            return Errors.INVALID_REQUEST, "a transactional id is required"
        if not allowed(ctx, Op.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
            return Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None
        try:
            ctx.txn.ensure_topic()
        except KafkaError as exc:
            return exc.error, exc.message
        return Errors.NONE, None
    return Errors.INVALID_REQUEST, f"unsupported coordinator key type {key_type}"


@handles("FindCoordinator")
def handle_find_coordinator(ctx, request):
    from kbroker.protocol.messages.find_coordinator import FindCoordinatorResponse as R

    host, port = ctx.advertised_endpoint()
    if ctx.api_version >= 4:
        coordinators = []
        for key in request.coordinator_keys:
            error, message = _find(ctx, key, request.key_type)
            ok = error is Errors.NONE
            coordinators.append(R.Coordinator(
                key=key, node_id=ctx.node_id if ok else -1, host=host if ok else "",
                port=port if ok else -1, error_code=error.code, error_message=message))
        return R(throttle_time_ms=0, coordinators=coordinators)
    error, message = _find(ctx, request.key, request.key_type)
    ok = error is Errors.NONE
    return R(throttle_time_ms=0, error_code=error.code,
             error_message=message if ctx.api_version >= 1 else None,
             node_id=ctx.node_id if ok else -1, host=host if ok else "",
             port=port if ok else -1)
