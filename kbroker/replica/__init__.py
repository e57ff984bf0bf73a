"""Partitions as replicas: leadership, leader epoch, high watermark, and waiting for data.

Key files: ``partition`` (one partition and the only door to its log: role, leader epoch, high
watermark, last stable offset, ISR, commit waiters for acks=all, parked long-poll fetches, fetch
bounds), ``replica_manager`` (all partitions of this broker; creates and deletes their logs as
metadata changes; the background retention, flush and checkpoint jobs).

Single node today: this broker leads every partition, the ISR is just itself, and the high
watermark follows the log end offset as soon as an append lands, so every commit future is done
when ``append`` returns. Replication will feed follower log end offsets into
``Partition.update_follower_end_offset``; the same ``maybe_advance_high_watermark`` then makes
acks=all and coordinator writes wait.

Concurrency rule: owned by the event loop; no locks. Waiters are futures the partition completes;
a cancelled long-poll fetch (closed connection) unparks itself.
"""
