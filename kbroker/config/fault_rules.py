"""The grammar of a fault-injection rule: the value of a ``kbroker.fault.<name>`` broker config.

A rule is ``key=value`` fields separated by spaces, ``;`` or ``,``::

    api=Produce error=NOT_LEADER_OR_FOLLOWER count=3 topic=orders partition=0
    api=OffsetFetch error=COORDINATOR_LOAD_IN_PROGRESS count=2 client.id=my-app
    api=Fetch close count=1            # drop the connection instead of answering
    api=Produce delay.ms=500           # answer, but half a second late
    api=Fetch throttle.ms=200          # answer with throttle_time_ms=200, held that long

``api`` (a Kafka API name such as ``Produce`` or its key, case-insensitive) and at least one
effect (``error``, ``close``, ``delay.ms``, ``throttle.ms``) are required. ``count`` bounds how
many matching requests the rule hits (default: every one until the key is deleted); ``topic``,
``partition`` and ``client.id`` narrow which requests match. An unknown field, API or error is
refused with the closest valid name. Rules only act in dev mode (``dev.mode=true``).

Sans-I/O and pure: the server's fault injector (kbroker.server.faults) applies parsed rules.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

FIELDS = ("api", "error", "close", "delay.ms", "throttle.ms", "count", "topic", "partition",
          "client.id")
# APIs whose error answer mirrors the request's topics/partitions (or coordinator keys); any other
# API can take an error only when its response has a top-level error code.
PER_PARTITION_ERROR_APIS = frozenset(("Produce", "Fetch", "ListOffsets", "OffsetCommit",
                                      "OffsetFetch", "FindCoordinator"))
_SEPARATORS = re.compile(r"[\s;,]+")


@dataclass(frozen=True)
class FaultRule:
    api_key: int
    api_name: str
    error: int | None = None  # the Kafka error code to answer with
    error_name: str | None = None
    close: bool = False
    delay_ms: int = 0
    throttle_ms: int = 0
    count: int | None = None  # None: every matching request
    topic: str | None = None
    partition: int | None = None
    client_id: str | None = None


def parse_rule(text: str) -> FaultRule:
    """The rule ``text`` describes; ValueError with a one-line reason otherwise."""
    fields: dict[str, str] = {}
    for token in filter(None, _SEPARATORS.split(text.strip())):
        key, sep, value = token.partition("=")
        key = key.strip().lower()
        if key not in FIELDS:
            raise ValueError(f"unknown field '{key}'{_closest(key, FIELDS)}; fields are "
                             f"{', '.join(FIELDS)}")
        if key in fields:
            raise ValueError(f"field '{key}' is given twice")
        if not sep and key != "close":
            raise ValueError(f"field '{key}' needs a value ({key}=...)")
        fields[key] = value.strip() if sep else "true"
    if "api" not in fields:
        raise ValueError("a rule needs api=<Kafka API name>, e.g. api=Produce")
    api_key, api_name = _api(fields["api"])
    rule = dict(api_key=api_key, api_name=api_name)
    if "error" in fields:
        code, name = _error(fields["error"])
        if name == "NONE":
            raise ValueError("error=NONE injects nothing; name an error such as "
                             "NOT_LEADER_OR_FOLLOWER")
        if not error_injectable(api_key):
            raise ValueError(f"kbroker cannot answer {api_name} with an injected error (its "
                             "response has no error code to set); use close, delay.ms or "
                             "throttle.ms")
        rule.update(error=code, error_name=name)
    if "close" in fields:
        rule["close"] = _boolean("close", fields["close"])
    for key, attr in (("delay.ms", "delay_ms"), ("throttle.ms", "throttle_ms"),
                      ("count", "count"), ("partition", "partition")):
        if key in fields:
            rule[attr] = _non_negative(key, fields[key])
    if "topic" in fields:
        rule["topic"] = fields["topic"]
    if "client.id" in fields:
        rule["client_id"] = fields["client.id"]
    parsed = FaultRule(**rule)
    if parsed.error is None and not parsed.close and not parsed.delay_ms and not parsed.throttle_ms:
        raise ValueError("a rule needs an effect: error=<NAME>, close, delay.ms=<N> or "
                         "throttle.ms=<N>")
    if parsed.close and parsed.error is not None:
        raise ValueError("close and error exclude each other: a closed connection gets no answer")
    return parsed


def error_injectable(api_key: int) -> bool:
    from kbroker.protocol import messages

    info = messages.API_BY_KEY[api_key]
    return info.name in PER_PARTITION_ERROR_APIS or \
        "error_code" in messages.response_class(api_key).FIELD_NAMES


def _api(value: str) -> tuple[int, str]:
    from kbroker.protocol.messages import ADVERTISED, API_BY_KEY

    served = {key: API_BY_KEY[key].name for key in ADVERTISED if key in API_BY_KEY}
    if value.lstrip("-").isdigit() and int(value) in served:
        return int(value), served[int(value)]
    by_name = {name.lower(): key for key, name in served.items()}
    key = by_name.get(value.lower())
    if key is None:
        raise ValueError(f"unknown API '{value}'{_closest(value, served.values())}")
    return key, served[key]


def _error(value: str) -> tuple[int, str]:
    from kbroker.protocol.errors import Errors

    by_name = {e.name: e for e in Errors}
    if value.lstrip("-").isdigit():
        matches = [e for e in Errors if e.code == int(value)]
        if not matches:
            raise ValueError(f"unknown error code {value}")
        return matches[0].code, matches[0].name
    error = by_name.get(value.upper())
    if error is None:
        raise ValueError(f"unknown error '{value}'{_closest(value.upper(), by_name)}")
    return error.code, error.name


def _boolean(key: str, value: str) -> bool:
    if value.lower() not in ("true", "false"):
        raise ValueError(f"'{key}' must be true or false, not '{value}'")
    return value.lower() == "true"


def _non_negative(key: str, value: str) -> int:
    if not value.isdigit():
        raise ValueError(f"'{key}' must be a whole number >= 0, not '{value}'")
    return int(value)


def _closest(word: str, choices) -> str:
    choices = list(choices)
    lowered = {c.lower(): c for c in choices}
    match = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.5)
    return f" (did you mean '{lowered[match[0]]}'?)" if match else ""
