"""The admin calls the CLI and the test helpers share, on kafka-python's clients.

Below both ``kbroker.cli`` and ``kbroker.testing`` (neither imports the other) and above nothing:
it imports no other kbroker module.

kafka-python is pure Python, kept up to date with Kafka's protocol (it ships the message schemas
our generator reads) and works against any Kafka-compatible broker, so the CLI is as useful
against Apache Kafka or Redpanda as against kbroker. It is imported lazily: ``kbroker serve``
never loads it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int | None  # None: the group has no committed offset for this partition
    log_start: int
    log_end: int

    @property
    def lag(self) -> int:
        start = self.committed if self.committed is not None and self.committed >= 0 else self.log_start
        return max(self.log_end - start, 0)


def admin_client(bootstrap_servers: str, **config):
    from kafka import KafkaAdminClient

    config.setdefault("client_id", "kbroker-cli")
    return KafkaAdminClient(bootstrap_servers=bootstrap_servers, **config)


def partitions_of(admin, topics: list[str]) -> list[tuple[str, int]]:
    from kafka.errors import for_code

    result = []
    for topic in admin.describe_topics(topics):
        if topic["error_code"]:
            raise for_code(topic["error_code"])(f"topic {topic['name']}")
        result += [(topic["name"], p["partition_index"]) for p in topic["partitions"]]
    return sorted(result)


def log_offsets(admin, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
    """(log start offset, log end offset) per partition."""
    from kafka import TopicPartition
    from kafka.admin import OffsetSpec

    if not partitions:
        return {}
    tps = [TopicPartition(t, p) for t, p in partitions]
    starts = admin.list_partition_offsets({tp: OffsetSpec.EARLIEST for tp in tps})
    ends = admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in tps})
    return {(tp.topic, tp.partition): (starts[tp].offset, ends[tp].offset) for tp in tps}


def group_lag(admin, group: str, topics: list[str] | None = None) -> list[PartitionLag]:
    """Committed offset, log start/end and lag for each partition the group committed to (and
    every partition of ``topics``, committed or not)."""
    committed = {(tp.topic, tp.partition): meta.offset
                 for tp, meta in admin.list_group_offsets({group: None}).get(group, {}).items()}
    partitions = set(committed)
    if topics:
        partitions.update(partitions_of(admin, topics))
    offsets = log_offsets(admin, sorted(partitions))
    return [PartitionLag(t, p, committed.get((t, p)), *offsets[(t, p)]) for t, p in sorted(partitions)]
