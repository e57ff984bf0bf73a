"""Where a share group's settings come from: its group configs (``share.*`` on the GROUP
resource) or else the broker's ``group.share.*`` defaults."""

from __future__ import annotations

from kbroker.coordinator.group.modern import group_setting


def session_timeout_ms(shard, group_id: str) -> int:
    return int(group_setting(shard, group_id, "share.session.timeout.ms"))


def heartbeat_interval_ms(shard, group_id: str) -> int:
    return int(group_setting(shard, group_id, "share.heartbeat.interval.ms"))


def assignment_interval_ms(shard, group_id: str) -> int:
    return int(group_setting(shard, group_id, "share.assignment.interval.ms"))


def max_size(shard) -> int:
    return int(shard.config.get("group.share.max.size"))


def initialize_retry_interval_ms(shard) -> int:
    return int(shard.config.get("group.share.initialize.retry.interval.ms"))
