"""Throwaway one-partition topics for the benchmarks, through confluent-kafka's AdminClient."""

from __future__ import annotations

import time


def admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})


def create_topic(bootstrap: str, topic: str, config: dict[str, str] | None = None) -> None:
    """Create ``topic`` (one partition, one replica, ``config``) and wait until Metadata names
    its leader."""
    from confluent_kafka.admin import NewTopic
    client = admin(bootstrap)
    client.create_topics([NewTopic(topic, 1, 1, config=config or {})])[topic].result(30)
    deadline = time.time() + 30
    while time.time() < deadline:
        meta = client.list_topics(topic, timeout=5).topics.get(topic)
        if meta is not None and meta.error is None and meta.partitions and \
                meta.partitions[0].leader >= 0:
            return
        time.sleep(0.1)
    raise RuntimeError(f"topic {topic} has no leader")


def delete_topic(bootstrap: str, topic: str, log) -> None:
    """Delete ``topic``; a failure is only ``log``-ged: a leftover topic costs disk in a
    throwaway dir, not a result."""
    client = admin(bootstrap)  # must outlive the future
    try:
        client.delete_topics([topic])[topic].result(30)
    except Exception as exc:  # noqa: BLE001
        log(f"delete {topic}: {exc}")
