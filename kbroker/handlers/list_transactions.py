"""ListTransactions (key 66), v0-2: the transactional ids this broker coordinates.

Filters as Kafka's ``listTransactionStates``: state names (unknown ones echoed in
``unknown_state_filters``), producer ids, v1+ a duration (only transactions running longer than
it, KIP-994) and v2+ a transactional-id regular expression matched against the whole id
(KIP-1152; INVALID_REGULAR_EXPRESSION if it does not compile). COORDINATOR_LOAD_IN_PROGRESS
while any ``__transaction_state`` shard loads. Dead (expiring) ids are not listed.
Python's ``re`` stands in for Java's regex: the common syntax agrees.
"""

from __future__ import annotations

import logging

from kbroker.handlers import handles
from kbroker.protocol.errors import Errors
from kbroker.security.authorizer import Op, ResourceType, allowed

log = logging.getLogger("kbroker.handlers.list_transactions")


@handles("ListTransactions")
def handle_list_transactions(ctx, request):
    from kbroker.protocol.messages.list_transactions import ListTransactionsResponse as R

    listing = ctx.txn.list_transactions(request.state_filters, request.producer_id_filters,
                                        request.duration_filter, request.transactional_id_pattern)
    if listing.error is Errors.INVALID_REGULAR_EXPRESSION:
        log.info("ListTransactions from %s: invalid transactional id pattern %r", ctx.client_id,
                 request.transactional_id_pattern)
    return R(throttle_time_ms=0, error_code=listing.error.code,
             unknown_state_filters=listing.unknown_state_filters,
             transaction_states=[R.TransactionState(transactional_id=m.transactional_id,
                                                    producer_id=m.producer_id,
                                                    transaction_state=m.state.display)
                                 for m in listing.transactions
                                 # only the ids the principal may describe, as Kafka lists
                                 if allowed(ctx, Op.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                            m.transactional_id)])
