"""Broker and topic configuration with Kafka's names, types, defaults and validation.

One definition per key (:class:`ConfigDef`) in two tables, and everything else derived from them:

* ``types``        value types, sources, parsers, validators, :class:`ConfigDef` itself.
* ``broker_table`` ``BROKER_CONFIGS``: ``server.properties`` keys with Kafka 4's dynamic update
                   modes; keys for unimplemented features (Java plugins, tiered storage) are
                   refused when set.
* ``topic_table``  ``TOPIC_CONFIGS``: every Kafka topic key with its broker synonyms in Kafka's
                   order, and the LogConfig field it feeds (or why it is refused / has no effect).
* ``properties``, ``listeners``  the two text formats a config file holds.
* ``broker``       :class:`BrokerConfig` (static + dynamic layers) and :func:`load_config`.
* ``describe``     DescribeConfigs entries (sources, synonyms, documentation) and
                   :class:`TopicConfig`.
* ``dynamic``      what a dynamic broker update may change, with Kafka's error texts.
* ``profile``      the dev/test profile (Kafka's defaults changed where a developer waits) and
                   the warning for an unknown setting.
* ``suggest``      the closest valid name for a misspelt setting, flag or subcommand.

A topic's LogConfig is derived from the tables in ``kbroker.replica.log_settings``: this package
imports no broker layer, not even ``log``.

Concurrency rule: configs are plain objects owned by the event loop thread.
"""

from kbroker.config.broker import BrokerConfig, load_config
from kbroker.config.broker_table import BROKER_CONFIGS
from kbroker.config.describe import (ConfigEntry, ConfigSynonym, TopicConfig,
                                     describe_broker_configs, validate_topic_configs)
from kbroker.config.listeners import Endpoint, parse_listeners
from kbroker.config.properties import parse_properties
from kbroker.config.topic_table import TOPIC_CONFIGS, broker_synonyms
from kbroker.config.types import (CLUSTER_WIDE, INT_MAX, LONG_MAX, MS_PER_HOUR, MS_PER_MINUTE,
                                  PER_BROKER, READ_ONLY, ConfigDef, ConfigError, ConfigSource,
                                  ConfigType, GzipLevel, Importance, ListOf, OneOf, Password, Range,
                                  Scope)

__all__ = [
    "BROKER_CONFIGS", "CLUSTER_WIDE", "INT_MAX", "LONG_MAX", "MS_PER_HOUR", "MS_PER_MINUTE",
    "PER_BROKER", "READ_ONLY", "TOPIC_CONFIGS", "BrokerConfig", "ConfigDef", "ConfigEntry",
    "ConfigError", "ConfigSource", "ConfigSynonym", "ConfigType", "Endpoint", "GzipLevel",
    "Importance", "ListOf", "OneOf", "Password", "Range", "Scope", "TopicConfig", "broker_synonyms",
    "describe_broker_configs", "load_config", "parse_listeners", "parse_properties",
    "validate_topic_configs",
]
