"""The topic table: every topic config Kafka 4 defines (``TopicConfig``/``LogConfig``), each with
its broker synonyms in Kafka's order (``ServerTopicConfigSynonyms``) and what it does here.

Each key does exactly one of: feed a :class:`~kbroker.log.partition_log.LogConfig` field
(``log_field``), be read by another part of the broker (``read_by``), refuse the values kbroker
cannot honour (``unsupported``), or have no effect for a reason Kafka shares on a single node
without tiered storage (``no_effect``, shown in DescribeConfigs' documentation). ``tests/test_config.py`` checks that nothing falls outside.
"""

from __future__ import annotations

from typing import Any, Callable

from kbroker.config.broker_table import (COMPRESSION_TYPES, NO_REPLICATION, NO_TIERED,
                                         TIMESTAMP_TYPES)
from kbroker.config.types import (LONG_MAX, MS_PER_HOUR, MS_PER_MINUTE, ConfigDef, ConfigType,
                                  GzipLevel, Importance, ListOf, OneOf, Range, Scope)

B, S, I, L, D, LS = (ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.LONG,
                     ConfigType.DOUBLE, ConfigType.LIST)
_AT0, _AT1 = Range(0), Range(1)


def _no_tiered_storage(enabled: bool) -> str | None:
    # Kafka's LogConfig.validateRemoteStorageOnlyIfSystemEnabled wording.
    return ("Tiered Storage functionality is disabled in the broker. Topic cannot be configured "
            "with remote log storage.") if enabled else None


def _t(name: str, type_: ConfigType, default: Any, doc: str, *synonyms: tuple[str, int] | str,
       validator: Callable[[Any], None] | None = None, **kw: Any) -> ConfigDef:
    syn = tuple((s, 1) if isinstance(s, str) else s for s in synonyms)
    return ConfigDef(name, type_, default, doc, Importance.MEDIUM, validator, scope=Scope.TOPIC,
                     synonyms=syn, **kw)


_TOPIC_TABLE: tuple[ConfigDef, ...] = (
    _t("cleanup.policy", LS, ["delete"], "delete, compact, or both.", "log.cleanup.policy",
       validator=ListOf("compact", "delete"), log_field="cleanup_policy"),
    _t("compression.type", S, "producer", "Final compression of the topic's data: producer keeps "
       "the producer's codec; another type recompresses each batch whose codec differs, as it is "
       "appended (Kafka's LogValidator).", "compression.type", validator=OneOf(*COMPRESSION_TYPES),
       log_field="compression_type"),
    _t("compression.gzip.level", I, -1, "gzip level when the topic recompresses to gzip.",
       "compression.gzip.level", validator=GzipLevel(), log_field="compression_gzip_level"),
    _t("compression.lz4.level", I, 9, "lz4 level when the topic recompresses to lz4.",
       "compression.lz4.level", validator=Range(1, 17), log_field="compression_lz4_level"),
    _t("compression.zstd.level", I, 3, "zstd level when the topic recompresses to zstd.",
       "compression.zstd.level", validator=Range(-131072, 22), log_field="compression_zstd_level"),
    _t("delete.retention.ms", L, 86400000, "How long tombstones are kept on compacted topics.",
       "log.cleaner.delete.retention.ms", validator=_AT0, log_field="delete_retention_ms"),
    _t("errors.deadletterqueue.group.enable", B, False,
       "Enable this topic to be used as a dead-letter queue for share groups. When set to true, "
       "share groups can write undeliverable records to this topic. When set to false (the "
       "default), attempts to use this topic as a DLQ will be rejected.",
       read_by="the share groups' dead-letter-queue writer (kbroker.share.dlq)"),
    _t("file.delete.delay.ms", L, 60000, "Delay before a deleted segment's files are removed.",
       "log.segment.delete.delay.ms", validator=_AT0,
       no_effect="segment files are unlinked at once; a reader already holding them keeps reading "
                 "(POSIX), which is what Kafka's delay protects"),
    _t("flush.messages", L, LONG_MAX, "fsync after this many messages.", "log.flush.interval.messages",
       validator=_AT1, log_field="flush_messages"),
    _t("flush.ms", L, LONG_MAX, "fsync after this long.", "log.flush.interval.ms",
       "log.flush.scheduler.interval.ms", validator=_AT0, log_field="flush_ms"),
    _t("follower.replication.throttled.replicas", LS, [], "Replicas throttled on the follower side.",
       no_effect=NO_REPLICATION),
    _t("index.interval.bytes", I, 4096, "Bytes between offset index entries.",
       "log.index.interval.bytes", validator=_AT0, log_field="index_interval_bytes"),
    _t("leader.replication.throttled.replicas", LS, [], "Replicas throttled on the leader side.",
       no_effect=NO_REPLICATION),
    _t("local.retention.bytes", L, -2, "Tiered storage local retention bytes.",
       "log.local.retention.bytes", validator=Range(-2), no_effect=NO_TIERED),
    _t("local.retention.ms", L, -2, "Tiered storage local retention time.", "log.local.retention.ms",
       validator=Range(-2), no_effect=NO_TIERED),
    _t("max.compaction.lag.ms", L, LONG_MAX, "Maximum age before a record is compacted.",
       "log.cleaner.max.compaction.lag.ms", validator=_AT1, log_field="max_compaction_lag_ms"),
    _t("max.message.bytes", I, 1048588, "Largest record batch accepted (after compression).",
       "message.max.bytes", validator=_AT0, log_field="max_message_bytes"),
    _t("message.timestamp.after.max.ms", L, 3600000, "How far a timestamp may lead the broker clock.",
       "log.message.timestamp.after.max.ms", validator=_AT0,
       log_field="message_timestamp_after_max_ms"),
    _t("message.timestamp.before.max.ms", L, LONG_MAX, "How far a timestamp may lag the broker clock.",
       "log.message.timestamp.before.max.ms", validator=_AT0,
       log_field="message_timestamp_before_max_ms"),
    _t("message.timestamp.type", S, "CreateTime", "CreateTime or LogAppendTime.",
       "log.message.timestamp.type", validator=OneOf(*TIMESTAMP_TYPES),
       log_field="message_timestamp_type"),
    _t("min.cleanable.dirty.ratio", D, 0.5, "Dirty ratio that makes the log cleanable.",
       "log.cleaner.min.cleanable.ratio", validator=Range(0, 1), log_field="min_cleanable_dirty_ratio"),
    _t("min.compaction.lag.ms", L, 0, "Minimum age before a record can be compacted.",
       "log.cleaner.min.compaction.lag.ms", validator=_AT0, log_field="min_compaction_lag_ms"),
    _t("min.insync.replicas", I, 1, "Minimum in-sync replicas for acks=all writes.",
       "min.insync.replicas", validator=_AT1, log_field="min_insync_replicas"),
    _t("preallocate", B, False, "Create each segment's .log file at segment.bytes (cut back to "
       "its data when rolled or closed), as Kafka does.", "log.preallocate",
       log_field="preallocate"),
    _t("remote.log.copy.disable", B, False, "Tiered storage: stop uploading.", no_effect=NO_TIERED),
    _t("remote.log.delete.on.disable", B, False, "Tiered storage: delete remote data on disable.",
       no_effect=NO_TIERED),
    _t("remote.storage.enable", B, False, "Tiered storage for this topic.",
       unsupported=_no_tiered_storage),
    _t("retention.bytes", L, -1, "Maximum partition size before old segments go; -1 is unlimited.",
       "log.retention.bytes", log_field="retention_bytes"),
    _t("retention.ms", L, 604800000, "How long data is kept; -1 keeps forever.", "log.retention.ms",
       ("log.retention.minutes", MS_PER_MINUTE), ("log.retention.hours", MS_PER_HOUR),
       validator=Range(-1), log_field="retention_ms"),
    _t("segment.bytes", I, 1073741824, "Maximum size of one segment file.", "log.segment.bytes",
       validator=Range(14), log_field="segment_bytes"),
    _t("segment.index.bytes", I, 10485760, "Maximum size of an offset or time index.",
       "log.index.size.max.bytes", validator=Range(4), log_field="segment_index_bytes"),
    _t("segment.jitter.ms", L, 0, "Maximum jitter subtracted from the roll time.", "log.roll.jitter.ms",
       ("log.roll.jitter.hours", MS_PER_HOUR), validator=_AT0, log_field="segment_jitter_ms"),
    _t("segment.ms", L, 604800000, "Roll a segment after this long.", "log.roll.ms",
       ("log.roll.hours", MS_PER_HOUR), validator=_AT1, log_field="segment_ms"),
    _t("unclean.leader.election.enable", B, False, "Allow out-of-sync replicas to become leader.",
       "unclean.leader.election.enable",
       no_effect="a single node is the only replica, so there is never another leader to elect"),
)

TOPIC_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in _TOPIC_TABLE}

# Kafka's DynamicBrokerConfig.brokerConfigSynonyms: keys that describe one setting in other units.
_BROKER_SYNONYM_GROUPS = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
)
_BROKER_SYNONYMS = {name: group for group in _BROKER_SYNONYM_GROUPS for name in group}


def broker_synonyms(name: str) -> tuple[str, ...]:
    return _BROKER_SYNONYMS.get(name, (name,))
