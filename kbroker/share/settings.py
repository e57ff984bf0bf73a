"""The share-group settings a share partition reads, per group.

Kafka reads them from the group's dynamic config (IncrementalAlterConfigs on a GROUP resource)
with the broker's ``group.share.*`` values as defaults. The share-partition manager takes a
callable ``share_group_settings(group_id)``: the broker passes the group coordinator's
(``GroupCoordinator.share_group_settings``, whose result has the fields of
:class:`ShareGroupSettings`); :func:`broker_defaults` serves tests and tools without group configs.
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
    auto_offset_reset: str = "latest"  # share.auto.offset.reset: latest, earliest, by_duration:D
    isolation_level: int = READ_UNCOMMITTED  # share.isolation.level
    renew_acknowledge_enable: bool = True  # share.renew.acknowledge.enable (KIP-1222)
    auto_offset_reset_duration_ms: int | None = None  # by_duration's duration
    dlq_topic_name: str = ""  # errors.deadletterqueue.topic.name (KIP-1191); "": no DLQ
    dlq_copy_record: bool = False  # errors.deadletterqueue.copy.record.enable


SettingsProvider = Callable[[str], ShareGroupSettings]


def limits_of(settings, dlq_supported: bool = False) -> Limits:
    """``dlq_supported``: the cluster's share.version allows dead-letter queues; the group has
    one when its ``errors.deadletterqueue.topic.name`` is set too (Kafka's
    isDLQEnabledForGroup, checked at every transition)."""
    return Limits(delivery_count_limit=settings.delivery_count_limit,
                  max_record_locks=settings.partition_max_record_locks,
                  lock_duration_ms=settings.record_lock_duration_ms,
                  renew_enabled=settings.renew_acknowledge_enable,
                  dead_letter=dlq_supported and bool(getattr(settings, "dlq_topic_name", "")))


def broker_defaults(config) -> SettingsProvider:
    """Every group gets the broker's ``group.share.*`` values (read on each call, so a dynamic
    change applies to the next fetch)."""
    def settings(group_id: str) -> ShareGroupSettings:
        return ShareGroupSettings(
            record_lock_duration_ms=config.get("group.share.record.lock.duration.ms"),
            delivery_count_limit=config.get("group.share.delivery.count.limit"),
            partition_max_record_locks=config.get("group.share.partition.max.record.locks"))
    return settings
