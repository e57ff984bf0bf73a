"""EndTxn (key 26), v0-5: commit or abort the producer's transaction.

The coordinator writes PrepareCommit/PrepareAbort and answers once it is committed; the markers
and the Complete record follow (requests meanwhile get CONCURRENT_TRANSACTIONS). v0-4
(transactions v1): a retry of a completed commit/abort answers NONE; the other state combinations
INVALID_TXN_STATE. v5 (KIP-890 part 2, transactions v2): every EndTxn bumps the producer epoch
(a new producer id when the epoch runs out) and the response carries the producer id and epoch
the producer goes on with; the retry and abort rules of :mod:`kbroker.coordinator.txn.operations`.
A client picks v5 only when ``transaction.version`` is finalized at 2 (ApiVersions); like Kafka,
the broker serves v5 whatever the level. v0-1 answer INVALID_PRODUCER_EPOCH where later versions
answer PRODUCER_FENCED.
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
        if not request.transactional_id:
            raise KafkaError(Errors.INVALID_REQUEST, "an empty transactional id")
        error, producer_id, epoch = await ctx.txn.end_txn(
            request.transactional_id, request.producer_id, request.producer_epoch,
            request.committed, tv2=ctx.api_version >= 5)
    except KafkaError as exc:
        error, producer_id, epoch = exc.error, -1, -1
    if error is Errors.PRODUCER_FENCED and ctx.api_version < 2:
        error = Errors.INVALID_PRODUCER_EPOCH
    return R(throttle_time_ms=0, error_code=error.code, producer_id=producer_id,
             producer_epoch=epoch)
