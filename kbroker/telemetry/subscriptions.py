"""Client-metrics subscriptions (KIP-714): the CLIENT_METRICS config resource as Kafka defines it
(``ClientMetricsConfigs``), validated with Kafka's messages, and which subscriptions a client
matches.

A subscription is a named config resource with three keys:

- ``metrics``: metric name prefixes to push (a list; ``*`` is every metric; empty is none);
- ``interval.ms``: the push interval, 100 ms to one hour (default five minutes);
- ``match``: ``selector=regex`` pairs, all of which a client must match (a full match, as Java's
  ``Matcher.matches``); selectors are client_instance_id, client_id, client_software_name,
  client_software_version, client_source_address and client_source_port. Empty matches every
  client.

The stored form is the resource's overrides as strings, as Kafka keeps them in its metadata.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field

from kbroker.protocol.errors import Errors, KafkaError

METRICS, INTERVAL_MS, MATCH = "metrics", "interval.ms", "match"
NAMES = (INTERVAL_MS, MATCH, METRICS)  # sorted, as DescribeConfigs lists them
ALL_METRICS = "*"
INTERVAL_MS_DEFAULT = 5 * 60 * 1000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3600000
SELECTORS = ("client_instance_id", "client_id", "client_software_name",
             "client_software_version", "client_source_address", "client_source_port")
DOCUMENTATION = {METRICS: "Telemetry metric name prefix list",
                 INTERVAL_MS: "Metrics push interval in milliseconds",
                 MATCH: "Client match criteria"}
DEFAULTS = {METRICS: "", INTERVAL_MS: str(INTERVAL_MS_DEFAULT), MATCH: ""}


@dataclass(frozen=True)
class Subscription:
    name: str
    metrics: frozenset
    interval_ms: int
    match: dict = field(default_factory=dict)  # selector -> compiled pattern

    def matches(self, attributes: dict) -> bool:
        return all(attributes.get(selector) is not None and
                   pattern.fullmatch(attributes[selector]) is not None
                   for selector, pattern in self.match.items())


def _list(name: str, value: str) -> list[str]:
    """Kafka's LIST type: comma-separated, trimmed; "" is the empty list. A value named twice
    counts once (Kafka 4.4.0 takes "a,a" and shows "a")."""
    items = [] if value.strip() == "" else [item.strip() for item in value.split(",")]
    if "" in items:
        raise KafkaError(Errors.INVALID_CONFIG,
                         f"Configuration '{name}' values must not be empty.")
    return list(dict.fromkeys(items))


def _interval(value: str) -> int:
    try:
        interval = int(value.strip())
    except ValueError:
        raise KafkaError(Errors.INVALID_CONFIG, f"Invalid value {value} for configuration "
                                                f"{INTERVAL_MS}: Not a number of type INT") from None
    if not -2 ** 31 <= interval < 2 ** 31:
        raise KafkaError(Errors.INVALID_CONFIG, f"Invalid value {value} for configuration "
                                                f"{INTERVAL_MS}: Not a number of type INT")
    return interval


def match_patterns(patterns: list[str]) -> dict:
    """``selector=regex`` strings to selector -> compiled pattern (Kafka's
    ``parseMatchingPatterns``: split at '=' into exactly two parts, trimmed)."""
    parsed = {}
    for pattern in patterns:
        parts = pattern.split("=")
        while len(parts) > 1 and parts[-1] == "":  # Java's String.split drops trailing empties
            parts.pop()
        if len(parts) != 2 or parts[0].strip() not in SELECTORS:
            raise KafkaError(Errors.INVALID_CONFIG, f"Illegal client matching pattern: {pattern}")
        try:
            parsed[parts[0].strip()] = re.compile(parts[1].strip())
        except re.error:
            raise KafkaError(Errors.INVALID_CONFIG,
                             f"Illegal client matching pattern: {pattern}") from None
    return parsed


def validate(name: str | None, configs: dict) -> Subscription | None:
    """Check a subscription's whole set of configs (Kafka's ``ClientMetricsConfigs.validate``);
    the parsed subscription, or None when no config is set (the subscription is gone)."""
    if not name:
        raise KafkaError(Errors.INVALID_REQUEST, "Subscription name can't be empty")
    for key in configs:
        if key not in NAMES:
            raise KafkaError(Errors.INVALID_REQUEST, f"Unknown client metrics configuration: {key}")
    metrics = _list(METRICS, configs.get(METRICS, ""))
    interval = _interval(configs.get(INTERVAL_MS, DEFAULTS[INTERVAL_MS]))
    if INTERVAL_MS in configs and not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
        raise KafkaError(Errors.INVALID_REQUEST,
                         f"Invalid value {interval} for {INTERVAL_MS}, interval must be between "
                         f"100 and 3600000 (1 hour)")
    match = match_patterns(_list(MATCH, configs.get(MATCH, "")))
    if not configs:
        return None
    return Subscription(name, frozenset(metrics), interval, match)


def resolve(subscriptions, attributes: dict) -> tuple[list[str], int]:
    """The metrics and push interval of a client with these attributes: the union of the
    metrics of every subscription it matches (``*`` alone when one asks for every metric) and
    the shortest interval among them (the default when none matches)."""
    metrics: set[str] = set()
    interval = INTERVAL_MS_DEFAULT
    for subscription in subscriptions:
        if subscription.matches(attributes):
            metrics |= subscription.metrics
            interval = min(interval, subscription.interval_ms)
    if ALL_METRICS in metrics:
        metrics = {ALL_METRICS}
    return sorted(metrics), interval


def subscription_id(metrics: list[str], interval_ms: int, instance: uuid.UUID) -> int:
    """A CRC32C of the metrics and interval XORed with the instance id's hash, as Kafka computes
    it (so two clients with the same subscription get different ids); a signed int32."""
    from kbroker.protocol.crc import crc32c

    crc = crc32c(f"[{', '.join(metrics)}]{interval_ms}".encode())
    bits = instance.int
    high, low = bits >> 64, bits & (2 ** 64 - 1)
    mixed = high ^ low
    java_hash = ((mixed >> 32) ^ mixed) & 0xFFFFFFFF
    value = crc ^ java_hash
    return value - 2 ** 32 if value >= 2 ** 31 else value
