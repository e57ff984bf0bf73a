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


def assignment_configs(shard, group_id: str) -> dict:
    """What the assignor is given (Kafka stores it with the group epoch: a change starts a new
    assignment)."""
    return {"num.standby.replicas": str(num_standby_replicas(shard, group_id))}


def max_size(shard) -> int:
    return int(shard.config.get("group.streams.max.size"))
