"""KIP-890 part 1: before a transactional append, the partition leader checks with the
transaction coordinator that the partition is in the producer's open transaction (Kafka's
ReplicaManager verification guard, AddPartitionsToTxn v4 verify-only). This stops "hanging"
transactions: a late batch from an aborted or timed-out transaction can no longer reopen one on
the partition that no marker will ever close.

As Kafka: a producer that already has an open transaction on the partition (at this epoch) needs
no check; ``transaction.partition.verification.enable=false`` turns it off. The coordinator is
local here (single node: the verify-only request is a method call). Errors as Kafka's
AddPartitionsToTxnManager and ReplicaManager map them for Produce:
- partition not in the transaction (coordinator: TRANSACTION_ABORTABLE): INVALID_TXN_STATE for
  Produce v0-10, TRANSACTION_ABORTABLE from v11 (KIP-1050);
- PRODUCER_FENCED: INVALID_PRODUCER_EPOCH;
- coordinator busy or elsewhere (CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS,
  COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR): NOT_ENOUGH_REPLICAS, retriable for every client.
"""

from __future__ import annotations

from kbroker.protocol.errors import Errors, KafkaError
from kbroker.protocol.records import BatchHeader

_RETRIABLE = (Errors.CONCURRENT_TRANSACTIONS, Errors.COORDINATOR_LOAD_IN_PROGRESS,
              Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR)


def verify_transactional_append(ctx, transactional_id, partition, topic: str, index: int,
                                records) -> None:
    """Raise KafkaError when this append must not open a transaction on the partition."""
    if not transactional_id or ctx.txn is None:
        return
    if not ctx.config.get("transaction.partition.verification.enable"):
        return
    if len(records) < 61:  # not even one batch header: the log rejects it with its own error
        return
    header = BatchHeader(records, 0)
    if header.magic != 2 or not header.is_transactional:
        return
    producer_id, epoch = header.producer_id, header.producer_epoch
    for entry in partition.active_producers():
        if (entry.producer_id == producer_id and entry.producer_epoch == epoch
                and entry.current_txn_first_offset >= 0):
            return  # already open here at this epoch: the coordinator verified it before
    try:
        error = ctx.txn.verify_partitions(transactional_id, producer_id, epoch,
                                          [(topic, index)])[(topic, index)]
    except KafkaError as exc:
        error = exc.error
    if error is Errors.NONE:
        return
    if error is Errors.TRANSACTION_ABORTABLE:
        error = Errors.TRANSACTION_ABORTABLE if ctx.api_version >= 11 else Errors.INVALID_TXN_STATE
    elif error is Errors.PRODUCER_FENCED:
        error = Errors.INVALID_PRODUCER_EPOCH
    elif error in _RETRIABLE:
        error = Errors.NOT_ENOUGH_REPLICAS
    raise KafkaError(error, f"partition {topic}-{index} is not in the open transaction of "
                            f"transactional id {transactional_id!r} (producer {producer_id}, "
                            f"epoch {epoch}): {error.name}")
