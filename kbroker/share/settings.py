"""The share-group settings a share partition reads, per group.

Kafka reads them from the group's dynamic config (IncrementalAlterConfigs on a GROUP resource)
with the broker's ``group.share.*`` values as defaults. The share-partition manager takes a
callable ``share_group_settings(group_id) -> ShareGroupSettings``; :func:`broker_defaults` is the
one to use when no group configs exist (the share-groups coordinator provides the real one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from kbroker.share.state import Limits

READ_UNCOMMITTED, READ_COMMITTED = 0, 1


@dataclass(frozen=True)
class ShareGroupSettings:
    record_lock_duration_ms: int = 30000
    delivery_count_limit: int = 5
    partition_max_record_locks: int = 2000
    auto_offset_reset: str = "latest"  # share.auto.offset.reset: latest, earliest
    isolation_level: int = READ_UNCOMMITTED  # share.isolation.level

    def limits(self) -> Limits:
        return Limits(delivery_count_limit=self.delivery_count_limit,
                      max_record_locks=self.partition_max_record_locks,
                      lock_duration_ms=self.record_lock_duration_ms)


SettingsProvider = Callable[[str], ShareGroupSettings]


def broker_defaults(config) -> SettingsProvider:
    """Every group gets the broker's ``group.share.*`` values (read on each call, so a dynamic
    change applies to the next fetch)."""
    def settings(group_id: str) -> ShareGroupSettings:
        return ShareGroupSettings(
            record_lock_duration_ms=config.get("group.share.record.lock.duration.ms"),
            delivery_count_limit=config.get("group.share.delivery.count.limit"),
            partition_max_record_locks=config.get("group.share.partition.max.record.locks"))
    return settings
