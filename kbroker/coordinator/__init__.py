"""Coordinators: replayable state machines over internal topics (Kafka's CoordinatorRuntime).

Key files:
- ``runtime`` — :class:`CoordinatorRuntime`: one :class:`Shard` per partition of an internal topic
  (``__consumer_offsets`` today, ``__transaction_state`` later). It creates the topic on first use,
  loads a shard by replaying its partition from the log start offset, and runs operations: an
  operation returns ``(records, response)``; the records are appended to the shard's partition as
  one batch through the normal partition log (so they are in Kafka's on-disk format) and replayed
  into the shard once the append lands. Multi-broker replication will move "lands" to "committed".
- ``group/`` — the classic group coordinator (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, offsets,
  DescribeGroups, ListGroups, DeleteGroups).

Concurrency rule: a shard is owned by the event loop; operations and timers of a shard run one at a
time on it (every operation is synchronous; timers are ``loop.call_later`` handles the shard owns
and cancels), so there are no locks. A shard that is loading answers COORDINATOR_LOAD_IN_PROGRESS.
"""
