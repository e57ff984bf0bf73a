"""Partitions as replicas: leadership, leader epoch, high watermark, and waiting for data.

Key files: ``partition`` (one partition and the only door to its log: role, leader epoch, high
watermark, last stable offset, commit waiters for acks=all, parked long-poll fetches, fetch
bounds, leader/follower transitions with leader-epoch fencing, follower appends and truncation),
``followers`` (the leader's view of its followers: fetch positions, ISR expand/shrink through the
injected ISR writer, rack-aware preferred read replica), ``replica_manager`` (all partitions of
this broker; creates and deletes their logs and sets their roles as metadata images change;
leadership listeners; the background retention, flush and checkpoint jobs), ``fetcher`` (replica
fetcher tasks per leader broker: truncation by OffsetForLeaderEpoch / diverging epoch, Fetch,
follower append), ``broker_client`` (the inter-broker connection, with the inter-broker
listener's TLS and SASL; protocol and security imports only).

Single node: this broker leads every partition, the ISR is just itself, and the high watermark
follows the log end offset as soon as an append lands, so every commit future is done when
``append`` returns; no fetcher runs. Cluster (an image with live brokers, and
``ReplicaManager.start_replication`` called by the wiring): followers fetch from leaders, each
follower fetch moves its position on the leader and with it the HW, which completes acks=all.

Concurrency rule: owned by the event loop; no locks. Waiters are futures the partition completes;
a cancelled long-poll fetch (closed connection) unparks itself. Each replica fetcher is one task
owning its partitions' fetch states; an ISR write is one task per partition, at most one at once.
"""
