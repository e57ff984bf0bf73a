"""What the cleaner does with transactions (Kafka's ``CleanedTransactionMetadata``).

One tracker walks the batches of a range in offset order, fed with the aborted transactions of
that range from the ``.txnindex`` (sorted by first offset):

* A transactional data batch whose producer has an aborted transaction begun at or before it
  (and not yet closed by its ABORT marker in the walk) is aborted data: it is dropped, and its
  keys are not put in the offset map (else an aborted value would shadow a committed one).
  Any other transactional batch marks its producer's transaction as seen (committed data).
* An ABORT marker whose transaction had data in the walk is kept this time (and its index entry
  stays): the data just went, the marker goes on a later round. An ABORT marker with no data
  left, a COMMIT marker whose transaction had no data in the walk, and an empty control batch
  (cleaned before) are *removable*.
* A removable marker is stamped with a delete horizon (``now + delete.retention.ms``, KIP-534)
  the first time; a round past that horizon drops it. Consumers that read the marker before the
  horizon have time to see the end of the transaction, as in Kafka.

A data or control batch that is the last one of an active producer keeps its header with no
records, as every emptied batch does (see :mod:`kbroker.log.cleaner_rewrite`).
"""

from __future__ import annotations

from collections import deque

from kbroker.log.validation import MAX_UNCOMPRESSED_BATCH_BYTES
from kbroker.protocol.records import (CONTROL_ABORT, CONTROL_COMMIT, decode_records,
                                      parse_control_record)


class _Aborted:
    __slots__ = ("txn", "seen_data")

    def __init__(self, txn):
        self.txn = txn
        self.seen_data = False


class TransactionTracker:
    def __init__(self, aborted_txns=()):
        self._pending = deque(sorted(aborted_txns, key=lambda t: t.first_offset))
        self._ongoing_aborted: dict[int, _Aborted] = {}
        self._ongoing_committed: set[int] = set()
        self.kept_aborted: list = []  # index entries of the cleaned range (ABORT markers kept)

    def add_aborted(self, aborted_txns) -> None:
        """More aborted transactions (the next segment's), as Kafka adds them per segment."""
        known = {(t.producer_id, t.first_offset) for t in self._pending}
        known.update((a.txn.producer_id, a.txn.first_offset)
                     for a in self._ongoing_aborted.values())
        merged = list(self._pending) + [t for t in aborted_txns
                                        if (t.producer_id, t.first_offset) not in known]
        self._pending = deque(sorted(merged, key=lambda t: t.first_offset))

    def _consume_up_to(self, offset: int) -> None:
        while self._pending and self._pending[0].first_offset <= offset:
            txn = self._pending.popleft()
            self._ongoing_aborted.setdefault(txn.producer_id, _Aborted(txn))

    def on_data_batch(self, header) -> bool:
        """True when the batch is aborted data (to drop, and to leave out of the offset map)."""
        self._consume_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        aborted = self._ongoing_aborted.get(header.producer_id)
        if aborted is not None:
            aborted.seen_data = True
            return True
        self._ongoing_committed.add(header.producer_id)
        return False

    def on_control_batch(self, header) -> bool:
        """True when the marker is removable (see the module docstring)."""
        self._consume_up_to(header.last_offset)
        records = decode_records(header, MAX_UNCOMPRESSED_BATCH_BYTES)
        if not records:
            return True  # an empty control batch: cleaned before
        control_type, _ = parse_control_record(records[0])
        producer_id = header.producer_id
        if control_type == CONTROL_ABORT:
            aborted = self._ongoing_aborted.pop(producer_id, None)
            if aborted is not None and aborted.seen_data:
                self.kept_aborted.append(aborted.txn)
                return False
            return True
        if control_type == CONTROL_COMMIT:
            if producer_id in self._ongoing_committed:
                self._ongoing_committed.discard(producer_id)
                return False
            return True
        return False
