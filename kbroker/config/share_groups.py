"""The consistency Kafka 4.4 requires of the broker's ``group.share.*`` configs at start-up
(GroupCoordinatorConfig and ShareGroupConfig): each default within its min/max bounds, the
bounds in order, the heartbeat interval below the session timeout, exactly one assignor. A
broker with inconsistent values refuses to start, with Kafka's message naming the configs."""

from __future__ import annotations

from kbroker.config.types import ConfigError

# (value, lower bound, upper bound) of each share-group setting a group config may override
_BOUNDED = (
    ("group.share.heartbeat.interval.ms", "group.share.min.heartbeat.interval.ms",
     "group.share.max.heartbeat.interval.ms"),
    ("group.share.session.timeout.ms", "group.share.min.session.timeout.ms",
     "group.share.max.session.timeout.ms"),
    ("group.share.assignment.interval.ms", "group.share.min.assignment.interval.ms",
     "group.share.max.assignment.interval.ms"),
    ("group.share.record.lock.duration.ms", "group.share.min.record.lock.duration.ms",
     "group.share.max.record.lock.duration.ms"),
    ("group.share.delivery.count.limit", "group.share.min.delivery.count.limit",
     "group.share.max.delivery.count.limit"),
    ("group.share.partition.max.record.locks", "group.share.min.partition.max.record.locks",
     "group.share.max.partition.max.record.locks"),
)


def check(get) -> None:
    """``get(name)``: the config's value. Raises ConfigError on the first inconsistency."""
    for value, lower, upper in _BOUNDED:
        if get(upper) < get(lower):
            raise ConfigError(f"{upper} must be greater than or equal to {lower}", upper)
        if get(value) < get(lower):
            raise ConfigError(f"{value} must be greater than or equal to {lower}", value)
        if get(value) > get(upper):
            raise ConfigError(f"{value} must be less than or equal to {upper}", value)
    if get("group.share.heartbeat.interval.ms") >= get("group.share.session.timeout.ms"):
        raise ConfigError("group.share.heartbeat.interval.ms must be less than "
                          "group.share.session.timeout.ms", "group.share.heartbeat.interval.ms")
    assignors = get("group.share.assignors")
    if len(assignors) != 1:
        raise ConfigError(f"group.share.assignors must contain exactly one assignor, but found "
                          f"{len(assignors)}", "group.share.assignors")
