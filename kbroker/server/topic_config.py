"""From a topic's configuration (overrides, then broker defaults) to the settings of its logs."""

from __future__ import annotations

from kbroker.config import TopicConfig
from kbroker.log.partition_log import LogConfig


def log_config_factory(broker_config):
    def log_config_for(topic) -> LogConfig:
        tc = TopicConfig(topic.configs if topic is not None else {}, broker_config)
        return LogConfig(
            segment_bytes=tc.get("segment.bytes"),
            segment_ms=tc.get("segment.ms"),
            segment_jitter_ms=tc.get("segment.jitter.ms"),
            index_interval_bytes=tc.get("index.interval.bytes"),
            retention_bytes=tc.get("retention.bytes"),
            retention_ms=tc.get("retention.ms"),
            max_message_bytes=tc.get("max.message.bytes"),
            message_timestamp_type=tc.get("message.timestamp.type"),
            message_timestamp_before_max_ms=tc.get("message.timestamp.before.max.ms"),
            message_timestamp_after_max_ms=tc.get("message.timestamp.after.max.ms"),
            cleanup_policy=tc.get("cleanup.policy"),
            flush_messages=tc.get("flush.messages"),
            flush_ms=tc.get("flush.ms"),
            min_cleanable_dirty_ratio=tc.get("min.cleanable.dirty.ratio"),
            delete_retention_ms=tc.get("delete.retention.ms"),
            min_compaction_lag_ms=tc.get("min.compaction.lag.ms"),
            max_compaction_lag_ms=tc.get("max.compaction.lag.ms"),
        )

    return log_config_for
