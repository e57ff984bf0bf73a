"""Immutable descriptions of topics, as the rest of the broker sees them."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace

# Kafka's rule: up to 249 characters of ASCII alphanumerics, '.', '_' and '-', but not "." or "..".
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def topic_name_problem(name: str | None) -> str | None:
    """Why ``name`` is not a legal topic name, or None if it is."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be '{name}'"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"topic name is longer than {MAX_TOPIC_NAME_LENGTH} characters"
    bad = sorted(set(name) - _LEGAL)
    if bad:
        return (f"topic name '{name}' contains illegal characters {''.join(bad)!r}; "
                "use ASCII alphanumerics, '.', '_' and '-'")
    return None


@dataclass(frozen=True)
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    num_partitions: int
    configs: dict = field(default_factory=dict)  # overrides only: name -> string value

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    def with_partitions(self, count: int) -> "TopicMetadata":
        return replace(self, num_partitions=count)

    def with_configs(self, configs: dict) -> "TopicMetadata":
        return replace(self, configs=dict(configs))
