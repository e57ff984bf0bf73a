"""Streams groups (KIP-1071, ``group.protocol=streams``) on the coordinator runtime.

Key files, one job each:
- ``member`` — an immutable member (process, endpoint, client tags, epochs) and its active,
  standby and warm-up tasks;
- ``topology`` — the topology a member sends and its configured form against the topics that
  exist (source topic checks, internal topic partition counts, topics to create).
"""
