"""EndTxn (key 26), v0-4: commit or abort the producer's transaction.

The coordinator writes PrepareCommit/PrepareAbort and answers once it is committed; the markers
and the Complete record follow (requests meanwhile get CONCURRENT_TRANSACTIONS). A retry of a
completed commit/abort answers NONE; the other state combinations INVALID_TXN_STATE. v0-1 answer
INVALID_PRODUCER_EPOCH where later versions answer PRODUCER_FENCED.
Not supported: v5 (KIP-890 transactions v2, whose epoch bump on every EndTxn needs
``transaction.version`` 2); not advertised.
"""

from __future__ import annotations

from kbroker.handlers import handles
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.security.authorizer import Op, ResourceType, check


@handles("EndTxn")
async def handle_end_txn(ctx, request):
    from kbroker.protocol.messages.end_txn import EndTxnResponse as R

    try:
        check(ctx, Op.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
        error = await ctx.txn.end_txn(request.transactional_id, request.producer_id,
                                      request.producer_epoch, request.committed)
    except KafkaError as exc:
        error = exc.error
    if error is Errors.PRODUCER_FENCED and ctx.api_version < 2:
        error = Errors.INVALID_PRODUCER_EPOCH
    return R(throttle_time_ms=0, error_code=error.code)
