"""Share groups (KIP-932, ``group.type=share``) on the coordinator runtime, as Apache Kafka 4.4.0
does them: the group side (membership and assignment); the share partitions themselves and their
state live in ``kbroker/share/`` and the share coordinator.

Key files, one job each:
- ``member`` / ``group`` — an immutable member (subscription, epochs, assigned partitions) and a
  share group (members, epochs, target assignment, which partitions are initialized);
- ``records`` / ``replay`` — Kafka's records (types 10-15) and their pure replay;
- ``heartbeat`` — ShareGroupHeartbeat as an operation (join, heartbeat, subscription changes);
- ``target`` / ``assignor`` — the target assignment over the initialized partitions, by Kafka's
  ``simple`` share assignor (a partition may go to several members);
- ``initialize`` — which subscribed partitions still need their share state initialized through
  the persister (ShareGroupStatePartitionMetadata); only initialized partitions are assigned;
- ``membership`` — leaving and session expiry (both move the group epoch and the target);
- ``admin`` — DeleteGroups (the share state is deleted through the persister first) and the
  coordinator's part of Describe/Alter/DeleteShareGroupOffsets;
- ``settings`` — group configs over the broker's ``group.share.*`` defaults.

Unlike consumer groups there is no revocation: a partition can be shared, so a member moves to
the target assignment at once. Durable state changes only by replaying the records an operation
returns; the persister calls (initialize, delete) are made by the handlers between coordinator
writes, as Kafka's GroupCoordinatorService makes them outside its shards.
"""
