"""Streams groups (KIP-1071, ``group.protocol=streams``) on the coordinator runtime, as Apache
Kafka 4.4.0 does them.

Key files, one job each:
- ``member`` — an immutable member (process, endpoint, client tags, epochs) and its active
  (with assignment epochs), standby and warm-up tasks;
- ``group`` — a streams group: members, topology, epochs, target assignment, who owns each task
  now; its state (Empty, NotReady, Assigning, Reconciling, Stable) follows from them;
- ``topology`` — the topology a member sends and its configured form against the topics that
  exist (source topic checks, internal topic partition counts, topics to create);
- ``records`` / ``replay`` — Kafka's records (types 17, 19-23) and their pure replay;
- ``heartbeat`` — StreamsGroupHeartbeat as an operation; ``target`` (target assignment),
  ``assignor`` (Kafka's sticky task assignor), ``reconcile`` (revoke before assign, assign only
  released tasks);
- ``membership`` — leaving (and a static member's temporary leave), fencing, session and
  rebalance timers;
- ``offsets`` — who may commit and fetch offsets (member epochs, task assignment epochs);
- ``settings`` — group configs over the broker's ``group.streams.*`` defaults.

Durable state changes only by replaying the records an operation returns; the configured
topology, task offsets and the endpoint-information epoch are derived and kept in memory, as in
Kafka.
"""
