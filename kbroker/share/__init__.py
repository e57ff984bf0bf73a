"""Share partitions: the data path of share groups (KIP-932).

Key files:
- ``state.py`` — one share partition's in-flight records, a pure state machine (AVAILABLE,
  ACQUIRED, ACKNOWLEDGED, ARCHIVING, ARCHIVED; delivery counts, acquisition-lock deadlines, the
  start offset);
- ``runs.py`` — the in-flight offsets as runs (one per fetched batch until an operation cuts
  it), with heaps of lock deadlines and AVAILABLE runs and counts per state;
- ``partition.py`` — that state with its I/O: loaded with ``persister.read``, written with
  ``persister.write``, records read from the replica's log;
- ``sessions.py`` — share sessions (epochs, limits, forgotten partitions);
- ``manager.py`` — every share partition of this broker, fetch with long polling,
  acknowledgements, releases, lock timers;
- ``settings.py`` — the per-group settings (``group.share.*`` defaults);
- ``dlq.py`` — the dead-letter-queue writer (KIP-1191): the records rejected or out of delivery
  attempts written to the group's DLQ topic, here or on the broker leading it.

Concurrency rule: everything runs on the broker's event loop; state changes are synchronous
between awaits (persister calls and long-poll waits), so no locks.
Imports: replica, metadata, config, protocol and ``kbroker.coordinator.share.persister``; never
handlers, server or log (the DLQ writer is handed its inter-broker channel by the server).
"""
