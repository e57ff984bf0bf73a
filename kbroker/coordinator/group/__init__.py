"""The group coordinator over ``__consumer_offsets``: classic groups here, KIP-848 consumer
groups in ``consumer/``, KIP-1071 streams groups in ``streams/``, KIP-932 share groups in
``share/`` (same shards, same offsets; a group id is a group of one type).

Key files: ``coordinator`` (the facade the handlers call: group -> shard routing, offset expiry
task), ``shard`` (one partition's groups and offsets, replay, the classic rebalance core and
timers), ``types`` (the Group interface every group type implements), ``registry`` (the group
types: the records each owns, its replay and membership modules), ``state`` (ClassicGroup, Member,
and the transitions table), ``classic`` (classic groups as a registered type: their record's
replay, load and unload), ``parked`` (the answers to a classic member's parked
JoinGroup/SyncGroup), one module per sub-protocol (``join``, ``sync``, ``heartbeat``, ``leave``,
``offsets``, ``admin``), ``records`` (Kafka's record formats), ``modern`` (what the consumer,
streams and share groups share).

The group interface: a shard keeps one map of groups (``GroupShard.groups``: group id -> a
ClassicGroup, ConsumerGroup, StreamsGroup or ShareGroup, each implementing
:class:`types.Group`) and dispatches by the object: listing, deletion, OffsetDelete, offset
expiry, the durable view. ``GroupShard.group_of_type`` is the one place the id-collision rule
lives ("the group of this id if it is of type T, else Kafka's GROUP_ID_NOT_FOUND"). Replay finds
the type that owns a record type in ``registry.GROUP_TYPES``. Adding a group type: a package (the
group class implementing ``Group``, its records, ``replay`` and ``membership`` modules and its
operations) and one line in ``GROUP_TYPES``.

Concurrency rule: everything runs on the event loop; a shard's operations are synchronous functions
returning a CoordinatorResult, run one at a time by the runtime, which also owns their timers (a
timer fires an operation), so a shard never sees two things at once.
"""
