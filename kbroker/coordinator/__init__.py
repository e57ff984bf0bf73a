"""Coordinators: replayable state machines over internal topics (Kafka's CoordinatorRuntime).

Key files:
- ``runtime`` — :class:`CoordinatorRuntime`: one :class:`Shard` per partition of an internal topic
  (``__consumer_offsets``, ``__transaction_state``) that this broker hosts. It creates
  the topic on first use, loads a shard by replaying its partition from the log start offset,
  unloads it (NOT_COORDINATOR) when leadership moves, owns the shards' timers, and runs
  operations: an operation returns a :class:`CoordinatorResult` (records, response, follow-ups) and
  never writes; the runtime appends the records as one batch through the shard's Partition,
  replays them, and answers when the append is committed; if it is not, the shard's durable state
  is restored from a snapshot taken before the replay.
- ``group/`` — the group coordinator: classic groups (JoinGroup, SyncGroup, Heartbeat, LeaveGroup)
  and, in ``group/consumer/``, KIP-848 consumer groups (ConsumerGroupHeartbeat,
  ConsumerGroupDescribe, online migration between the two); offsets, transactional offsets,
  DescribeGroups, ListGroups, DeleteGroups for both.
- ``txn/`` — the transaction coordinator (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
  EndTxn, markers, timeouts). A transactional batch written through the runtime (TxnOffsetCommit)
  is replayed as pending (``Shard.replay_transactional``) and settled by its marker
  (``Shard.replay_end_txn``; markers to a coordinator partition go through
  :meth:`CoordinatorRuntime.append_txn_marker`).

Concurrency rule: a shard is owned by the event loop; an operation, its append and its replay run
synchronously, so a shard sees one operation at a time and there are no locks; only the wait for
the commit is asynchronous, and commits complete in offset order. A shard that is loading answers
COORDINATOR_LOAD_IN_PROGRESS. Coordinators import neither ``handlers/`` nor ``server/`` nor
``log/``: record batches come from ``kbroker.protocol.records``, the log through the Partition.
"""
