"""Admin helpers for tests: create topics, produce, consume everything, wait for a group's lag.

They use kafka-python (a kbroker dependency) and work against any broker. One ``KafkaHelpers`` per
bootstrap address; the pytest fixtures hand one out as ``kafka_broker.helpers``.
"""

from __future__ import annotations

import time
from typing import Iterable, Mapping

from kbroker.admin_client import admin_client, group_lag, log_offsets, partitions_of


class KafkaHelpers:
    def __init__(self, bootstrap_servers: str) -> None:
        self.bootstrap_servers = bootstrap_servers
        self._admin = None
        self._producer = None

    @property
    def admin(self):
        """A kafka-python ``KafkaAdminClient`` (created on first use, closed by ``close()``)."""
        if self._admin is None:
            self._admin = admin_client(self.bootstrap_servers)
        return self._admin

    def create_topics(self, *names: str, partitions: int = 1, replication_factor: int = 1,
                      configs: Mapping[str, str] | None = None) -> None:
        from kafka.admin import NewTopic

        self.admin.create_topics([
            NewTopic(name, partitions, replication_factor, topic_configs=dict(configs or {}))
            for name in names])

    def produce(self, topic: str, values: Iterable[bytes | str | None], *,
                key: bytes | str | None = None, partition: int | None = None,
                headers: Mapping[str, bytes | str] | None = None) -> list:
        """Send each value (acks=all) and wait; returns the RecordMetadata of each."""
        if self._producer is None:
            from kafka import KafkaProducer

            self._producer = KafkaProducer(bootstrap_servers=self.bootstrap_servers, acks="all",
                                           linger_ms=0)
        header_list = [(k, _bytes(v)) for k, v in (headers or {}).items()]
        futures = [self._producer.send(topic, _bytes(value), key=_bytes(key),
                                       partition=partition, headers=header_list)
                   for value in values]
        self._producer.flush()
        return [future.get(timeout=30) for future in futures]

    def consume_all(self, topic: str, timeout: float = 10.0) -> list:
        """Every record of ``topic`` from the log start to the log end as of this call, in
        partition then offset order (kafka-python ``ConsumerRecord`` objects)."""
        from kafka import KafkaConsumer, TopicPartition

        bounds = log_offsets(self.admin, partitions_of(self.admin, [topic]))
        wanted = {TopicPartition(t, p): end for (t, p), (start, end) in bounds.items() if end > start}
        records: dict[TopicPartition, list] = {tp: [] for tp in wanted}
        if not wanted:
            return []
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap_servers, enable_auto_commit=False)
        try:
            consumer.assign(list(wanted))
            consumer.seek_to_beginning()
            deadline = time.monotonic() + timeout
            while any(consumer.position(tp) < end for tp, end in wanted.items()):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"consume_all({topic!r}): not at the log end after {timeout} s")
                for tp, batch in consumer.poll(timeout_ms=200).items():
                    records[tp] += [r for r in batch if r.offset < wanted[tp]]
        finally:
            consumer.close()
        return [r for tp in sorted(records, key=lambda tp: tp.partition) for r in records[tp]]

    def lag(self, group: str, topics: list[str] | None = None) -> int:
        """The group's total lag over the partitions it committed to (and all of ``topics``)."""
        return sum(p.lag for p in group_lag(self.admin, group, topics))

    def wait_for_lag_zero(self, group: str, topics: list[str] | None = None,
                          timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while (lag := self.lag(group, topics)) > 0:
            if time.monotonic() > deadline:
                raise TimeoutError(f"group {group!r} still lags by {lag} after {timeout} s")
            time.sleep(0.1)

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close()
            self._producer = None
        if self._admin is not None:
            self._admin.close()
            self._admin = None


def _bytes(value):
    return value.encode() if isinstance(value, str) else value
