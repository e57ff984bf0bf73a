"""From a topic's configuration to the settings of its logs, derived from the tables.

Every table entry with a ``log_field`` feeds that :class:`LogConfig` field: a topic key with the
topic's effective value (override -> broker synonyms -> default), a broker key (such as
``producer.id.expiration.ms``) with the broker's current value. No hand-written list to drift.
It lives in ``replica`` because it is where config meets log: ``config`` imports no broker layer.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from kbroker.config.broker import BrokerConfig
from kbroker.config.broker_table import BROKER_CONFIGS
from kbroker.config.describe import TopicConfig
from kbroker.config.topic_table import TOPIC_CONFIGS
from kbroker.log.partition_log import LogConfig

TOPIC_LOG_FIELDS = {d.log_field: d.name for d in TOPIC_CONFIGS.values() if d.log_field}
BROKER_LOG_FIELDS = {d.log_field: d.name for d in BROKER_CONFIGS.values() if d.log_field}


def log_config(overrides: Mapping[str, Any] | None, broker_config: BrokerConfig) -> LogConfig:
    topic = TopicConfig(overrides or {}, broker_config)
    values = {field: topic.get(name) for field, name in TOPIC_LOG_FIELDS.items()}
    values.update({field: broker_config.get(name) for field, name in BROKER_LOG_FIELDS.items()})
    return LogConfig(**values)


def log_config_factory(broker_config: BrokerConfig) -> Callable[[Any], LogConfig]:
    """``log_config_for(topic_metadata_or_None) -> LogConfig`` for the replica manager."""
    def log_config_for(topic) -> LogConfig:
        return log_config(topic.configs if topic is not None else None, broker_config)

    return log_config_for
