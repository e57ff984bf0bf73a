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
- EndTxn v0-4 (transactions v1): the same id checks; Ongoing -> PrepareCommit/PrepareAbort; a
  retry after the same result completed (or while it is in flight: CONCURRENT_TRANSACTIONS) is
  answered as Kafka does; the other combinations INVALID_TXN_STATE.
- EndTxn v5 (transactions v2, KIP-890 part 2; Kafka's ``endTransaction`` above TV1): every
  EndTxn bumps the epoch in its Prepare record, and the markers carry the bumped epoch, so a late
  batch of the finished transaction can never join the next one. A retry is told apart by its
  epoch (one below the current: NONE for the same result once complete), so the epoch alone
  decides PRODUCER_FENCED; an abort with no open transaction (Empty, CompleteCommit,
  CompleteAbort) is allowed and writes PrepareAbort with no partitions. When the bump reaches
  Short.MAX_VALUE the Prepare record names the next producer id and Complete rotates to it with
  epoch 0. The answer carries the producer id and epoch the producer goes on with.
"""

from __future__ import annotations

import logging

from kbroker.coordinator.runtime import CoordinatorResult, now_ms, respond
from kbroker.coordinator.txn import records as rec
from kbroker.coordinator.txn.state import (COMPLETED, MAX_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID,
                                           PREPARING, TxnMetadata, TxnState)
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
    elif (producer_id >= 0 and producer_id == m.prev_producer_id != m.producer_id
          and producer_epoch >= MAX_EPOCH - 1 and m.state is not S.ONGOING):
        # The producer id rotated at the end of the producer's last transaction (transactions
        # v2) and it did not see the answer: it goes on with the new id, as in Kafka.
        return respond((Errors.NONE, m.producer_id, m.producer_epoch))
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
        fenced = fence_and_abort(shard, m, now, "a new producer instance initialized",
                                 new_producer_id)
        return CoordinatorResult(fenced.records, (Errors.CONCURRENT_TRANSACTIONS, -1,
                                                  NO_PRODUCER_EPOCH),
                                 on_committed=fenced.on_committed,
                                 on_failed=lambda exc: (exc.error, -1, NO_PRODUCER_EPOCH))
    if m.epoch_exhausted:
        new = TxnMetadata(transactional_id, new_producer_id(), 0, timeout_ms, S.EMPTY,
                          txn_last_update_timestamp=now, prev_producer_id=m.producer_id)
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


def fence_and_abort(shard, m: TxnMetadata, now: int, reason: str,
                    new_producer_id=None) -> CoordinatorResult:
    """Bump the epoch of an open transaction and write PrepareAbort (Kafka's
    prepareFenceProducerEpoch followed by an abort); the markers follow once it is committed.
    One bump: a transactions v2 producer's own abort that follows is then answered as a retry
    of this one (its epoch is one below); one whose epoch is exhausted moves to a new producer id
    on Complete."""
    rotate = m.tv2 and m.epoch_exhausted and new_producer_id is not None
    epoch = m.producer_epoch + 1 if (not m.epoch_exhausted or rotate) else m.producer_epoch
    aborted = m.transition(S.PREPARE_ABORT, producer_epoch=epoch, txn_last_update_timestamp=now,
                           next_producer_id=new_producer_id() if rotate else NO_PRODUCER_ID)
    log.info("aborting the transaction of %s (producer id %d, epoch bumped to %d): %s",
             m.transactional_id, m.producer_id, epoch, reason)
    def committed():
        # KIP-588: the fenced producer may recover with the epoch it had.
        shard.last_epochs[m.transactional_id] = m.producer_epoch
        shard.coordinator.send_markers(shard, aborted)

    return _write(aborted, Errors.NONE, on_committed=committed, on_failed=_on_failed)


def _check_producer(m: TxnMetadata | None, producer_id: int, producer_epoch: int):
    if (m is not None and m.state in PREPARING and producer_id == m.next_producer_id
            and producer_epoch == 0):
        # A v2 producer already on the id its last EndTxn rotated to, while that
        # transaction's markers are still written: retriable, the id is current once complete.
        return Errors.CONCURRENT_TRANSACTIONS
    if m is None or m.producer_id != producer_id:
        return Errors.INVALID_PRODUCER_ID_MAPPING
    if m.producer_epoch != producer_epoch:
        return Errors.PRODUCER_FENCED
    if m.state in PREPARING:
        return Errors.CONCURRENT_TRANSACTIONS
    return None


def add_partitions(shard, transactional_id: str, producer_id: int, producer_epoch: int,
                   partitions, client_transaction_version: int = 0) -> CoordinatorResult:
    """Response: an Errors for the whole request (every partition gets it).
    ``client_transaction_version`` is 2 when the partitions come from a transactions v2
    producer's Produce or TxnOffsetCommit (added by the broker, KIP-890 part 2)."""
    m = shard.txns.get(transactional_id)
    error = _check_producer(m, producer_id, producer_epoch)
    if error is not None:
        return respond(error)
    wanted = frozenset(partitions)
    ongoing = m.state is S.ONGOING
    # A transaction is v2 once any of its partitions came the v2 way; never back to v1 (a v1
    # client sending Produce v12 for a partition it added itself must not cost a write).
    version = max(m.client_transaction_version, client_transaction_version) if ongoing \
        else client_transaction_version
    if ongoing and wanted <= m.partitions and version == m.client_transaction_version:
        return respond(Errors.NONE)
    now = now_ms()
    start = m.txn_start_timestamp if ongoing else now
    new = m.transition(S.ONGOING, partitions=m.partitions | wanted, txn_start_timestamp=start,
                       txn_last_update_timestamp=now, client_transaction_version=version)
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
            commit: bool, tv2: bool = False, new_producer_id=None) -> CoordinatorResult:
    """Response: (error, producer id, epoch); the id and epoch are those the producer goes on
    with (EndTxn v5), -1 on an error."""
    if tv2:
        return _end_txn_v2(shard, transactional_id, producer_id, producer_epoch, commit,
                           new_producer_id)
    m = shard.txns.get(transactional_id)
    if m is None or m.producer_id != producer_id:
        return _fail(Errors.INVALID_PRODUCER_ID_MAPPING)
    if m.producer_epoch != producer_epoch:
        return _fail(Errors.PRODUCER_FENCED)
    state = m.state
    if state is S.ONGOING:
        now = now_ms()
        prepared = m.transition(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT,
                                txn_last_update_timestamp=now)
        return _write(prepared, (Errors.NONE, m.producer_id, m.producer_epoch),
                      on_committed=lambda: shard.coordinator.send_markers(shard, prepared),
                      on_failed=_failed_triple)
    if state is (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT):
        # a retry of a transaction that completed
        return respond((Errors.NONE, m.producer_id, m.producer_epoch))
    if state is (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT):
        return _fail(Errors.CONCURRENT_TRANSACTIONS)
    return _invalid_state(m, commit)


def _fail(error: Errors) -> CoordinatorResult:
    return respond((error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH))


def _failed_triple(exc):
    return exc.error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH


def _invalid_state(m: TxnMetadata, commit: bool) -> CoordinatorResult:
    log.warning("transactional id %s is %s: %s is not allowed", m.transactional_id,
                m.state.display, "commit" if commit else "abort")
    return _fail(Errors.INVALID_TXN_STATE)


def _end_txn_v2(shard, transactional_id: str, producer_id: int, producer_epoch: int,
                commit: bool, new_producer_id) -> CoordinatorResult:
    m = shard.txns.get(transactional_id)
    if m is None:
        return _fail(Errors.INVALID_PRODUCER_ID_MAPPING)
    # A retry of an EndTxn whose bump rotated the producer id (epoch MAX - 1 -> new id, 0).
    retry_on_overflow = (m.prev_producer_id == producer_id and producer_epoch == MAX_EPOCH - 1
                         and m.producer_epoch == 0)
    # A retry of an EndTxn whose bump is written: the epoch is one past the request's.
    retry_on_bump = m.producer_epoch == producer_epoch + 1
    if m.producer_id != producer_id and not retry_on_overflow:
        return _fail(Errors.INVALID_PRODUCER_ID_MAPPING)
    state = m.state
    if state in PREPARING:
        valid_epoch = retry_on_bump
    elif state in COMPLETED:
        valid_epoch = retry_on_bump or retry_on_overflow or producer_epoch == m.producer_epoch
    else:
        valid_epoch = producer_epoch == m.producer_epoch
    if not valid_epoch:
        return _fail(Errors.PRODUCER_FENCED)
    retry = retry_on_bump or retry_on_overflow
    if state is S.ONGOING:
        return _prepare_v2(shard, m, S.PREPARE_COMMIT if commit else S.PREPARE_ABORT,
                           new_producer_id, no_partitions=False)
    if state is S.COMPLETE_COMMIT:
        if commit:
            return respond((Errors.NONE, m.producer_id, m.producer_epoch)) if retry \
                else _invalid_state(m, commit)
        return _invalid_state(m, commit) if retry \
            else _prepare_v2(shard, m, S.PREPARE_ABORT, new_producer_id, no_partitions=True)
    if state is S.COMPLETE_ABORT:
        if not commit:
            return respond((Errors.NONE, m.producer_id, m.producer_epoch)) if retry \
                else _prepare_v2(shard, m, S.PREPARE_ABORT, new_producer_id, no_partitions=True)
        return _invalid_state(m, commit)
    if state is (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT):
        return _fail(Errors.CONCURRENT_TRANSACTIONS)
    if state is S.EMPTY and not commit:
        return _prepare_v2(shard, m, S.PREPARE_ABORT, new_producer_id, no_partitions=True)
    return _invalid_state(m, commit)


def _prepare_v2(shard, m: TxnMetadata, state: TxnState, new_producer_id,
                no_partitions: bool) -> CoordinatorResult:
    """PrepareCommit/PrepareAbort with the epoch bumped (Kafka's prepareAbortOrCommit for TV2);
    the producer id rotates on Complete when this bump uses the last epoch."""
    now = now_ms()
    next_id = new_producer_id() if m.epoch_exhausted else NO_PRODUCER_ID
    prepared = m.transition(state, producer_epoch=m.producer_epoch + 1, next_producer_id=next_id,
                            client_transaction_version=2,
                            txn_start_timestamp=now if no_partitions else m.txn_start_timestamp,
                            txn_last_update_timestamp=now)
    answer = (next_id, 0) if next_id != NO_PRODUCER_ID \
        else (prepared.producer_id, prepared.producer_epoch)
    return _write(prepared, (Errors.NONE, *answer),
                  on_committed=lambda: shard.coordinator.send_markers(shard, prepared),
                  on_failed=_failed_triple)


def complete(shard, prepared: TxnMetadata) -> CoordinatorResult:
    """The markers of ``prepared`` are written: CompleteCommit / CompleteAbort."""
    m = shard.txns.get(prepared.transactional_id)
    if (m is None or m.state is not prepared.state or m.producer_id != prepared.producer_id
            or m.producer_epoch != prepared.producer_epoch):
        return respond(Errors.NONE)  # someone else finished it
    rotated = {}
    if m.next_producer_id != NO_PRODUCER_ID:
        # Transactions v2 used the last epoch: go on with the next producer id (Kafka's
        # prepareComplete).
        rotated = dict(producer_id=m.next_producer_id, producer_epoch=0,
                       prev_producer_id=m.producer_id, next_producer_id=NO_PRODUCER_ID)
    done = m.transition(S.COMPLETE_COMMIT if m.commit else S.COMPLETE_ABORT,
                        partitions=frozenset(), txn_last_update_timestamp=now_ms(), **rotated)
    return _write(done, Errors.NONE, on_failed=_on_failed)


def abort_timed_out(shard, now: int, new_producer_id=None) -> CoordinatorResult:
    """Kafka's abortTimedOutTransactions: every Ongoing transaction older than its timeout is
    fenced and aborted (one record per transaction, in one batch)."""
    results = [fence_and_abort(shard, m, now, f"timed out after {m.timeout_ms} ms",
                               new_producer_id)
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
