"""A partition log that could not be opened: the partition is offline, the broker serves the rest.

Kafka takes a whole log dir offline when one of its files cannot be read; here only the damaged
partition goes: every read or write of it answers KAFKA_STORAGE_ERROR (what Kafka answers for a
partition on an offline dir), its files are left untouched for the operator, and the offsets last
checkpointed for it are kept, so checkpoints written meanwhile do not forget them. Restarting
after repairing (or removing) the partition dir brings it back.
"""

from __future__ import annotations

import shutil

from kbroker.protocol.errors import Errors, KafkaError


class OfflineLog:
    offline = True
    first_unstable_offset = None  # no open transaction can be read from it

    def __init__(self, dir_path: str, topic: str, partition: int, config, reason: str,
                 log_start_offset: int = 0, recovery_point: int = 0, high_watermark: int = 0):
        self.dir_path = dir_path
        self.topic = topic
        self.partition = partition
        self.config = config
        self.reason = reason
        self.topic_id = None
        self.segments: list = []
        self.log_start_offset = log_start_offset
        self.recovery_point = recovery_point
        self.high_watermark = max(high_watermark, log_start_offset)
        self.log_end_offset = max(self.high_watermark, recovery_point)
        self.size_in_bytes = 0
        self.recovery_stats = (0, 0)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def _unavailable(self, *args, **kwargs):
        raise KafkaError(Errors.KAFKA_STORAGE_ERROR,
                         f"partition {self.name} is offline: {self.reason}")

    def __getattr__(self, attr: str):
        # Any operation on the data (append, read, offsets by time, truncation, ...).
        if attr.startswith("__"):
            raise AttributeError(attr)
        return self._unavailable

    # background work and shutdown have nothing to do
    def flush_if_needed(self, now_ms=None) -> bool:
        return False

    def flush(self, now_ms=None) -> None:
        pass

    def delete_old_segments(self, now_ms=None) -> int:
        return 0

    def close(self) -> None:
        pass

    def delete(self) -> None:
        shutil.rmtree(self.dir_path, ignore_errors=True)

    def __repr__(self) -> str:
        return f"OfflineLog({self.name}: {self.reason})"
