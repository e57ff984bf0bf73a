"""Value types, sources, parsers and validators shared by every config key."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Any, Callable

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
MS_PER_MINUTE = 60_000
MS_PER_HOUR = 3_600_000


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the key. Handlers map it to
    INVALID_CONFIG; the CLI prints it and exits 2."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class ConfigType(IntEnum):
    """Value types, numbered as DescribeConfigs v3+ reports them (``ConfigType``)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """Where a value came from, numbered as DescribeConfigs v1+ reports it."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class Importance(Enum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class Password(str):
    """A secret: compares and encodes as its text, but never shows it in reprs or logs."""

    def __repr__(self) -> str:
        return "[hidden]"

    __str__ = __repr__

    @property
    def value(self) -> str:
        return str.__str__(self)


# --- validators: callables raising ValueError(reason); str() is the doc form ------------------


class Range:
    def __init__(self, low: float | None = None, high: float | None = None) -> None:
        self.low, self.high = low, high

    def __call__(self, value: Any) -> None:
        if self.low is not None and value < self.low:
            raise ValueError(f"must be at least {self.low}" if self.high is None
                             else f"must be between {self.low} and {self.high}")
        if self.high is not None and value > self.high:
            raise ValueError(f"must be at most {self.high}" if self.low is None
                             else f"must be between {self.low} and {self.high}")

    def __str__(self) -> str:
        return f"[{'' if self.low is None else self.low},...{'' if self.high is None else f',{self.high}'}]"


class OneOf:
    def __init__(self, *allowed: str, case_sensitive: bool = True) -> None:
        self.allowed, self.case_sensitive = allowed, case_sensitive

    def __call__(self, value: str) -> None:
        pool = self.allowed if self.case_sensitive else [a.lower() for a in self.allowed]
        if (value if self.case_sensitive else value.lower()) not in pool:
            raise ValueError(f"must be one of {', '.join(self.allowed)}")

    def __str__(self) -> str:
        return f"[{', '.join(self.allowed)}]"


class ListOf:
    """Every element of a LIST value is one of ``allowed``, without duplicates."""

    def __init__(self, *allowed: str) -> None:
        self.allowed = allowed

    def __call__(self, value: list[str]) -> None:
        for item in value:
            if item not in self.allowed:
                raise ValueError(f"'{item}' is not one of {', '.join(self.allowed)}")
        if len(set(value)) != len(value):
            raise ValueError("contains duplicate entries")

    def __str__(self) -> str:
        return f"[{', '.join(self.allowed)}]"


class GzipLevel:
    def __call__(self, value: int) -> None:
        if value != -1 and not 1 <= value <= 9:
            raise ValueError("must be -1 or between 1 and 9")

    def __str__(self) -> str:
        return "[1,...,9] or -1"


# --- definitions ------------------------------------------------------------------------------


# Kafka's dynamic update modes (DynamicBrokerConfig.dynamicConfigUpdateModes; "read-only" otherwise).
READ_ONLY, PER_BROKER, CLUSTER_WIDE = "read-only", "per-broker", "cluster-wide"


class HostCounts:
    """``max.connections.per.ip.overrides``: ``host:count`` pairs, as Kafka parses them."""

    def __call__(self, value: str) -> None:
        for item in filter(None, (part.strip() for part in (value or "").split(","))):
            host, sep, count = item.rpartition(":")
            if not sep or not host or not count.strip().isdigit():
                raise ValueError(f"'{item}' is not host:count")

    def __str__(self) -> str:
        return "host:count,..."


class Scope(Enum):
    BROKER = "broker"
    TOPIC = "topic"


@dataclass(frozen=True)
class ConfigDef:
    """One config key: everything loading, validation, DescribeConfigs, AlterConfigs and the log
    need to know about it.

    * ``update_mode`` (broker keys): Kafka's read-only / per-broker / cluster-wide.
    * ``synonyms`` (topic keys): the broker keys that supply the default, in Kafka's order, each
      with the factor converting its unit to the topic's (``ServerTopicConfigSynonyms``).
    * ``log_field``: the :class:`~kbroker.log.partition_log.LogConfig` field the value feeds.
    * ``read_by``: for a topic key that feeds no LogConfig field, the part of the broker that
      reads it (e.g. ``errors.deadletterqueue.group.enable``, read by the share groups'
      dead-letter-queue writer).
    * ``no_effect``: why kbroker accepts the key without acting on it -- only where Kafka itself
      shows no effect we could emulate (thread counts, replication on a single node, ...). It is
      appended to the DescribeConfigs documentation.
    * ``update_refused``: why a key Kafka can update dynamically is refused by AlterConfigs here.
    * ``unsupported``: given a parsed value, the message refusing it when it asks for a feature
      kbroker does not implement (None when the value is fine). The default is always fine: it
      is what kbroker does.
    """

    name: str
    type: ConfigType
    default: Any
    doc: str
    importance: Importance = Importance.MEDIUM
    validator: Callable[[Any], None] | None = None
    scope: Scope = Scope.BROKER
    update_mode: str = READ_ONLY
    synonyms: tuple[tuple[str, int], ...] = ()
    log_field: str | None = None
    read_by: str | None = None
    no_effect: str | None = None
    unsupported: Callable[[Any], str | None] | None = None
    update_refused: str | None = None

    @property
    def is_sensitive(self) -> bool:
        return self.type is ConfigType.PASSWORD

    @property
    def dynamic(self) -> bool:
        return self.update_mode != READ_ONLY

    @property
    def ignored(self) -> bool:
        return self.no_effect is not None

    @property
    def documentation(self) -> str:
        if self.no_effect is None:
            return self.doc
        return f"{self.doc} kbroker accepts this config without acting on it: {self.no_effect}."

    def parse(self, raw: Any) -> Any:
        """The typed, validated value of ``raw`` (a string from a file/the wire, or a Python
        value); ConfigError naming the key otherwise, also for a value kbroker does not support."""
        if raw is None:
            return None
        try:
            value = _PARSERS[self.type](raw)
        except ValueError as exc:
            raise ConfigError(f"invalid value {_show(self, raw)} for '{self.name}': {exc}",
                              self.name) from None
        if self.validator is not None and value is not None:
            try:
                self.validator(value)
            except ValueError as exc:
                raise ConfigError(f"invalid value {_show(self, raw)} for '{self.name}': {exc}",
                                  self.name) from None
        if self.unsupported is not None and value != self.default:
            reason = self.unsupported(value)
            if reason is not None:
                raise ConfigError(f"refused '{self.name}'={_show(self, self.to_string(value))}: "
                                  f"{reason}", self.name)
        return value

    def to_string(self, value: Any) -> str | None:
        """Kafka's ``ConfigDef.convertToString``: the wire form of a typed value."""
        if value is None:
            return None
        if self.type is ConfigType.BOOLEAN:
            return "true" if value else "false"
        if self.type is ConfigType.LIST:
            return ",".join(value)
        if self.type is ConfigType.PASSWORD:
            return value.value if isinstance(value, Password) else str(value)
        return str(value)


# --- refusals: a key (or value) asking for a feature kbroker does not implement yet -----------


def not_implemented_if_set(feature: str) -> Callable[[Any], str | None]:
    """Refuse any value other than empty: the key only matters to ``feature``."""
    def check(value: Any) -> str | None:
        if value in (None, "", []):
            return None
        return _REFUSED.format(feature=feature)
    return check


def only(allowed: Any, feature: str) -> Callable[[Any], str | None]:
    """Refuse every value but ``allowed`` (what kbroker does): other values need ``feature``."""
    def check(value: Any) -> str | None:
        return None if value == allowed else _REFUSED.format(feature=feature)
    return check


_REFUSED = "{feature} is not implemented by kbroker yet"


def _show(d: ConfigDef, raw: Any) -> str:
    return "[hidden]" if d.is_sensitive else repr(raw)


_INT_RE = re.compile(r"[+-]?\d+")


def _integer(bits: int) -> Callable[[Any], int]:
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    kind = {16: "a short", 32: "an integer", 64: "a long"}[bits]

    def parse(raw: Any) -> int:
        if isinstance(raw, bool):
            raise ValueError(f"not {kind}")
        if isinstance(raw, str):
            text = raw.strip()
            if not _INT_RE.fullmatch(text):
                raise ValueError(f"not {kind}")
            raw = int(text)
        if not isinstance(raw, int):
            raise ValueError(f"not {kind}")
        if not low <= raw <= high:
            raise ValueError(f"out of range for {kind} ({low}..{high})")
        return raw

    return parse


def _boolean(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ValueError("not a boolean (expected true or false)")


def _double(raw: Any) -> float:
    if isinstance(raw, bool):
        raise ValueError("not a number")
    try:
        return float(raw.strip() if isinstance(raw, str) else raw)
    except (TypeError, ValueError):
        raise ValueError("not a number") from None


def _string(raw: Any) -> str:
    if not isinstance(raw, str):
        raise ValueError("not a string")
    return raw.strip()


def _list(raw: Any) -> list[str]:
    if isinstance(raw, (list, tuple)):
        return [str(x).strip() for x in raw]
    text = _string(raw)
    return [] if not text else [part.strip() for part in text.split(",")]


def _password(raw: Any) -> Password:
    return raw if isinstance(raw, Password) else Password(_string(raw))


_PARSERS: dict[ConfigType, Callable[[Any], Any]] = {
    ConfigType.BOOLEAN: _boolean,
    ConfigType.STRING: _string,
    ConfigType.INT: _integer(32),
    ConfigType.SHORT: _integer(16),
    ConfigType.LONG: _integer(64),
    ConfigType.DOUBLE: _double,
    ConfigType.LIST: _list,
    ConfigType.CLASS: _string,
    ConfigType.PASSWORD: _password,
}

