"""Transaction operations (Kafka's TransactionCoordinator handlers), each ``op(shard) ->
CoordinatorResult`` whose response is an :class:`Errors` (or a tuple starting with one).

Checks, in Kafka's order:
- InitProducerId: timeout in (0, transaction.max.timeout.ms] else INVALID_TRANSACTION_TIMEOUT; a
  new id gets a producer id and epoch 0; PrepareCommit/PrepareAbort: CONCURRENT_TRANSACTIONS; an
  Ongoing transaction is fenced: its epoch is bumped and it is aborted (PrepareAbort written), the
  caller gets CONCURRENT_TRANSACTIONS and retries once the abort completed; otherwise the epoch
  is bumped (a new producer id when it would reach Short.MAX_VALUE - 1). A producer id and epoch
  in the request (KIP-360) must be the current ones, or the epoch before the last bump: else
  PRODUCER_FENCED.
- AddPartitionsToTxn / AddOffsetsToTxn: unknown id or another producer id:
  INVALID_PRODUCER_ID_MAPPING; another epoch: PRODUCER_FENCED; PrepareCommit/PrepareAbort:
  CONCURRENT_TRANSACTIONS; partitions already in an Ongoing transaction: nothing written.
- EndTxn: the same id checks; Ongoing -> PrepareCommit/PrepareAbort; a retry after the same
  result completed (or while it is in flight: CONCURRENT_TRANSACTIONS) is answered as Kafka does;
  the other combinations INVALID_TXN_STATE.
"""

from __future__ import annotations

import logging

from kbroker.coordinator.runtime import CoordinatorResult, now_ms, respond
from kbroker.coordinator.txn import records as rec
from kbroker.coordinator.txn.state import (COMPLETED, PREPARING, NO_PRODUCER_EPOCH, TxnMetadata,
                                           TxnState)
from kbroker.protocol.errors import Errors

log = logging.getLogger("kbroker.coordinator.txn")
S = TxnState


def _write(m: TxnMetadata, response, **kw) -> CoordinatorResult:
    return CoordinatorResult([(rec.key(m.transactional_id), rec.value(m))], response, **kw)


def _on_failed(exc):
    return exc.error


def init_producer_id(shard, transactional_id: str, timeout_ms: int, producer_id: int,
                     producer_epoch: int, max_timeout_ms: int, new_producer_id) -> CoordinatorResult:
    """Response: (error, producer id, epoch)."""
    if timeout_ms <= 0 or timeout_ms > max_timeout_ms:
        return respond((Errors.INVALID_TRANSACTION_TIMEOUT, -1, NO_PRODUCER_EPOCH))
    now = now_ms()
    m = shard.txns.get(transactional_id)
    if m is None:
        m = TxnMetadata(transactional_id, new_producer_id(), NO_PRODUCER_EPOCH, timeout_ms,
                        S.EMPTY, txn_last_update_timestamp=now)
    elif m.state in PREPARING:
        return respond((Errors.CONCURRENT_TRANSACTIONS, -1, NO_PRODUCER_EPOCH))
    elif producer_id >= 0 and producer_id != m.producer_id:
        return respond((Errors.PRODUCER_FENCED, -1, NO_PRODUCER_EPOCH))
    elif producer_id >= 0 and producer_epoch != m.producer_epoch:
        if producer_epoch != shard.last_epochs.get(transactional_id, NO_PRODUCER_EPOCH):
            return respond((Errors.PRODUCER_FENCED, -1, NO_PRODUCER_EPOCH))
        if m.state is not S.ONGOING:
            # A retry, or a producer recovering after its transaction timed out (KIP-588):
            # it gets the epoch the coordinator already bumped to.
            return respond((Errors.NONE, m.producer_id, m.producer_epoch))
    if m.state is S.ONGOING:
        # A new instance fences the one whose transaction is open: abort it with a bumped epoch.
        fenced = fence_and_abort(shard, m, now, "a new producer instance initialized")
        return CoordinatorResult(fenced.records, (Errors.CONCURRENT_TRANSACTIONS, -1,
                                                  NO_PRODUCER_EPOCH),
                                 on_committed=fenced.on_committed,
                                 on_failed=lambda exc: (exc.error, -1, NO_PRODUCER_EPOCH))
    if m.epoch_exhausted:
        new = TxnMetadata(transactional_id, new_producer_id(), 0, timeout_ms, S.EMPTY,
                          txn_last_update_timestamp=now)
        log.info("transactional id %s: epoch exhausted, new producer id %d", transactional_id,
                 new.producer_id)
    else:
        new = m.transition(S.EMPTY, producer_epoch=m.producer_epoch + 1, timeout_ms=timeout_ms,
                           partitions=frozenset(), txn_start_timestamp=-1,
                           txn_last_update_timestamp=now)
    # Kafka's prepareIncrementProducerEpoch: a bump asked for with the current epoch may be
    # retried with that epoch; a plain InitProducerId leaves no epoch to retry with.
    last = m.producer_epoch if producer_id >= 0 and new.producer_id == m.producer_id \
        else NO_PRODUCER_EPOCH

    def committed():
        shard.last_epochs[transactional_id] = last

    return _write(new, (Errors.NONE, new.producer_id, new.producer_epoch), on_committed=committed,
                  on_failed=lambda exc: (exc.error, -1, NO_PRODUCER_EPOCH))


def fence_and_abort(shard, m: TxnMetadata, now: int, reason: str) -> CoordinatorResult:
    """Bump the epoch of an open transaction and write PrepareAbort (Kafka's
    prepareFenceProducerEpoch followed by an abort); the markers follow once it is committed."""
    epoch = m.producer_epoch + 1 if not m.epoch_exhausted else m.producer_epoch
    aborted = m.transition(S.PREPARE_ABORT, producer_epoch=epoch, txn_last_update_timestamp=now)
    log.info("aborting the transaction of %s (producer id %d, epoch bumped to %d): %s",
             m.transactional_id, m.producer_id, epoch, reason)
    def committed():
        # KIP-588: the fenced producer may recover with the epoch it had.
        shard.last_epochs[m.transactional_id] = m.producer_epoch
        shard.coordinator.send_markers(shard, aborted)

    return _write(aborted, Errors.NONE, on_committed=committed, on_failed=_on_failed)


def _check_producer(m: TxnMetadata | None, producer_id: int, producer_epoch: int):
    if m is None or m.producer_id != producer_id:
        return Errors.INVALID_PRODUCER_ID_MAPPING
    if m.producer_epoch != producer_epoch:
        return Errors.PRODUCER_FENCED
    if m.state in PREPARING:
        return Errors.CONCURRENT_TRANSACTIONS
    return None


def add_partitions(shard, transactional_id: str, producer_id: int, producer_epoch: int,
                   partitions) -> CoordinatorResult:
    """Response: an Errors for the whole request (every partition gets it)."""
    m = shard.txns.get(transactional_id)
    error = _check_producer(m, producer_id, producer_epoch)
    if error is not None:
        return respond(error)
    wanted = frozenset(partitions)
    if m.state is S.ONGOING and wanted <= m.partitions:
        return respond(Errors.NONE)
    now = now_ms()
    start = m.txn_start_timestamp if m.state is S.ONGOING else now
    new = m.transition(S.ONGOING, partitions=m.partitions | wanted, txn_start_timestamp=start,
                       txn_last_update_timestamp=now)
    return _write(new, Errors.NONE, on_failed=_on_failed)


def verify_partitions(shard, transactional_id: str, producer_id: int, producer_epoch: int,
                      partitions) -> dict:
    """AddPartitionsToTxn v4+ verify-only: {partition: error}, nothing written. A partition
    outside the open transaction is TRANSACTION_ABORTABLE (Kafka 4's answer)."""
    m = shard.txns.get(transactional_id)
    error = _check_producer(m, producer_id, producer_epoch)
    if error is not None:
        return {p: error for p in partitions}
    return {p: Errors.NONE if m.state is S.ONGOING and p in m.partitions
            else Errors.TRANSACTION_ABORTABLE for p in partitions}


def end_txn(shard, transactional_id: str, producer_id: int, producer_epoch: int,
            commit: bool) -> CoordinatorResult:
    m = shard.txns.get(transactional_id)
    if m is None or m.producer_id != producer_id:
        return respond(Errors.INVALID_PRODUCER_ID_MAPPING)
    if m.producer_epoch != producer_epoch:
        return respond(Errors.PRODUCER_FENCED)
    state = m.state
    if state is S.ONGOING:
        now = now_ms()
        prepared = m.transition(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT,
                                txn_last_update_timestamp=now)
        return _write(prepared, Errors.NONE,
                      on_committed=lambda: shard.coordinator.send_markers(shard, prepared),
                      on_failed=_on_failed)
    if state is (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT):
        return respond(Errors.NONE)  # a retry of a transaction that completed
    if state is (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT):
        return respond(Errors.CONCURRENT_TRANSACTIONS)
    return respond(Errors.INVALID_TXN_STATE)


def complete(shard, prepared: TxnMetadata) -> CoordinatorResult:
    """The markers of ``prepared`` are written: CompleteCommit / CompleteAbort."""
    m = shard.txns.get(prepared.transactional_id)
    if (m is None or m.state is not prepared.state or m.producer_id != prepared.producer_id
            or m.producer_epoch != prepared.producer_epoch):
        return respond(Errors.NONE)  # someone else finished it
    done = m.transition(S.COMPLETE_COMMIT if m.commit else S.COMPLETE_ABORT,
                        partitions=frozenset(), txn_last_update_timestamp=now_ms())
    return _write(done, Errors.NONE, on_failed=_on_failed)


def abort_timed_out(shard, now: int) -> CoordinatorResult:
    """Kafka's abortTimedOutTransactions: every Ongoing transaction older than its timeout is
    fenced and aborted (one record per transaction, in one batch)."""
    results = [fence_and_abort(shard, m, now, f"timed out after {m.timeout_ms} ms")
               for m in shard.txns.values()
               if m.state is S.ONGOING and m.txn_start_timestamp + m.timeout_ms <= now]
    if not results:
        return respond(0)
    records = [r for result in results for r in result.records]

    def committed():
        for result in results:
            result.on_committed()

    return CoordinatorResult(records, len(results), on_committed=committed,
                             on_failed=lambda exc: 0)


def expire_ids(shard, now: int, expiration_ms: int) -> CoordinatorResult:
    """Kafka's removeExpiredTransactionalIds: an id with no open transaction (Empty,
    CompleteCommit, CompleteAbort) idle for ``transactional.id.expiration.ms`` gets a tombstone;
    its next InitProducerId starts afresh with a new producer id."""
    expired = [m.transactional_id for m in shard.txns.values()
               if m.state in (S.EMPTY, *COMPLETED)
               and m.txn_last_update_timestamp + expiration_ms <= now]
    if not expired:
        return respond(0)
    for transactional_id in expired:
        log.info("transactional id %s expired after %d ms without use", transactional_id,
                 expiration_ms)
    return CoordinatorResult([(rec.key(t), None) for t in expired], len(expired),
                             on_failed=lambda exc: 0)


__all__ = ["expire_ids", "init_producer_id", "add_partitions", "verify_partitions", "end_txn", "complete",
           "abort_timed_out", "fence_and_abort", "COMPLETED"]
