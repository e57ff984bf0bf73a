"""Consumer groups (KIP-848, ``group.protocol=consumer``) on the coordinator runtime.

Key files, one job each:
- ``member`` — an immutable member (epochs, subscription, owned partitions with their KIP-1251
  assignment epochs) and its states;
- ``group`` — a consumer group: members, epochs, target assignment and the indexes derived from
  them; the group's state (Empty, Assigning, Reconciling, Stable) follows from its epochs;
- ``records`` / ``replay`` — Kafka's records (types 3-8 and 16) and their pure replay;
- ``heartbeat`` — ConsumerGroupHeartbeat as an operation; ``subscription`` (regex resolution,
  group epoch, metadata hash), ``target`` (target assignment), ``assignors`` (uniform, range),
  ``reconcile`` (the member's state machine: revoke before assign, assign only released
  partitions), ``regex`` (RE2);
- ``membership`` — leaving, fencing, the downgrade to a classic group when only classic members
  are left, and the session / rebalance / classic join and sync timers;
- ``offsets`` — who may commit and fetch offsets (member epochs, STALE_MEMBER_EPOCH);
- ``migration`` — the online upgrade of a classic group to a consumer group;
  ``classic_members`` — classic members served inside a consumer group (JoinGroup, SyncGroup,
  Heartbeat, LeaveGroup); ``classic_protocol`` — the consumer embedded protocol they speak;
- ``settings`` — group configs over the broker's ``group.consumer.*`` defaults.

State and concurrency: a shard's consumer groups (in ``GroupShard.groups`` with the other types:
:mod:`kbroker.coordinator.group.types`) are wholly durable — an operation computes the next
members and target, returns their records with the response, and the runtime's replay installs
them; nothing else writes to a group. Timers live in
the runtime, keyed per shard, and die with it. The design is shared with streams groups
(KIP-1071): the same epochs, target assignment and reconciliation apply to tasks instead of
partitions, with their own records and assignor.
"""
