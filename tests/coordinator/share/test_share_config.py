"""The ``share.coordinator.*`` broker settings: those kbroker implements are validated with
Kafka's bounds and used; the others accept only Kafka's default and refuse any other value with
a message naming the key (never accepted and ignored)."""

from __future__ import annotations

import pytest

from kbroker.config import ConfigError, load_config


def test_implemented_settings_are_read():
    config = load_config(None, ["share.coordinator.state.topic.num.partitions=7",
                                "share.coordinator.state.topic.replication.factor=3",
                                "share.coordinator.state.topic.min.isr=2",
                                "share.coordinator.state.topic.segment.bytes=1048576",
                                "share.coordinator.snapshot.update.records.per.snapshot=0",
                                "share.coordinator.state.topic.prune.interval.ms=1000"])
    assert config.get("share.coordinator.state.topic.num.partitions") == 7
    assert config.get("share.coordinator.state.topic.replication.factor") == 3
    assert config.get("share.coordinator.state.topic.min.isr") == 2
    assert config.get("share.coordinator.state.topic.segment.bytes") == 1048576
    assert config.get("share.coordinator.snapshot.update.records.per.snapshot") == 0
    assert config.get("share.coordinator.state.topic.prune.interval.ms") == 1000


@pytest.mark.parametrize("key, value, reason", [
    ("share.coordinator.snapshot.update.records.per.snapshot", "501", "between 0 and 500"),
    ("share.coordinator.state.topic.num.partitions", "0", "at least 1"),
    ("share.coordinator.state.topic.replication.factor", "0", "at least 1"),
    ("share.coordinator.state.topic.min.isr", "0", "at least 1"),
])
def test_bounds(key, value, reason):
    with pytest.raises(ConfigError) as info:
        load_config(None, [f"{key}={value}"])
    assert info.value.key == key and reason in str(info.value)


@pytest.mark.parametrize("key, value", [
    ("share.coordinator.write.timeout.ms", "1000"),
    ("share.coordinator.append.linger.ms", "5"),
    ("share.coordinator.load.buffer.size", "1024"),
    ("share.coordinator.state.topic.compression.codec", "1"),
])
def test_unimplemented_settings_are_refused_unless_default(key, value):
    with pytest.raises(ConfigError) as info:
        load_config(None, [f"{key}={value}"])
    assert info.value.key == key and key in str(info.value)
