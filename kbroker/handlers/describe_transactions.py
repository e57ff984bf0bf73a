"""DescribeTransactions (key 65), v0: the state of each transactional id at its coordinator.

Per id: state name (Kafka's: Empty, Ongoing, PrepareCommit, ...), producer id and epoch,
timeout, start time and the partitions of the open transaction. Errors per id as Kafka's
``handleDescribeTransactions``: INVALID_REQUEST for an empty id, NOT_COORDINATOR when another
broker is its coordinator, COORDINATOR_LOAD_IN_PROGRESS, TRANSACTIONAL_ID_NOT_FOUND.
Not supported: ACLs (TRANSACTIONAL_ID_AUTHORIZATION_FAILED comes with them).
"""

from __future__ import annotations

from kbroker.handlers import handles
from kbroker.protocol.errors import KafkaError
from kbroker.security.authorizer import Op, ResourceType, check


@handles("DescribeTransactions")
def handle_describe_transactions(ctx, request):
    from kbroker.protocol.messages.describe_transactions import DescribeTransactionsResponse as R

    states = []
    for transactional_id in request.transactional_ids:
        try:
            check(ctx, Op.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id)
            m = ctx.txn.describe(transactional_id)
        except KafkaError as exc:
            states.append(R.TransactionState(error_code=exc.error.code,
                                             transactional_id=transactional_id))
            continue
        topics: dict[str, list[int]] = {}
        for topic, partition in sorted(m.partitions):
            topics.setdefault(topic, []).append(partition)
        states.append(R.TransactionState(
            error_code=0, transactional_id=transactional_id, transaction_state=m.state.display,
            transaction_timeout_ms=m.timeout_ms, transaction_start_time_ms=m.txn_start_timestamp,
            producer_id=m.producer_id, producer_epoch=m.producer_epoch,
            topics=[R.TopicData(topic=t, partitions=p)
                    for t, p in topics.items()]))
    return R(throttle_time_ms=0, transaction_states=states)
