"""DescribeConfigs entries and topic configurations, derived from the tables.

:class:`TopicConfig` resolves a topic's effective values (topic override -> broker synonyms in
Kafka's order -> default) and describes them with Kafka's sources and synonym lists;
:func:`describe_broker_configs` does the same for a BROKER resource. Documentation is the table's,
plus why kbroker accepts a key without acting on it when it does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from kbroker.config.broker import BrokerConfig
from kbroker.config.broker_table import BROKER_CONFIGS, FAULT_PREFIX
from kbroker.config.topic_table import TOPIC_CONFIGS, broker_synonyms
from kbroker.config.types import LONG_MAX, ConfigError, ConfigSource, ConfigType



@dataclass(frozen=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True)
class ConfigEntry:
    """One DescribeConfigs result entry; the handler copies it into the response."""

    name: str
    value: str | None
    source: ConfigSource
    is_sensitive: bool
    read_only: bool
    config_type: ConfigType
    documentation: str | None
    synonyms: list[ConfigSynonym] = field(default_factory=list)

    @property
    def is_default(self) -> bool:
        return self.source is ConfigSource.DEFAULT_CONFIG


def _broker_synonym_chain(broker: BrokerConfig, name: str) -> list[ConfigSynonym]:
    """Kafka's ConfigHelper.configSynonyms: every layer for every synonym, most specific layer
    first, then dropping entries before the first one for ``name`` itself (so describing
    log.retention.ms while only log.retention.hours is set reports DEFAULT_CONFIG, as Kafka does)."""
    names = broker_synonyms(name)
    chain = []
    for source, layer in broker._layers():
        for synonym in names:
            if synonym in layer:
                definition = BROKER_CONFIGS[synonym]
                value = None if definition.is_sensitive else definition.to_string(layer[synonym])
                chain.append(ConfigSynonym(synonym, value, source))
    while chain and chain[0].name != name:
        chain.pop(0)
    return chain


def describe_broker_configs(broker: BrokerConfig, names: Iterable[str] | None = None, *,
                            include_synonyms: bool = False,
                            include_documentation: bool = False) -> list[ConfigEntry]:
    """Entries for a BROKER resource naming this broker (all configs when ``names`` is None;
    unknown names are skipped, as Kafka does)."""
    set_faults = broker.fault_rule_names()
    if names is None:
        wanted = list(BROKER_CONFIGS) + set_faults
    else:  # a fault rule that is not set is as unknown as any other key
        wanted = [n for n in names if n in BROKER_CONFIGS
                  and (not n.startswith(FAULT_PREFIX) or n in set_faults)]
    entries = []
    for name in wanted:
        definition = BROKER_CONFIGS[name]
        chain = _broker_synonym_chain(broker, name)
        value = None if definition.is_sensitive else definition.to_string(broker.get(name))
        if name in ("node.id", "broker.id"):
            value = str(broker.node_id)  # both default to null in the table so either can win
        entries.append(ConfigEntry(
            name=name, value=value,
            source=chain[0].source if chain else ConfigSource.DEFAULT_CONFIG,
            is_sensitive=definition.is_sensitive, read_only=not definition.dynamic,
            config_type=definition.type,
            documentation=definition.documentation if include_documentation else None,
            synonyms=chain if include_synonyms else []))
    return entries


def validate_topic_configs(configs: Mapping[str, Any]) -> dict[str, Any]:
    """Check topic overrides (CreateTopics / AlterConfigs); returns the typed values. ConfigError
    names the offending key; the handler answers INVALID_CONFIG with its message."""
    parsed = {}
    for key, raw in configs.items():
        definition = TOPIC_CONFIGS.get(key)
        if definition is None:
            raise ConfigError(f"Unknown topic config name: {key}", key)
        if raw is None:
            raise ConfigError(f"null value not supported for topic config '{key}'", key)
        parsed[key] = definition.parse(raw)
    low = parsed.get("min.compaction.lag.ms", 0)
    high = parsed.get("max.compaction.lag.ms", LONG_MAX)
    if low > high:
        raise ConfigError(f"conflicting topic configs: min.compaction.lag.ms ({low}) > "
                          f"max.compaction.lag.ms ({high})", "min.compaction.lag.ms")
    return parsed


class TopicConfig:
    """A topic's effective configuration: topic override -> broker synonyms -> Kafka default.

    ``tc.get("retention.ms")``, ``tc["segment.bytes"]`` or ``tc.retention_ms``; ``overrides`` holds
    the typed per-topic values, ``originals`` the strings to persist.
    """

    def __init__(self, overrides: Mapping[str, Any] | None = None,
                 broker: BrokerConfig | None = None) -> None:
        self.originals = dict(overrides or {})
        self.overrides = validate_topic_configs(self.originals)
        self.broker = broker if broker is not None else BrokerConfig()

    def get(self, name: str) -> Any:
        if name in self.overrides:
            return self.overrides[name]
        if name not in TOPIC_CONFIGS:
            raise KeyError(name)
        return self.broker.topic_default(name)

    def __getitem__(self, name: str) -> Any:
        return self.get(name)

    def __getattr__(self, attr: str) -> Any:
        name = attr.replace("_", ".")
        if name in TOPIC_CONFIGS:
            return self.get(name)
        raise AttributeError(attr)

    def values(self) -> dict[str, Any]:
        return {name: self.get(name) for name in TOPIC_CONFIGS}

    @property
    def compacted(self) -> bool:
        return "compact" in self.get("cleanup.policy")

    def with_overrides(self, changes: Mapping[str, Any | None]) -> TopicConfig:
        """A new TopicConfig with ``changes`` applied (None deletes an override)."""
        merged = dict(self.originals)
        for key, value in changes.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        return TopicConfig(merged, self.broker)

    def synonyms(self, name: str) -> list[ConfigSynonym]:
        """Kafka's synonym list for DescribeConfigs: the topic override, then the chain of the
        first broker synonym (e.g. retention.ms -> log.retention.ms/.minutes/.hours)."""
        definition = TOPIC_CONFIGS[name]
        chain: list[ConfigSynonym] = []
        if definition.synonyms:
            chain = _broker_synonym_chain(self.broker, definition.synonyms[0][0])
        if name in self.overrides:
            chain.insert(0, ConfigSynonym(name, self._string(name), ConfigSource.TOPIC_CONFIG))
        return chain

    def source(self, name: str) -> ConfigSource:
        chain = self.synonyms(name)
        return chain[0].source if chain else ConfigSource.DEFAULT_CONFIG

    def _string(self, name: str) -> str | None:
        definition = TOPIC_CONFIGS[name]
        return None if definition.is_sensitive else definition.to_string(self.get(name))

    def describe(self, names: Iterable[str] | None = None, *, include_synonyms: bool = False,
                 include_documentation: bool = False) -> list[ConfigEntry]:
        wanted = list(TOPIC_CONFIGS) if names is None else [n for n in names if n in TOPIC_CONFIGS]
        entries = []
        for name in wanted:
            definition = TOPIC_CONFIGS[name]
            chain = self.synonyms(name)
            entries.append(ConfigEntry(
                name=name, value=self._string(name),
                source=chain[0].source if chain else ConfigSource.DEFAULT_CONFIG,
                is_sensitive=definition.is_sensitive, read_only=False, config_type=definition.type,
                documentation=definition.documentation if include_documentation else None,
                synonyms=chain if include_synonyms else []))
        return entries
