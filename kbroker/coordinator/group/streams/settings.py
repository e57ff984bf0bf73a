"""Where a streams group's settings come from: its group configs (``streams.*`` on the GROUP
resource) or else the broker's ``group.streams.*`` defaults."""

from __future__ import annotations

from kbroker.coordinator.group.modern import group_setting


def session_timeout_ms(shard, group_id: str) -> int:
    return int(group_setting(shard, group_id, "streams.session.timeout.ms"))


def heartbeat_interval_ms(shard, group_id: str) -> int:
    return int(group_setting(shard, group_id, "streams.heartbeat.interval.ms"))


def assignment_interval_ms(shard, group_id: str) -> int:
    return int(group_setting(shard, group_id, "streams.assignment.interval.ms"))


def initial_rebalance_delay_ms(shard, group_id: str) -> int:
    return int(group_setting(shard, group_id, "streams.initial.rebalance.delay.ms"))


def num_standby_replicas(shard, group_id: str) -> int:
    return int(group_setting(shard, group_id, "streams.num.standby.replicas"))


def acceptable_recovery_lag(shard, group_id: str) -> int:
    return int(group_setting(shard, group_id, "streams.acceptable.recovery.lag"))


def task_offset_interval_ms(shard, group_id: str) -> int:
    return int(group_setting(shard, group_id, "streams.task.offset.interval.ms"))


def rack_aware_assignment_tags(shard, group_id: str) -> list:
    value = group_setting(shard, group_id, "streams.rack.aware.assignment.tags")
    if isinstance(value, str):
        value = [t.strip() for t in value.split(",")]
    return [t for t in value or () if t]


def assignment_configs(shard, group_id: str) -> dict:
    """What the assignor is given (Kafka stores it with the group epoch: a change starts a new
    assignment): ``num.standby.replicas``, and ``rack.aware.assignment.tags`` when set."""
    configs = {"num.standby.replicas": str(num_standby_replicas(shard, group_id))}
    tags = rack_aware_assignment_tags(shard, group_id)
    if tags:
        configs["rack.aware.assignment.tags"] = ",".join(tags)
    return configs


def max_size(shard) -> int:
    return int(shard.config.get("group.streams.max.size"))
