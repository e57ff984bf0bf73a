"""Partitions as replicas: leadership, leader epoch, high watermark, and waiting for data.

Key files: ``partition`` (one partition: its log, epoch, high watermark, fetch waiters),
``replica_manager`` (all partitions of this broker; creates and deletes their logs).

Single node today: this broker leads every partition, the ISR is just itself, and the high
watermark follows the log end offset as soon as an append lands. Multi-broker replication will
move the high watermark on follower fetches instead; everything that reads the high watermark
already goes through :class:`Partition`.

Concurrency rule: owned by the event loop; no locks. Long-poll fetches wait on futures that an
append resolves.
"""
