"""Partition logs on disk, in Apache Kafka's own formats (DumpLogSegments reads our files).

Key files:

- ``partition_log`` - :class:`PartitionLog`: one partition's segments; appends as leader
  (validation, idempotence, offset assignment), reads as file regions, recovery, retention,
  DeleteRecords, flush policy, truncation. :class:`LogConfig` is the per-topic configuration.
- ``log_manager`` - :class:`LogManager`: every log of the broker across its log dirs,
  ``meta.properties``, the offset checkpoint files and the clean-shutdown marker.
- ``segment`` - one ``.log`` segment with its ``.index`` / ``.timeindex`` (``index``).
- ``validation`` - checks on a produced batch, from its header (Kafka's LogValidator).
- ``recompression`` - a produced batch rebuilt in the topic's ``compression.type`` when that
  names another codec (LogValidator's rebuild: offsets, timestamps, producer fields).
- ``producer_state`` - idempotent producers' sequences, each producer's open transaction (the
  first unstable offset) and the ``.snapshot`` files.
- ``txn_index`` - the aborted-transaction index (``.txnindex``) that read_committed fetches use.
- ``leader_epoch`` - the leader epoch cache and ``leader-epoch-checkpoint``.
- ``checkpoint`` - the small text files (checkpoints, partition.metadata, meta.properties).
- ``file_region`` - :class:`FileRegion`, a slice of a segment sent with ``sendfile``.
- ``cleaner`` - log compaction for ``cleanup.policy=compact`` topics: which log to clean and how
  far, the ``cleaner-offset-checkpoint``, the background loop; ``cleaner_rewrite`` does one pass
  (offset map, regrouping, rewriting batches) and ``cleaner_swap`` the crash-safe segment swap
  (``.cleaned`` -> ``.swap`` -> ``.deleted``), completed or rolled back at start-up.

State machine per partition: ``log_start_offset <= high_watermark <= log_end_offset`` and
``recovery_point <= log_end_offset``; see :mod:`kbroker.log.partition_log`.

Concurrency rule: logs are owned by the event loop thread; every call is synchronous and there are
no locks. A :class:`FileRegion` stays valid after its segment is deleted (files are unlinked, not
closed; see :mod:`kbroker.log.file_region`).
"""

from kbroker.log.file_region import FileRegion
from kbroker.log.log_manager import LogManager
from kbroker.log.partition_log import AppendResult, LogConfig, PartitionLog, ReadResult
from kbroker.log.validation import RecordValidationError

__all__ = ["AppendResult", "FileRegion", "LogConfig", "LogManager", "PartitionLog", "ReadResult",
           "RecordValidationError"]
