"""The group coordinator over ``__consumer_offsets``: classic groups here, KIP-848 consumer
groups in ``consumer/`` (same shards, same offsets; a group id is one or the other).

Key files: ``coordinator`` (the facade the handlers call: group -> shard routing, offset expiry
task), ``shard`` (one partition's groups and offsets, replay, the rebalance core and timers),
``state`` (ClassicGroup, Member, and the transitions table), one module per sub-protocol (``join``,
``sync``, ``heartbeat``, ``leave``, ``offsets``, ``admin``), ``records`` (Kafka's record formats and
the group -> partition hash).

Concurrency rule: everything runs on the event loop; a shard's operations are synchronous functions
returning a CoordinatorResult, run one at a time by the runtime, which also owns their timers (a
timer fires an operation), so a shard never sees two things at once.
"""
