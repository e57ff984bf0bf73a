"""Group configs (KIP-848): ``consumer.session.timeout.ms``, ``consumer.heartbeat.interval.ms``
and ``consumer.assignment.interval.ms`` per group, set through IncrementalAlterConfigs on the
GROUP resource and read by the consumer-group coordinator
(:mod:`kbroker.coordinator.group.consumer.settings`).

Validation is Kafka's GroupConfig: an unknown name is INVALID_CONFIG ("Unknown group config
name: N"), a value must be an INT at least its minimum, and within the broker's
``group.consumer.min.*`` / ``group.consumer.max.*`` bounds (INVALID_CONFIG "N must be greater than
or equal to B"). Kafka's share.* and streams.* group configs are refused with INVALID_CONFIG:
kbroker has no share or streams groups, and a setting is never accepted to be ignored.

Storage: group configs are metadata, as in Kafka (its metadata log): IncrementalAlterConfigs
goes through the controller (``Controller.alter_group_configs``) into the image's
``group_configs``, stored by the metadata store (the single node's file, or
``/config/groups/<group>`` in ZooKeeper, announced by a ``/config/changes`` notification), and the
coordinator reads them from the current image at each use. Deleting a group keeps its configs, as
Kafka 4.3's DeleteGroups does.
"""

from __future__ import annotations

from kbroker.protocol.errors import Errors, KafkaError


# name -> (broker synonym, least value, broker lower bound key, broker upper bound key, doc)
GROUP_CONFIGS = {
    "consumer.session.timeout.ms": (
        "group.consumer.session.timeout.ms", 1, "group.consumer.min.session.timeout.ms",
        "group.consumer.max.session.timeout.ms",
        "The timeout to detect client failures when using the consumer group protocol."),
    "consumer.heartbeat.interval.ms": (
        "group.consumer.heartbeat.interval.ms", 1, "group.consumer.min.heartbeat.interval.ms",
        "group.consumer.max.heartbeat.interval.ms",
        "The heartbeat interval given to the members."),
    "consumer.assignment.interval.ms": (
        "group.consumer.assignment.interval.ms", 0, "group.consumer.min.assignment.interval.ms",
        "group.consumer.max.assignment.interval.ms",
        "The least time between two target assignments of the group."),
}
UNSUPPORTED_PREFIXES = {"share.": "share", "streams.": "streams"}
KNOWN_ELSEWHERE = {"errors.deadletterqueue.topic.name", "errors.deadletterqueue.copy.record.enable"}


def check(config, overrides: dict) -> dict:
    """The overrides as ints, or KafkaError INVALID_CONFIG (Kafka's messages)."""
    out = {}
    for name, raw in overrides.items():
        definition = GROUP_CONFIGS.get(name)
        if definition is None:
            for prefix, kind in UNSUPPORTED_PREFIXES.items():
                if name.startswith(prefix) or name in KNOWN_ELSEWHERE:
                    raise KafkaError(Errors.INVALID_CONFIG,
                                     f"{name} is not supported by kbroker: it has no "
                                     f"{kind if name.startswith(prefix) else 'streams'} groups")
            raise KafkaError(Errors.INVALID_CONFIG, f"Unknown group config name: {name}")
        synonym, least, lower, upper, _ = definition
        try:
            value = int(str(raw).strip())
        except ValueError:
            raise KafkaError(Errors.INVALID_CONFIG, f"Invalid value {raw} for configuration "
                                                    f"{name}: Not a number of type INT") from None
        if value < least:
            raise KafkaError(Errors.INVALID_CONFIG, f"Invalid value {value} for configuration "
                                                    f"{name}: Value must be at least {least}")
        if value < config.get(lower):
            raise KafkaError(Errors.INVALID_CONFIG,
                             f"{name} must be greater than or equal to {lower}")
        if value > config.get(upper):
            raise KafkaError(Errors.INVALID_CONFIG, f"{name} must be less than or equal to {upper}")
        out[name] = value
    return out
