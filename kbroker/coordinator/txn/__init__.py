"""The transaction coordinator (Kafka's TransactionCoordinator over ``__transaction_state``).

Key files:
- ``state`` — :class:`TxnState` with Kafka's codes and its transition table (one table, as
  Kafka's ``TransactionState.validPreviousStates``), and :class:`TxnMetadata`, the immutable
  state of one transactional id.
- ``records`` — ``__transaction_state`` keys and values in Kafka's formats (TransactionLogKey v0,
  TransactionLogValue v0), and the partition of a transactional id.
- ``shard`` — :class:`TxnShard`: the transactional ids of one ``__transaction_state`` partition;
  durable state changes only in ``replay``.
- ``operations`` — InitProducerId, AddPartitionsToTxn (and verify-only), AddOffsetsToTxn, EndTxn
  (v1, and v2 with an epoch bump per transaction and producer id rotation, KIP-890 part 2) and
  the timeout abort, each an operation returning a CoordinatorResult.
- ``describe`` — the read side: DescribeTransactions and ListTransactions with Kafka's filters.
- ``coordinator`` — :class:`TransactionCoordinator`: routes a transactional id to its shard,
  writes the markers of a transaction that reached PrepareCommit/PrepareAbort to each partition
  and then the CompleteCommit/CompleteAbort record, resumes markers after a load, and runs the
  periodic timeout scan; it holds the finalized ``transaction.version`` and adds a v2
  producer's partitions from Produce and TxnOffsetCommit.

Concurrency rule: as every coordinator (see :mod:`kbroker.coordinator`); the marker writer of a
transaction is one task, and the transaction stays in PrepareCommit/PrepareAbort (other requests
get CONCURRENT_TRANSACTIONS) until its Complete record is written.
"""
