"""InitProducerId (key 22), v0-6, for idempotent producers.

A request without a transactional id gets a fresh producer id with epoch 0. From v3 (KIP-360) an
idempotent producer may send its current id and epoch to bump the epoch after an error; we give
back the same id with epoch + 1, or a new id when the epoch would overflow.
Not supported yet: transactional ids (INVALID_REQUEST and a log line; NOT_COORDINATOR would make
clients retry forever), and the two-phase-commit fields of v6 (KIP-939).
"""

from __future__ import annotations

import logging

from kbroker.handlers import handles
from kbroker.protocol.errors import Errors

log = logging.getLogger("kbroker.producer_ids")
MAX_EPOCH = 32767


@handles("InitProducerId")
def handle_init_producer_id(ctx, request):
    from kbroker.protocol.messages.init_producer_id import InitProducerIdResponse as R

    if request.transactional_id is not None:
        log.info("InitProducerId from %s for transactional id %r: transactions are not "
                 "supported yet", ctx.client_id, request.transactional_id)
        return R(error_code=Errors.INVALID_REQUEST.code, producer_id=-1, producer_epoch=-1)
    ids = ctx.producer_ids
    if request.producer_id >= 0 and 0 <= request.producer_epoch < MAX_EPOCH - 1:
        return R(producer_id=request.producer_id, producer_epoch=request.producer_epoch + 1)
    return R(producer_id=ids.next_id(), producer_epoch=0)
