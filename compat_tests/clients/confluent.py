"""confluent-kafka (librdkafka) adapter. ``config`` uses librdkafka's property names."""

from __future__ import annotations

import time

from .records import Ack, Deadline, Failed, Got, as_rec, no_partitions, start_position


def version() -> dict:
    import confluent_kafka

    v = confluent_kafka.version()
    return {"version": v[0] if isinstance(v, tuple) else v,
            "librdkafka": confluent_kafka.libversion()[0]}


def producer(bootstrap: str, codec: str = "none", acks="all", config: dict | None = None):
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                     "acks": acks, "linger.ms": 5, **(config or {})})


def produce(bootstrap: str, topic: str, records, *, codec: str = "none", acks="all",
            config: dict | None = None, timeout: float = 30.0,
            transaction: str | None = None) -> list:
    """One Ack or Failed per record, in record order; ``timeout`` bounds the final flush.
    ``transaction`` ("commit" or "abort", with ``transactional.id`` in ``config``): all records
    in one transaction, ended that way."""
    client = producer(bootstrap, codec, acks, config)
    if transaction:
        client.init_transactions(timeout)
        client.begin_transaction()
    recs = [as_rec(r) for r in records]
    results: list = [None] * len(recs)

    def report(index):
        def on_delivery(err, msg):
            if err is not None:
                results[index] = Failed(err)
            else:
                results[index] = Ack(msg.partition(), msg.offset(), msg.timestamp()[1],
                                     msg.value())
        return on_delivery

    for i, rec in enumerate(recs):
        kwargs = {"value": rec.value, "key": rec.key, "on_delivery": report(i)}
        if rec.partition is not None:
            kwargs["partition"] = rec.partition
        if rec.timestamp is not None:
            kwargs["timestamp"] = rec.timestamp
        if rec.headers:
            kwargs["headers"] = list(rec.headers)
        client.produce(topic, **kwargs)
        client.poll(0)
    left = client.flush(timeout)
    if transaction == "commit":
        client.commit_transaction(timeout)
    elif transaction:
        client.abort_transaction(timeout)
    return [r if r is not None else
            Failed(TimeoutError(f"not delivered within {timeout} s ({left} records left)"))
            for r in results]


def consumer(bootstrap: str, config: dict | None = None):
    """A consumer that never uses its group unless ``config`` names one: librdkafka insists on
    a group.id even for assign()."""
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": bootstrap, "group.id": "kbroker-tests-unused",
                     "enable.auto.commit": False, "enable.auto.offset.store": False,
                     "auto.offset.reset": "earliest", "enable.partition.eof": False,
                     **(config or {})})


def partitions_of(client, topic: str, deadline: Deadline) -> list[int]:
    while True:
        meta = client.list_topics(topic, timeout=deadline.left(0.1, 5.0)).topics.get(topic)
        if meta is not None and meta.error is None and meta.partitions:
            return sorted(meta.partitions)
        if not deadline:
            raise no_partitions(topic)
        time.sleep(0.2)


def consume(bootstrap: str, topic: str, count: int, *, partitions=None, start="beginning",
            group: str | None = None, isolation: str = "read_uncommitted",
            config: dict | None = None, timeout: float = 20.0, on_record=None,
            on_rebalance=None) -> list[Got]:
    """Up to ``count`` records within ``timeout``, sorted by (partition, offset). Without
    ``group``: assign ``partitions`` (default: all) from ``start``, commit nothing. With it:
    subscribe and commit synchronously at the end."""
    from confluent_kafka import (OFFSET_BEGINNING, OFFSET_END, TIMESTAMP_LOG_APPEND_TIME,
                                 KafkaException, TopicPartition)

    start = start_position(start)
    settings = {"isolation.level": isolation,
                "auto.offset.reset": "latest" if start == "end" else "earliest"}
    if group:
        settings.update({"group.id": group, "enable.auto.commit": True,
                         "enable.auto.offset.store": True})
    client = consumer(bootstrap, {**settings, **(config or {})})
    deadline = Deadline(timeout)
    got: list[Got] = []
    try:
        if group:
            rebalanced = on_rebalance or (lambda kind, parts: None)
            client.subscribe(
                [topic],
                on_assign=lambda c, ps: rebalanced("assigned", sorted(p.partition for p in ps)),
                on_revoke=lambda c, ps: rebalanced("revoked", sorted(p.partition for p in ps)))
        else:
            if partitions is None:
                partitions = partitions_of(client, topic, deadline)
            offset = {"beginning": OFFSET_BEGINNING, "end": OFFSET_END}.get(start, start)
            client.assign([TopicPartition(topic, p, offset) for p in partitions])
        while len(got) < count and deadline:
            for msg in client.consume(num_messages=500, timeout=deadline.left(0.01, 0.5)):
                if msg.error() is not None:
                    if msg.error().fatal() or not msg.error().retriable():
                        raise KafkaException(msg.error())
                    continue
                ts_type, ts = msg.timestamp()
                record = Got(msg.partition(), msg.offset(), msg.key(), msg.value(),
                             tuple(msg.headers() or ()), ts,
                             "append" if ts_type == TIMESTAMP_LOG_APPEND_TIME else "create",
                             msg.topic(), getattr(msg, "leader_epoch", lambda: None)())
                got.append(record)
                if on_record is not None:
                    on_record(record)
        if group and got:
            client.commit(asynchronous=False)
    finally:
        client.close()
    return sorted(got, key=lambda g: (g.partition, g.offset))
