"""Transaction states and their transitions (Kafka's ``TransactionState`` and
``TransactionMetadata``).

The codes are those written in ``TransactionLogValue.TransactionStatus``. ``VALID_PREVIOUS`` is
Kafka's table of the states a state may be entered from; :func:`transition` enforces it.
PrepareEpochFence is never written: fencing an open transaction is written as PrepareAbort with
the bumped epoch (as Kafka does).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace


class TxnState(enum.Enum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display(self) -> str:
        """Kafka's state names (DescribeTransactions, ListTransactions)."""
        return "".join(word.capitalize() for word in self.name.split("_"))


S = TxnState
VALID_PREVIOUS = {
    S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_COMMIT: {S.ONGOING},
    S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT,
                      S.COMPLETE_ABORT},
    S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
    S.COMPLETE_ABORT: {S.PREPARE_ABORT},
    S.DEAD: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_EPOCH_FENCE: {S.ONGOING},
}
PREPARING = (S.PREPARE_COMMIT, S.PREPARE_ABORT)
COMPLETED = (S.COMPLETE_COMMIT, S.COMPLETE_ABORT)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767


class IllegalTransition(Exception):
    pass


@dataclass(frozen=True, slots=True)
class TxnMetadata:
    """One transactional id. Immutable: a change is a new object, written as a record."""
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset = frozenset()       # {(topic, partition)} of the open transaction
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    # Transactions v2 (KIP-890 part 2). ``client_transaction_version`` is 2 once the producer
    # speaks v2 (EndTxn v5, Produce v12+ adding partitions): every EndTxn then bumps the epoch.
    # ``next_producer_id`` is set on a Prepare record whose bump exhausted the epoch: Complete
    # rotates to it (epoch 0); ``prev_producer_id`` is the id the last change started from, so
    # after a rotation the old one (a retry with it is recognised).
    client_transaction_version: int = 0
    prev_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID

    def transition(self, state: TxnState, **changes) -> "TxnMetadata":
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransition(f"transactional id {self.transactional_id}: "
                                    f"{self.state.display} -> {state.display} is not allowed")
        # Kafka records the producer id the change started from (TxnTransitMetadata's
        # prevProducerId): the same id unless this change rotates it.
        changes.setdefault("prev_producer_id", self.producer_id)
        return replace(self, state=state, **changes)

    @property
    def epoch_exhausted(self) -> bool:
        # Kafka keeps the last epoch free for fencing (TransactionMetadata.isEpochExhausted).
        return self.producer_epoch >= MAX_EPOCH - 1

    @property
    def tv2(self) -> bool:
        return self.client_transaction_version >= 2

    @property
    def commit(self) -> bool:
        return self.state is S.PREPARE_COMMIT
