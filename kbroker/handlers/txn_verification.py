"""KIP-890: before a transactional append, the partition leader checks with the transaction
coordinator that the partition is in the producer's open transaction (Kafka's ReplicaManager
verification guard and AddPartitionsToTxnManager). This stops "hanging" transactions: a late
batch from an aborted or timed-out transaction can no longer reopen one on the partition that no
marker will ever close.

As Kafka: a producer that already has an open transaction on the partition (at this epoch) needs
no check; ``transaction.partition.verification.enable=false`` turns it off. The coordinator is
local here (single node: the AddPartitionsToTxn v4+ request is a method call). What the check
does depends on the request version (Kafka's ``TransactionSupportedOperation``):
- Produce v0-11, TxnOffsetCommit v0-4 (transactions v1, part 1): verify only; a partition not in
  the transaction is refused.
- Produce v12+, TxnOffsetCommit v5+ (transactions v2, part 2): the broker *adds* the partition to
  the transaction (the client sends no AddPartitionsToTxn). While the previous transaction's
  markers are still being written (CONCURRENT_TRANSACTIONS) it waits up to 100 ms for them
  (Kafka's ``add.partitions.to.txn.retry.backoff.max.ms``) before answering.
Errors as Kafka's AddPartitionsToTxnManager and ReplicaManager map them:
- partition not in the transaction (coordinator: TRANSACTION_ABORTABLE): INVALID_TXN_STATE for
  Produce v0-10 and TxnOffsetCommit v0-3, TRANSACTION_ABORTABLE after (KIP-1050);
- PRODUCER_FENCED: INVALID_PRODUCER_EPOCH;
- coordinator busy or elsewhere (CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS,
  COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR): NOT_ENOUGH_REPLICAS, retriable for every client.

Order: a produce that waits here keeps its place among the produces of its connection
(:mod:`kbroker.handlers.session`), so pipelined batches still reach the log in sequence.
"""

from __future__ import annotations

import asyncio

from kbroker.protocol.errors import Errors, KafkaError
from kbroker.protocol.records import BatchHeader

_RETRIABLE = (Errors.CONCURRENT_TRANSACTIONS, Errors.COORDINATOR_LOAD_IN_PROGRESS,
              Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR)
FIRST_ADD_PRODUCE_VERSION = 12
FIRST_ADD_TXN_OFFSET_COMMIT_VERSION = 5
_CONCURRENT_WAIT_S = 0.1   # Kafka's add.partitions.to.txn.retry.backoff.max.ms
_BACKOFF_S = 0.02          # Kafka's add.partitions.to.txn.retry.backoff.ms


def producer_to_check(ctx, transactional_id, partition, records):
    """(producer id, epoch) of a transactional batch the coordinator must confirm on this
    partition, None when no check is needed."""
    if not transactional_id or ctx.txn is None:
        return None
    if not ctx.config.get("transaction.partition.verification.enable"):
        return None
    if records is None or len(records) < 61:  # not one batch header: the log rejects it
        return None
    header = BatchHeader(records, 0)
    if header.magic != 2 or not header.is_transactional:
        return None
    producer_id, epoch = header.producer_id, header.producer_epoch
    for entry in partition.active_producers():
        if (entry.producer_id == producer_id and entry.producer_epoch == epoch
                and entry.current_txn_first_offset >= 0):
            return None  # already open here at this epoch: the coordinator verified it before
    return producer_id, epoch


def client_error(error: Errors, abortable_known: bool) -> Errors:
    """The coordinator's answer as the producing client gets it."""
    if error is Errors.TRANSACTION_ABORTABLE and not abortable_known:
        return Errors.INVALID_TXN_STATE
    if error is Errors.PRODUCER_FENCED:
        return Errors.INVALID_PRODUCER_EPOCH
    if error in _RETRIABLE:
        return Errors.NOT_ENOUGH_REPLICAS
    return error


def _refuse(error: Errors, transactional_id, producer_id, epoch, topic, index):
    raise KafkaError(error, f"partition {topic}-{index} is not in the open transaction of "
                            f"transactional id {transactional_id!r} (producer {producer_id}, "
                            f"epoch {epoch}): {error.name}")


def verify_transactional_append(ctx, transactional_id, partition, topic: str, index: int,
                                records) -> None:
    """Transactions v1 (Produce v0-11): raise KafkaError when this append must not open a
    transaction on the partition."""
    producer = producer_to_check(ctx, transactional_id, partition, records)
    if producer is None:
        return
    producer_id, epoch = producer
    try:
        error = ctx.txn.verify_partitions(transactional_id, producer_id, epoch,
                                          [(topic, index)])[(topic, index)]
    except KafkaError as exc:
        error = exc.error
    if error is not Errors.NONE:
        _refuse(client_error(error, ctx.api_version >= 11), transactional_id, producer_id, epoch,
                topic, index)


def add_partitions(ctx, transactional_id: str, producer_id: int, epoch: int, wanted: list):
    """Transactions v2: add ``wanted`` [(topic, index)] to the producer's transaction.
    Returns {partition: coordinator error} now when nothing needs waiting for (a single node,
    nothing in flight), else an awaitable of it; the caller maps errors with
    :func:`client_error`."""
    try:
        added = ctx.txn.add_partitions_now(transactional_id, producer_id, epoch, wanted)
    except KafkaError as exc:
        return {tp: exc.error for tp in wanted}
    if added.done() and not added.cancelled() and added.exception() is None \
            and added.result() is not Errors.CONCURRENT_TRANSACTIONS:
        return {tp: added.result() for tp in wanted}
    return _add_when_markers_written(ctx, transactional_id, producer_id, epoch, wanted, added)


async def _add_when_markers_written(ctx, transactional_id, producer_id, epoch, wanted, added):
    """Wait for ``added``; while the coordinator answers CONCURRENT_TRANSACTIONS (the previous
    transaction's markers are being written), ask again once it completes, for up to
    ``_CONCURRENT_WAIT_S`` in all."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _CONCURRENT_WAIT_S
    while True:
        try:
            if added is None:
                added = ctx.txn.add_partitions_now(transactional_id, producer_id, epoch, wanted)
            error = await asyncio.shield(added)
        except KafkaError as exc:
            error = exc.error
        added = None
        remaining = deadline - loop.time()
        if error is not Errors.CONCURRENT_TRANSACTIONS or remaining <= 0:
            return {tp: error for tp in wanted}
        completed = ctx.txn.completion(transactional_id)
        await asyncio.wait([completed], timeout=min(remaining, _BACKOFF_S * 5))
        if not completed.done():
            await asyncio.sleep(0)
