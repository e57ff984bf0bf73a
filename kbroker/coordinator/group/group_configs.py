"""Group configs (KIP-848, KIP-1071, KIP-932): per-group settings of consumer, streams and share
groups, set
through IncrementalAlterConfigs on the GROUP resource and read by their coordinators
(:func:`kbroker.coordinator.group.modern.group_setting`); a group without an override uses the
broker config named as its synonym.

The table is Kafka 4.4's GroupConfig for the group types kbroker has: ``consumer.*``,
``share.*`` and ``streams.*``. Validation follows it, in its order: an unknown name is INVALID_CONFIG ("Unknown
group config name: N"); a value must parse as its type ("Invalid value V for configuration N: Not
a number of type INT", "... Expected value to be either true or false") and pass the type's own
check ("Value must be at least L"); then the broker's bounds ("N must be in the range A to B
inclusive.", "N must be less than or equal to B", "N must be greater than or equal to A"), the
streams assignor must be registered in ``group.streams.assignors``, rack-aware tags must not
repeat, and a session timeout must exceed its heartbeat interval ("S must be greater than H").
The share groups' dead-letter-queue configs (KIP-1191) are checked as Kafka 4.4 checks them
when they are set: only a topic name starting with ``__`` is refused ("errors.deadletterqueue.
topic.name: DLQ topic name must not start with '__'"); the prefix, the topic's existence and its
``errors.deadletterqueue.group.enable`` are checked when a record is written to the queue
(:mod:`kbroker.share.dlq`). ``share.auto.offset.reset``,
``share.isolation.level`` and ``share.renew.acknowledge.enable`` have no broker synonym (Kafka's
fixed defaults apply). :func:`share_group_settings` is what the share partitions read.

Internal configs (Kafka's ``defineInternal``: ``streams.task.offset.interval.ms``,
``streams.num.warmup.replicas``, ``streams.acceptable.recovery.lag``,
``streams.assignor.offload.enable``) are settable but shown by DescribeConfigs only once set,
as Kafka does.

Storage: group configs are metadata, as in Kafka (its metadata log): IncrementalAlterConfigs
goes through the controller (``Controller.alter_group_configs``) into the image's
``group_configs``, stored by the metadata store (the single node's file, or
``/config/groups/<group>`` in ZooKeeper, announced by a ``/config/changes`` notification), and the
coordinator reads them from the current image at each use. Deleting a group keeps its configs, as
Kafka 4.3's DeleteGroups does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kbroker.protocol.errors import Errors, KafkaError


INT, LONG, BOOLEAN, STRING, LIST = "INT", "LONG", "BOOLEAN", "STRING", "LIST"


@dataclass(frozen=True)
class GroupConfigDef:
    name: str
    type: str
    synonym: str | None          # the broker config a group without an override uses
    doc: str
    least: int | None = None     # the type's own lower bound (Kafka's Range.atLeast)
    lower: str | None = None     # broker config of the lower bound
    upper: str | None = None     # broker config of the upper bound
    internal: bool = False       # shown by DescribeConfigs only once set
    default: object = None       # the value without an override, when there is no synonym
    check: object = None         # a further check of the parsed value: fn(name, value)


_D = GroupConfigDef
# In Kafka's order of validation.
_TABLE = (
    _D("consumer.session.timeout.ms", INT, "group.consumer.session.timeout.ms",
       "The timeout to detect client failures when using the consumer group protocol.", 1,
       "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
    _D("consumer.heartbeat.interval.ms", INT, "group.consumer.heartbeat.interval.ms",
       "The heartbeat interval given to the members of a consumer group.", 1,
       "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms"),
    _D("consumer.assignment.interval.ms", INT, "group.consumer.assignment.interval.ms",
       "The interval between assignment updates for a consumer group.", 0,
       "group.consumer.min.assignment.interval.ms", "group.consumer.max.assignment.interval.ms"),
    _D("share.session.timeout.ms", INT, "group.share.session.timeout.ms",
       "The timeout to detect client failures when using the share group protocol.", 1,
       "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
    _D("share.heartbeat.interval.ms", INT, "group.share.heartbeat.interval.ms",
       "The heartbeat interval given to the members of a share group.", 1,
       "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
    _D("share.record.lock.duration.ms", INT, "group.share.record.lock.duration.ms",
       "The record acquisition lock duration in milliseconds for share groups.", 1000,
       "group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms"),
    _D("share.delivery.count.limit", INT, "group.share.delivery.count.limit",
       "The maximum number of delivery attempts for a record delivered to a share group.", 2,
       "group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit"),
    _D("share.partition.max.record.locks", INT, "group.share.partition.max.record.locks",
       "Share-group record lock limit per share-partition.", 100,
       "group.share.min.partition.max.record.locks",
       "group.share.max.partition.max.record.locks"),
    _D("share.auto.offset.reset", STRING, None,
       "The strategy to initialize the share-partition start offset: earliest (the earliest "
       "offset), latest (the latest offset) or by_duration:<ISO-8601 duration> (the first "
       "offset whose timestamp is at or after that long ago).", default="latest",
       check=lambda name, value: check_auto_offset_reset(name, value)),
    _D("share.isolation.level", STRING, None,
       "Controls how to read records written transactionally: read_committed delivers only "
       "committed transactional records, read_uncommitted (the default) all of them.",
       default="read_uncommitted",
       check=lambda name, value: _one_of(name, value, ("read_committed", "read_uncommitted"))),
    _D("share.renew.acknowledge.enable", BOOLEAN, None,
       "Whether the renew acknowledge type is enabled for the share group.", default=True),
    _D("errors.deadletterqueue.topic.name", STRING, None,
       "The name of the topic to be used as the dead-letter queue (DLQ) topic for this share "
       "group. If blank (the default), the group does not have a DLQ topic.", default="",
       check=lambda name, value: check_dlq_topic_name(name, value)),
    _D("errors.deadletterqueue.copy.record.enable", BOOLEAN, None,
       "When writing onto the dead-letter queue topic, whether to copy the original record onto "
       "the DLQ topic, or just write a record containing the context information headers.",
       default=False),
    _D("share.assignment.interval.ms", INT, "group.share.assignment.interval.ms",
       "The interval between assignment updates for a share group.", 0,
       "group.share.min.assignment.interval.ms", "group.share.max.assignment.interval.ms"),
    _D("streams.session.timeout.ms", INT, "group.streams.session.timeout.ms",
       "The timeout to detect client failures when using the streams group protocol.", 1,
       "group.streams.min.session.timeout.ms", "group.streams.max.session.timeout.ms"),
    _D("streams.heartbeat.interval.ms", INT, "group.streams.heartbeat.interval.ms",
       "The heartbeat interval given to the members.", 1,
       "group.streams.min.heartbeat.interval.ms", "group.streams.max.heartbeat.interval.ms"),
    _D("streams.num.standby.replicas", INT, "group.streams.num.standby.replicas",
       "The number of standby replicas for each task.", 0, None,
       "group.streams.max.standby.replicas"),
    _D("streams.initial.rebalance.delay.ms", INT, "group.streams.initial.rebalance.delay.ms",
       "The amount of time the group coordinator will wait for more streams clients to join a "
       "new group before performing the first rebalance. A longer delay means potentially "
       "fewer rebalances.", 0),
    _D("streams.assignment.interval.ms", INT, "group.streams.assignment.interval.ms",
       "The interval between assignment updates for a streams group.", 0,
       "group.streams.min.assignment.interval.ms", "group.streams.max.assignment.interval.ms"),
    _D("streams.assignor.offload.enable", BOOLEAN, "group.streams.assignor.offload.enable",
       "Whether to offload streams group assignment to a group coordinator background thread "
       "(Kafka 4.4.0 computes it inside the heartbeat whatever the value, as kbroker does).",
       internal=True),
    _D("streams.task.offset.interval.ms", INT, "group.streams.task.offset.interval.ms",
       "The interval in which the warmup task changelog offsets on a client are updated on the "
       "broker. The offsets are sent with the next heartbeat after this time has passed.", 1,
       "group.streams.min.task.offset.interval.ms", internal=True),
    _D("streams.num.warmup.replicas", INT, "group.streams.num.warmup.replicas",
       "The maximum number of warmup task replicas (Kafka 4.4.0's assignment refiner hands out "
       "none yet, and neither does kbroker's).", 0, None, "group.streams.max.warmup.replicas",
       internal=True),
    _D("streams.rack.aware.assignment.tags", LIST, "group.streams.rack.aware.assignment.tags",
       "List of client tag keys used to distribute standby replicas across Kafka Streams "
       "instances. When configured, and the used broker-side assignor supports it, it will make "
       "a best-effort to distribute standby tasks over each client tag dimension."),
    _D("streams.acceptable.recovery.lag", LONG, "group.streams.acceptable.recovery.lag",
       "The maximum acceptable lag (number of offsets to catch up) for a client to be "
       "considered caught-up enough to receive an active task assignment.", 0, internal=True),
    _D("streams.assignor.name", STRING, "group.streams.assignors",
       "The task assignor to use for this streams group, selected by short name from the "
       "assignors registered via the broker configuration group.streams.assignors. When unset, "
       "the group defaults to the first assignor configured in the broker's "
       "group.streams.assignors setting. Changing the assignor does not trigger a rebalance for "
       "the group; the new assignor takes effect on the next rebalance."),
)
GROUP_CONFIGS = {d.name: d for d in _TABLE}
SESSION_HEARTBEAT = (("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
                     ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
                     ("streams.session.timeout.ms", "streams.heartbeat.interval.ms"))


def default_value(config, definition: GroupConfigDef):
    """The broker's value for a group without an override (the first registered assignor for
    ``streams.assignor.name``)."""
    if definition.synonym is None:
        return definition.default
    value = config.get(definition.synonym)
    if definition.name == "streams.assignor.name":
        return value[0]
    return value


def render(definition: GroupConfigDef, value) -> str:
    """A value as DescribeConfigs shows it."""
    if definition.type == BOOLEAN:
        return "true" if value else "false"
    if definition.type == LIST:
        return ",".join(value)
    return str(value)


def _parse(definition: GroupConfigDef, raw):
    name = definition.name
    text = str(raw).strip()
    if definition.type in (INT, LONG):
        bits = 31 if definition.type == INT else 63
        try:
            value = int(text)
        except ValueError:
            raise KafkaError(Errors.INVALID_CONFIG, f"Invalid value {raw} for configuration "
                                                    f"{name}: Not a number of type "
                                                    f"{definition.type}") from None
        if not -(1 << bits) <= value < (1 << bits):
            raise KafkaError(Errors.INVALID_CONFIG, f"Invalid value {raw} for configuration "
                                                    f"{name}: Not a number of type "
                                                    f"{definition.type}")
        if definition.least is not None and value < definition.least:
            raise KafkaError(Errors.INVALID_CONFIG, f"Invalid value {value} for configuration "
                                                    f"{name}: Value must be at least "
                                                    f"{definition.least}")
        return value
    if definition.type == BOOLEAN:
        if text.lower() not in ("true", "false"):
            raise KafkaError(Errors.INVALID_CONFIG, f"Invalid value {raw} for configuration "
                                                    f"{name}: Expected value to be either true "
                                                    f"or false")
        return text.lower() == "true"
    if definition.type == LIST:
        return [] if not text else [t for t in re.split(r"\s*,\s*", text)]
    return text


def check(config, overrides: dict) -> dict:
    """The overrides parsed to their types, or KafkaError INVALID_CONFIG (Kafka's messages)."""
    for name in overrides:
        if name not in GROUP_CONFIGS:
            raise KafkaError(Errors.INVALID_CONFIG, f"Unknown group config name: {name}")
    tags = overrides.get("streams.rack.aware.assignment.tags")
    if tags is not None:
        parsed_tags = _parse(GROUP_CONFIGS["streams.rack.aware.assignment.tags"], tags)
        if len(set(parsed_tags)) != len(parsed_tags):
            raise KafkaError(Errors.INVALID_CONFIG, "streams.rack.aware.assignment.tags must not "
                                                    "contain duplicate tag keys.")
    out = {name: _parse(GROUP_CONFIGS[name], raw) for name, raw in overrides.items()}
    for definition in _TABLE:
        value = out.get(definition.name)
        if value is not None and definition.check is not None:
            definition.check(definition.name, value)
        if value is None or definition.type not in (INT, LONG):
            continue
        _check_bounds(config, definition, value)
    assignor = out.get("streams.assignor.name")
    if assignor is not None:
        registered = config.get("group.streams.assignors")
        if assignor not in registered:
            raise KafkaError(Errors.INVALID_CONFIG,
                             f"streams.assignor.name '{assignor}' is not a registered task "
                             f"assignor. Registered assignors are: [{', '.join(registered)}].")
    for session_name, heartbeat_name in SESSION_HEARTBEAT:
        if session_name in out or heartbeat_name in out:
            session = out.get(session_name, config.get(GROUP_CONFIGS[session_name].synonym))
            heartbeat = out.get(heartbeat_name,
                                config.get(GROUP_CONFIGS[heartbeat_name].synonym))
            if session <= heartbeat:
                raise KafkaError(Errors.INVALID_CONFIG,
                                 f"{session_name} must be greater than {heartbeat_name}")
    return out


def _check_bounds(config, definition: GroupConfigDef, value: int) -> None:
    name = definition.name
    lower = config.get(definition.lower) if definition.lower else None
    upper = config.get(definition.upper) if definition.upper else None
    if lower is not None and upper is not None:
        if not lower <= value <= upper:
            raise KafkaError(Errors.INVALID_CONFIG,
                             f"{name} must be in the range {lower} to {upper} inclusive.")
    elif upper is not None and value > upper:
        raise KafkaError(Errors.INVALID_CONFIG, f"{name} must be less than or equal to {upper}")
    elif lower is not None and value < lower:
        raise KafkaError(Errors.INVALID_CONFIG,
                         f"{name} must be greater than or equal to {lower}")


def stored_value(config, name: str, stored: str):
    """A stored override as the coordinator uses it: parsed to its type and, for a number,
    capped to the broker's current bounds (Kafka's GroupConfig.evaluate: an override stored
    before the bounds changed still applies, within them). None when it no longer parses (not
    written by kbroker's validation): the broker's value applies."""
    definition = GROUP_CONFIGS[name]
    try:
        value = _parse(definition, stored)
    except KafkaError:
        return None
    if definition.type in (INT, LONG):
        if definition.lower:
            value = max(value, config.get(definition.lower))
        if definition.upper:
            value = min(value, config.get(definition.upper))
    return value


# --- share groups ----------------------------------------------------------------------------------

_ISO_DURATION = re.compile(r"P(?:([0-9]+)D)?(?:T(?:([0-9]+)H)?(?:([0-9]+)M)?"
                           r"(?:([0-9]+)(?:[.,]([0-9]{1,9}))?S)?)?", re.IGNORECASE)


def parse_duration_ms(text: str) -> int | None:
    """A non-negative ISO-8601 duration as Java's Duration.parse reads it (PnDTnHnMn.nS), in ms;
    None when it does not parse (or is negative: Kafka refuses a negative duration)."""
    m = _ISO_DURATION.fullmatch(text.strip())
    if m is None or not any(m.groups()[:4]) or text.strip().upper().endswith("T"):
        return None
    days, hours, minutes, seconds = (int(g or 0) for g in m.groups()[:4])
    millis = int((m.group(5) or "").ljust(3, "0")[:3])
    return (((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000 + millis


def check_auto_offset_reset(name: str, value: str) -> None:
    """Kafka's ShareGroupAutoOffsetResetStrategy.Validator: earliest, latest or
    by_duration:<non-negative ISO-8601 duration> (case-insensitive)."""
    lowered = value.strip().lower()
    if lowered in ("earliest", "latest"):
        return
    if lowered.startswith("by_duration:"):
        if parse_duration_ms(value.strip()[len("by_duration:"):]) is not None:
            return
    raise KafkaError(Errors.INVALID_CONFIG,
                     f"Invalid value {value} for configuration {name}: Invalid value `{value}` "
                     f"for configuration {name}. The value must be either 'earliest', 'latest' "
                     f"or of the format 'by_duration:<PnDTnHnMn.nS>'.")


def check_dlq_topic_name(name: str, value: str) -> None:
    """The one check Kafka 4.4's GroupConfig makes of a DLQ topic name when it is set; the
    others wait for the first record written to the queue."""
    if value.startswith("__"):
        raise KafkaError(Errors.INVALID_CONFIG,
                         f"{name}: DLQ topic name must not start with '__'")


def _one_of(name: str, value: str, allowed: tuple) -> None:
    if value not in allowed:
        raise KafkaError(Errors.INVALID_CONFIG,
                         f"Invalid value {value} for configuration {name}: String must be one "
                         f"of: {', '.join(allowed)}")


@dataclass(frozen=True)
class ShareGroupSettings:
    """What a share partition needs of its group's configs (override, else the broker's
    ``group.share.*`` value, else Kafka's fixed default)."""
    record_lock_duration_ms: int
    delivery_count_limit: int
    partition_max_record_locks: int
    auto_offset_reset: str          # "earliest", "latest" or "by_duration:<ISO-8601>"
    isolation_level: int            # Kafka's IsolationLevel ids: 0 read_uncommitted, 1 committed
    renew_acknowledge_enable: bool
    dlq_topic_name: str = ""        # errors.deadletterqueue.topic.name ("" : no DLQ)
    dlq_copy_record: bool = False   # errors.deadletterqueue.copy.record.enable

    @property
    def auto_offset_reset_duration_ms(self) -> int | None:
        """For by_duration: how far back the start offset is looked up, in ms."""
        if not self.auto_offset_reset.lower().startswith("by_duration:"):
            return None
        return parse_duration_ms(self.auto_offset_reset[len("by_duration:"):])


def group_value(config, overrides: dict, name: str):
    """One group config's value from ``overrides`` (as stored) or its default."""
    if name in overrides:
        value = stored_value(config, name, overrides[name])
        if value is not None:
            return value
    return default_value(config, GROUP_CONFIGS[name])


def share_group_settings_of(config, overrides: dict) -> ShareGroupSettings:
    def get(name):
        return group_value(config, overrides, name)
    reset = str(get("share.auto.offset.reset")).strip()
    head, colon, duration = reset.partition(":")
    return ShareGroupSettings(
        record_lock_duration_ms=int(get("share.record.lock.duration.ms")),
        delivery_count_limit=int(get("share.delivery.count.limit")),
        partition_max_record_locks=int(get("share.partition.max.record.locks")),
        auto_offset_reset=head.lower() + colon + duration,
        isolation_level=1 if get("share.isolation.level") == "read_committed" else 0,
        renew_acknowledge_enable=bool(get("share.renew.acknowledge.enable")),
        dlq_topic_name=str(get("errors.deadletterqueue.topic.name")),
        dlq_copy_record=bool(get("errors.deadletterqueue.copy.record.enable")))
