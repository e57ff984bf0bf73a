"""Where a consumer group's timing comes from: its group configs (DescribeConfigs /
IncrementalAlterConfigs on the GROUP resource, ``consumer.session.timeout.ms`` ...) or else the
broker's ``group.consumer.*`` defaults."""

from __future__ import annotations

GROUP_CONFIG_SYNONYMS = {
    "consumer.session.timeout.ms": "group.consumer.session.timeout.ms",
    "consumer.heartbeat.interval.ms": "group.consumer.heartbeat.interval.ms",
    "consumer.assignment.interval.ms": "group.consumer.assignment.interval.ms",
}


def group_setting(shard, group_id: str, name: str) -> int:
    """A group config's value for ``group_id``: its override, or the broker's synonym. An
    override outside the broker's ``group.consumer.min.*`` / ``.max.*`` bounds (stored before
    the bounds changed) is capped to them, as Kafka's GroupConfig.evaluate does."""
    overrides = shard.group_configs(group_id)
    if name in overrides:
        from kbroker.coordinator.group.group_configs import GROUP_CONFIGS
        _, _, lower, upper, _ = GROUP_CONFIGS[name]
        try:
            value = int(overrides[name])
        except ValueError:  # not written by kbroker's validation: the broker's value
            return shard.config.get(GROUP_CONFIG_SYNONYMS[name])
        return min(max(value, shard.config.get(lower)), shard.config.get(upper))
    return shard.config.get(GROUP_CONFIG_SYNONYMS[name])


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
