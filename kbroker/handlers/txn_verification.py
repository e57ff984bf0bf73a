"""KIP-890: before a transactional append, the partition leader checks with the transaction
coordinator that the partition is in the producer's open transaction (Kafka's ReplicaManager
verification guard and AddPartitionsToTxnManager). This stops "hanging" transactions: a late
batch from an aborted or timed-out transaction can no longer reopen one on the partition that no
marker will ever close.

As Kafka: a producer that already has an open transaction on the partition (at this epoch) needs
no check; ``transaction.partition.verification.enable=false`` turns it off. Before asking, the
leader starts a verification on the partition (:meth:`Partition.start_verification`): the guard
it returns goes with the append, which the log refuses (INVALID_TXN_STATE) when a marker or
another write of the producer ended the verification meanwhile, so a confirmation that arrives
after an abort cannot reopen the transaction. The coordinator is a method call when it is local
(its shard is here) and AddPartitionsToTxn v4+ to its broker otherwise. What the check does
depends on the request version (Kafka's ``TransactionSupportedOperation``):
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
import time
from typing import NamedTuple

from kbroker.replica.partition import UNVERIFIED, VERIFICATION_OFF
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.protocol.records import BatchHeader

_RETRIABLE = (Errors.CONCURRENT_TRANSACTIONS, Errors.COORDINATOR_LOAD_IN_PROGRESS,
              Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR)
FIRST_ADD_PRODUCE_VERSION = 12
FIRST_ADD_TXN_OFFSET_COMMIT_VERSION = 5
_CONCURRENT_WAIT_S = 0.1   # Kafka's add.partitions.to.txn.retry.backoff.max.ms
_BACKOFF_S = 0.02          # Kafka's add.partitions.to.txn.retry.backoff.ms


def default_verification(ctx):
    """What a transactional batch that needed no confirmation appends with: nothing (its
    transaction is open; if a marker closed it meanwhile the log refuses it), or, with
    verification switched off, no check at all."""
    if ctx.config.get("transaction.partition.verification.enable"):
        return UNVERIFIED
    return VERIFICATION_OFF


def confirm(ctx, transactional_id, partitions):
    """KIP-890 for one produce request. ``partitions`` is [((topic, index), Partition,
    records)] the client may write. Returns {(topic, index): Confirmation} for each
    transactional batch that would open a transaction (the others append with
    :func:`default_verification`), or an awaitable of it when the coordinator must be waited
    for."""
    if not transactional_id or ctx.txn is None or \
            not ctx.config.get("transaction.partition.verification.enable"):
        return {}
    add = ctx.api_version >= FIRST_ADD_PRODUCE_VERSION
    abortable_known = ctx.api_version >= 11
    now_ms = int(time.time() * 1000)
    answers: dict = {}
    guards: dict = {}
    by_producer: dict[tuple[int, int], list] = {}
    for tp, partition, records in partitions:
        if records is None or len(records) < 61:  # not one batch header: the log rejects it
            continue
        header = BatchHeader(records, 0)
        if header.magic != 2 or not header.is_transactional:
            continue
        try:
            guard = partition.start_verification(header.producer_id, header.base_sequence,
                                                 header.producer_epoch, add, now_ms)
        except KafkaError as exc:
            answers[tp] = Confirmation(exc.error, None, exc.message)
            continue
        if guard is not None:
            guards[tp] = guard
            by_producer.setdefault((header.producer_id, header.producer_epoch), []).append(tp)
    if not by_producer:
        return answers
    # One producer id and epoch per request in practice; any other is only verified.
    asked = []
    for n, ((producer_id, epoch), wanted) in enumerate(by_producer.items()):
        why = f"transactional id {transactional_id!r} (producer {producer_id}, epoch {epoch})"
        asked.append((wanted, why, _ask(ctx, transactional_id, producer_id, epoch, wanted,
                                        add and n == 0)))
    if not any(asyncio.isfuture(a) or asyncio.iscoroutine(a) for _, _, a in asked):
        for wanted, why, errors in asked:
            _answer(answers, guards, wanted, why, errors, abortable_known)
        return answers
    return _confirmed(answers, guards, asked, abortable_known)


def _ask(ctx, transactional_id, producer_id, epoch, wanted, add):
    """The coordinator's {(topic, index): Errors}, or an awaitable of it."""
    remote = ctx.txn.remote_coordinator(transactional_id)
    if remote is not None:
        return ctx.txn.add_partitions_remote(remote, transactional_id, producer_id, epoch,
                                             wanted, not add)
    if add:
        return add_partitions(ctx, transactional_id, producer_id, epoch, wanted)
    try:
        return ctx.txn.verify_partitions(transactional_id, producer_id, epoch, wanted)
    except KafkaError as exc:
        return {tp: exc.error for tp in wanted}


async def _confirmed(answers, guards, asked, abortable_known):
    for wanted, why, errors in asked:
        if asyncio.isfuture(errors) or asyncio.iscoroutine(errors):
            errors = await errors
        _answer(answers, guards, wanted, why, errors, abortable_known)
    return answers


class Confirmation(NamedTuple):
    """The coordinator's answer for one partition, as the append and the client get it."""

    error: Errors           # the client's error, NONE when the batch may go
    guard: object           # the verification the append brings back
    message: str | None = None


def _answer(answers, guards, wanted, why, errors, abortable_known) -> None:
    for tp in wanted:
        underlying = errors.get(tp, Errors.UNKNOWN_SERVER_ERROR)
        error = client_error(underlying, abortable_known)
        if error is Errors.NOT_ENOUGH_REPLICAS:
            message = (f"Unable to verify the partition has been added to the transaction. "
                       f"Underlying error: {underlying.name}")
        else:
            message = (f"partition {tp[0]}-{tp[1]} is not in the open transaction of {why}: "
                       f"{underlying.name}")
        answers[tp] = Confirmation(error, guards[tp], message)


def client_error(error: Errors, abortable_known: bool) -> Errors:
    """The coordinator's answer as the producing client gets it."""
    if error is Errors.TRANSACTION_ABORTABLE and not abortable_known:
        return Errors.INVALID_TXN_STATE
    if error is Errors.PRODUCER_FENCED:
        return Errors.INVALID_PRODUCER_EPOCH
    if error in _RETRIABLE:
        return Errors.NOT_ENOUGH_REPLICAS
    return error


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
