"""InitProducerId (key 22), v0-5 (Apache Kafka 4.4.0 stops at v5: v6, two-phase commit (KIP-939),
is still marked unstable in its schema and not advertised).

Without a transactional id: a fresh producer id with epoch 0. From v3 (KIP-360) an idempotent
producer may send its current id and epoch to bump the epoch after an error; we give back the
same id with epoch + 1, or a new id when the epoch would overflow.
With a transactional id: the transaction coordinator (:mod:`kbroker.coordinator.txn.operations`):
new ids, epoch bumps, fencing of an older instance (its open transaction is aborted and the caller
gets CONCURRENT_TRANSACTIONS until that is done), ``transaction.timeout.ms`` checked against
``transaction.max.timeout.ms`` (INVALID_TRANSACTION_TIMEOUT). An empty transactional id is
INVALID_REQUEST, as in Kafka. Coordinator errors (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS)
are answered as such. v4+ answers PRODUCER_FENCED, older versions INVALID_PRODUCER_EPOCH (which
their clients know).
"""

from __future__ import annotations

import logging

from kbroker.handlers import handles
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.security.authorizer import Op, ResourceType, check, may_write_idempotently

log = logging.getLogger("kbroker.producer_ids")
MAX_EPOCH = 32767


@handles("InitProducerId")
async def handle_init_producer_id(ctx, request):
    from kbroker.protocol.messages.init_producer_id import InitProducerIdResponse as R

    if request.transactional_id is not None:
        return await _transactional(ctx, request, R)
    if not may_write_idempotently(ctx):
        return R(error_code=Errors.CLUSTER_AUTHORIZATION_FAILED.code, producer_id=-1,
                 producer_epoch=-1)
    ids = ctx.producer_ids
    if request.producer_id >= 0 and 0 <= request.producer_epoch < MAX_EPOCH - 1:
        return R(producer_id=request.producer_id, producer_epoch=request.producer_epoch + 1)
    try:
        await ids.ready()
        return R(producer_id=ids.next_id(), producer_epoch=0)
    except KafkaError as exc:
        return R(error_code=exc.code, producer_id=-1, producer_epoch=-1)


async def _transactional(ctx, request, R):
    transactional_id = request.transactional_id
    if transactional_id == "":
        return R(error_code=Errors.INVALID_REQUEST.code, producer_id=-1, producer_epoch=-1)
    producer_id = request.producer_id if ctx.api_version >= 3 else -1
    producer_epoch = request.producer_epoch if ctx.api_version >= 3 else -1
    try:
        check(ctx, Op.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)
        error, pid, epoch = await ctx.txn.init_producer_id(
            transactional_id, request.transaction_timeout_ms, producer_id, producer_epoch)
    except KafkaError as exc:
        error, pid, epoch = exc.error, -1, -1
    if error is Errors.PRODUCER_FENCED and ctx.api_version < 4:
        error = Errors.INVALID_PRODUCER_EPOCH
    if error is not Errors.NONE and error is not Errors.CONCURRENT_TRANSACTIONS:
        log.info("InitProducerId for transactional id %r from %s: %s", transactional_id,
                 ctx.client_id, error.name)
    return R(error_code=error.code, producer_id=pid, producer_epoch=epoch)
