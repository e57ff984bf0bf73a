"""The dev/test profile: Kafka's defaults changed where a developer or a test suite waits for them.

Production Kafka delays the first rebalance by 3 s (``group.initial.rebalance.delay.ms``) to let
more members join, and creates 50 partitions of ``__consumer_offsets`` on first use; a test wants
its first group ready in a fraction of a second. Segments are small and retention runs every
second so retention and compaction tests see results quickly. Explicit settings always win.
"""

from __future__ import annotations

import logging
from typing import Mapping

from kbroker.suggest import did_you_mean

log = logging.getLogger("kbroker.config")

DEV_PROFILE: dict[str, str] = {
    "dev.mode": "true",  # fault injection allowed; the HTTP port (console, metrics) on by default
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "1",
    "offsets.topic.segment.bytes": str(1 << 20),
    "transaction.state.log.num.partitions": "1",
    "transaction.state.log.segment.bytes": str(1 << 20),
    "auto.create.topics.enable": "true",
    "num.partitions": "1",
    "log.segment.bytes": str(1 << 20),
    "log.retention.check.interval.ms": "1000",
    "log.cleaner.backoff.ms": "1000",
    "log.segment.delete.delay.ms": "0",
}


def with_dev_profile(settings: Mapping[str, object]) -> dict[str, str]:
    """The dev profile under ``settings`` (settings win), values as strings."""
    return {**DEV_PROFILE, **{key: as_string(value) for key, value in settings.items()}}


def warn_unknown(settings: Mapping[str, object]) -> list[str]:
    """Log one line per unknown key with the closest known one. Kafka only warns for unknown keys
    (they may belong to a plugin), so this does not refuse them either."""
    from kbroker.config import BROKER_CONFIGS

    # listener.name.<listener>.* keys are per-listener overrides, checked by BrokerConfig itself.
    unknown = [key for key in settings
               if key not in BROKER_CONFIGS and not key.startswith("listener.name.")]
    for key in unknown:
        log.warning("unknown broker setting '%s' is ignored%s", key, did_you_mean(key, BROKER_CONFIGS))
    return unknown


def as_string(value: object) -> str:
    """A setting as the text a properties file holds (booleans lower-case, lists comma-joined)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(value)
