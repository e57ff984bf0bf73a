"""Where a consumer group's timing comes from: its group configs (DescribeConfigs /
IncrementalAlterConfigs on the GROUP resource, ``consumer.session.timeout.ms`` ...) or else the
broker's ``group.consumer.*`` defaults."""

from __future__ import annotations

from kbroker.coordinator.group.modern import group_setting


def session_timeout_ms(shard, group_id: str) -> int:
    return group_setting(shard, group_id, "consumer.session.timeout.ms")


def heartbeat_interval_ms(shard, group_id: str) -> int:
    return group_setting(shard, group_id, "consumer.heartbeat.interval.ms")


def assignment_interval_ms(shard, group_id: str) -> int:
    return group_setting(shard, group_id, "consumer.assignment.interval.ms")


def default_assignor(shard) -> str:
    return shard.config.get("group.consumer.assignors")[0]


def migration_policy(shard) -> str:
    return str(shard.config.get("group.consumer.migration.policy")).lower()


def upgrade_enabled(shard) -> bool:
    return migration_policy(shard) in ("upgrade", "bidirectional")


def downgrade_enabled(shard) -> bool:
    return migration_policy(shard) in ("downgrade", "bidirectional")
