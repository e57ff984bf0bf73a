"""The reference side of a scenario: set up and check broker state without the client under test.

Checks go through raw requests (``tests.integration.clients.Wire``, the broker's own codecs) or
confluent-kafka in-process, so a cell judges one client, never the same client twice.
"""

from __future__ import annotations

import time

from tests.integration.clients import EARLIEST, LATEST, Wire, ensure_topic, wait_until

UNKNOWN_TOPIC_OR_PARTITION = 3
TIMEOUT = 20

__all__ = ["EARLIEST", "LATEST", "ensure_topic", "wait_until", "partition_count", "config_value",
           "alter_group_configs", "produce", "delete_records", "offset", "log_dirs_of"]


def partition_count(bootstrap: str, topic: str) -> int | None:
    """Partitions of ``topic`` per Metadata (never auto-creating it), None if it does not exist."""
    with Wire(bootstrap) as wire:
        t = wire.metadata([topic]).topics[0]
        if t.error_code == UNKNOWN_TOPIC_OR_PARTITION:
            return None
        assert t.error_code == 0, f"metadata for {topic}: error {t.error_code}"
        return len(t.partitions)


def admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap})


# confluent's futures fail with _DESTROY when their AdminClient is collected first: keep one.
_admins: dict = {}


def _admin(bootstrap: str):
    if bootstrap not in _admins:
        _admins[bootstrap] = admin(bootstrap)
    return _admins[bootstrap]


def forget(bootstrap: str) -> None:
    """Drop the cached admin client before its broker stops (it would keep reconnecting)."""
    _admins.pop(bootstrap, None)


def config_value(bootstrap: str, topic: str, name: str) -> str | None:
    from confluent_kafka.admin import ConfigResource
    resource = ConfigResource("topic", topic)
    entries = _admin(bootstrap).describe_configs([resource], request_timeout=TIMEOUT)[resource] \
        .result(TIMEOUT)
    return entries[name].value if name in entries else None


def alter_group_configs(bootstrap: str, group: str, configs: dict) -> None:
    """IncrementalAlterConfigs SET on a GROUP resource (share.* group configs)."""
    from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource,
                                       ResourceType)
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k, str(v), incremental_operation=AlterConfigOpType.SET)
        for k, v in configs.items()])
    _admin(bootstrap).incremental_alter_configs([resource],
                                                request_timeout=TIMEOUT)[resource].result(TIMEOUT)


def produce(bootstrap: str, topic: str, records) -> None:
    """``records``: (partition, value, timestamp or None) tuples, produced in order."""
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    errors = []
    for partition, value, timestamp in records:
        kwargs = {"partition": partition, "value": value.encode(), "key": None,
                  "on_delivery": lambda err, msg: err and errors.append(err)}
        if timestamp is not None:
            kwargs["timestamp"] = timestamp
        producer.produce(topic, **kwargs)
    left = producer.flush(TIMEOUT)
    assert not left and not errors, f"reference produce failed: {left} left, {errors}"


def delete_records(bootstrap: str, topic: str, partition: int, before: int) -> None:
    from confluent_kafka import TopicPartition
    futures = _admin(bootstrap).delete_records([TopicPartition(topic, partition, before)],
                                              request_timeout=TIMEOUT)
    for f in futures.values():
        f.result(TIMEOUT)


def offset(bootstrap: str, topic: str, partition: int, timestamp: int) -> int:
    """ListOffsets over the wire: EARLIEST, LATEST or a timestamp."""
    with Wire(bootstrap) as wire:
        r = wire.list_offset(topic, partition, timestamp)
        assert r.error_code == 0, f"ListOffsets {topic}/{partition}: error {r.error_code}"
        return r.offset


def log_dirs_of(bootstrap: str, topic: str, partition: int) -> list[tuple[str, bool]]:
    """DescribeLogDirs: the (log dir, is future) entries that hold the partition."""
    from kbroker.protocol import messages

    cls = messages.request_class(35)
    with Wire(bootstrap) as wire:
        answer = wire.call(35, 4, cls(topics=[cls.DescribableLogDirTopic(
            topic=topic, partitions=[partition])]))
    return sorted((result.log_dir, p.is_future_key) for result in answer.results
                  for t in result.topics if t.name == topic
                  for p in t.partitions if p.partition_index == partition)


def eventually(check, what: str, timeout: float = 10.0):
    return wait_until(check, timeout, 0.1, what)


def now_ms() -> int:
    return int(time.time() * 1000)
