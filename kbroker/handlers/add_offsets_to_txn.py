"""AddOffsetsToTxn (key 25), v0-4: add the group's ``__consumer_offsets`` partition to the
transaction, so TxnOffsetCommit may follow and EndTxn writes a marker there. Errors as
AddPartitionsToTxn (v0-1 INVALID_PRODUCER_EPOCH where later versions answer PRODUCER_FENCED).
"""

from __future__ import annotations

from kbroker.handlers import handles
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.security.authorizer import Op, ResourceType, check


@handles("AddOffsetsToTxn")
async def handle_add_offsets_to_txn(ctx, request):
    from kbroker.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnResponse as R

    try:
        check(ctx, Op.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
        check(ctx, Op.READ, ResourceType.GROUP, request.group_id)
        await ctx.groups.runtime.ensure_topic()
        error = await ctx.txn.add_offsets(request.transactional_id, request.producer_id,
                                          request.producer_epoch, request.group_id)
    except KafkaError as exc:
        error = exc.error
    if error is Errors.PRODUCER_FENCED and ctx.api_version < 2:
        error = Errors.INVALID_PRODUCER_EPOCH
    return R(throttle_time_ms=0, error_code=error.code)
