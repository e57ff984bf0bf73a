"""The share.* group configs (Kafka 4.4's GroupConfig): validation with Kafka's messages and
bounds, and the settings share partitions read (override, else broker default)."""

from __future__ import annotations

import pytest

from kbroker.config import BrokerConfig
from kbroker.coordinator.group.group_configs import (check, parse_duration_ms,
                                                     share_group_settings_of)
from kbroker.protocol.errors import Errors, KafkaError


def refused(config, overrides) -> str:
    with pytest.raises(KafkaError) as e:
        check(config, overrides)
    assert e.value.error is Errors.INVALID_CONFIG
    return e.value.message


def test_validation():
    config = BrokerConfig({})
    assert check(config, {"share.record.lock.duration.ms": "20000"}) == {
        "share.record.lock.duration.ms": 20000}
    assert refused(config, {"share.record.lock.duration.ms": "500"}) == (
        "Invalid value 500 for configuration share.record.lock.duration.ms: Value must be at "
        "least 1000")
    assert "must be in the range 15000 to 60000" in refused(
        config, {"share.record.lock.duration.ms": "70000"})
    assert "must be in the range 2 to 10" in refused(config, {"share.delivery.count.limit": "11"})
    assert "must be in the range 100 to 4000" in refused(
        config, {"share.partition.max.record.locks": "5000"})
    for good in ("earliest", "latest", "LATEST", "by_duration:PT1H", "by_duration:P1DT2H3M4.5S"):
        check(config, {"share.auto.offset.reset": good})
    for bad in ("none", "by_duration:", "by_duration:1h", "by_duration:-PT1H", "by_duration:PT"):
        assert "The value must be either 'earliest', 'latest' or of the format " \
               "'by_duration:<PnDTnHnMn.nS>'." in refused(config, {"share.auto.offset.reset": bad})
    check(config, {"share.isolation.level": "read_committed"})
    assert "String must be one of: read_committed, read_uncommitted" in refused(
        config, {"share.isolation.level": "committed"})
    assert refused(config, {"share.session.timeout.ms": "45000",
                            "share.heartbeat.interval.ms": "45000"}).startswith(
        "share.heartbeat.interval.ms must be in the range")
    # KIP-1191: only a name starting with "__" is refused when it is set (Kafka 4.4's message).
    assert refused(config, {"errors.deadletterqueue.topic.name": "__d"}) == (
        "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'")
    assert "Expected value to be either true or false" in refused(
        config, {"errors.deadletterqueue.copy.record.enable": "yes"})
    assert check(config, {"errors.deadletterqueue.topic.name": "no-prefix-is-fine-here",
                          "errors.deadletterqueue.copy.record.enable": "TRUE"}) == {
        "errors.deadletterqueue.topic.name": "no-prefix-is-fine-here",
        "errors.deadletterqueue.copy.record.enable": True}


def test_settings_override_then_broker_default():
    config = BrokerConfig({"group.share.delivery.count.limit": 7})
    s = share_group_settings_of(config, {})
    assert (s.record_lock_duration_ms, s.delivery_count_limit, s.partition_max_record_locks,
            s.auto_offset_reset, s.isolation_level, s.renew_acknowledge_enable) == (
        30000, 7, 2000, "latest", 0, True)
    s = share_group_settings_of(config, {"share.auto.offset.reset": "by_duration:PT2M",
                                         "share.isolation.level": "read_committed",
                                         "share.record.lock.duration.ms": "20000"})
    assert s.auto_offset_reset == "by_duration:PT2M" and s.auto_offset_reset_duration_ms == 120000
    assert s.isolation_level == 1 and s.record_lock_duration_ms == 20000
    assert (s.dlq_topic_name, s.dlq_copy_record) == ("", False)
    s = share_group_settings_of(config, {"errors.deadletterqueue.topic.name": "dlq.x",
                                         "errors.deadletterqueue.copy.record.enable": "true"})
    assert (s.dlq_topic_name, s.dlq_copy_record) == ("dlq.x", True)
    assert parse_duration_ms("P1DT1H1M1.25S") == ((24 + 1) * 60 + 1) * 60000 + 1250


def test_broker_refuses_inconsistent_group_share_configs():
    from kbroker.config.types import ConfigError
    BrokerConfig({})  # Kafka's defaults are consistent
    for settings, message in (
            ({"group.share.heartbeat.interval.ms": 100},
             "group.share.heartbeat.interval.ms must be greater than or equal to "
             "group.share.min.heartbeat.interval.ms"),
            ({"group.share.min.session.timeout.ms": 1000, "group.share.session.timeout.ms": 5000},
             "group.share.heartbeat.interval.ms must be less than "
             "group.share.session.timeout.ms"),
            ({"group.share.delivery.count.limit": 10, "group.share.max.delivery.count.limit": 8},
             "group.share.delivery.count.limit must be less than or equal to "
             "group.share.max.delivery.count.limit"),
            ({"group.share.assignors": ""},
             "group.share.assignors must contain exactly one assignor, but found 0")):
        with pytest.raises(ConfigError) as e:
            BrokerConfig(settings)
        assert str(e.value) == message
