"""Where a share group's settings come from: the broker's ``group.share.*`` configs. (Group
configs ``share.*`` on the GROUP resource are refused until they are wired in here.)"""

from __future__ import annotations


def session_timeout_ms(shard, group_id: str) -> int:
    return int(shard.config.get("group.share.session.timeout.ms"))


def heartbeat_interval_ms(shard, group_id: str) -> int:
    return int(shard.config.get("group.share.heartbeat.interval.ms"))


def assignment_interval_ms(shard, group_id: str) -> int:
    return int(shard.config.get("group.share.assignment.interval.ms"))


def max_size(shard) -> int:
    return int(shard.config.get("group.share.max.size"))


def initialize_retry_interval_ms(shard) -> int:
    return int(shard.config.get("group.share.initialize.retry.interval.ms"))
