"""kafka-python adapter. ``config`` holds KafkaProducer/KafkaConsumer keyword arguments."""

from __future__ import annotations

import time

from .records import Ack, Deadline, Failed, Got, as_rec, no_partitions, start_position


def version() -> dict:
    import kafka

    return {"version": kafka.__version__}


def has_codec(codec: str) -> bool:
    if codec == "none":
        return True
    import kafka.codec

    return getattr(kafka.codec, f"has_{codec}")()


def produce(bootstrap: str, topic: str, records, *, codec: str = "none", acks="all",
            config: dict | None = None, timeout: float = 30.0,
            transaction: str | None = None) -> list:
    """One Ack or Failed per record, in record order. ``transaction`` ("commit" or "abort",
    with ``transactional_id`` in ``config``): all records in one transaction, ended that way."""
    from kafka import KafkaProducer

    client = KafkaProducer(**{"bootstrap_servers": bootstrap,
                              "acks": acks if acks == "all" else int(acks),
                              "compression_type": None if codec == "none" else codec,
                              "linger_ms": 5, **(config or {})})
    try:
        if transaction:
            client.init_transactions()
            client.begin_transaction()
        futures = [client.send(topic, value=r.value, key=r.key, partition=r.partition,
                               timestamp_ms=r.timestamp, headers=list(r.headers) or None)
                   for r in map(as_rec, records)]
        client.flush(timeout)
        if transaction == "commit":
            client.commit_transaction()
        elif transaction:
            client.abort_transaction()
        results = []
        for future in futures:
            try:
                meta = future.get(timeout=timeout)
            except Exception as exc:  # noqa: BLE001 - the client's error is the result
                results.append(Failed(exc))
                continue
            results.append(Ack(meta.partition, meta.offset, meta.timestamp))
        return results
    finally:
        client.close(timeout=5)


def consume(bootstrap: str, topic: str, count: int, *, partitions=None, start="beginning",
            group: str | None = None, isolation: str = "read_uncommitted",
            config: dict | None = None, timeout: float = 20.0, on_record=None,
            on_rebalance=None) -> list[Got]:
    """As compat_tests.clients.confluent.consume."""
    from kafka import ConsumerRebalanceListener, KafkaConsumer, TopicPartition

    start = start_position(start)
    client = KafkaConsumer(**{"bootstrap_servers": bootstrap, "group_id": group,
                              "enable_auto_commit": bool(group), "isolation_level": isolation,
                              "auto_offset_reset": "latest" if start == "end" else "earliest",
                              **(config or {})})
    deadline = Deadline(timeout)
    got: list[Got] = []
    try:
        if group:
            rebalanced = on_rebalance or (lambda kind, parts: None)

            class Listener(ConsumerRebalanceListener):
                def on_partitions_assigned(self, assigned):
                    rebalanced("assigned", sorted(tp.partition for tp in assigned))

                def on_partitions_revoked(self, revoked):
                    rebalanced("revoked", sorted(tp.partition for tp in revoked))

            client.subscribe([topic], listener=Listener())
        else:
            while partitions is None:
                found = client.partitions_for_topic(topic)
                if found:
                    partitions = sorted(found)
                elif not deadline:
                    raise no_partitions(topic)
                else:
                    time.sleep(0.2)
            assigned = [TopicPartition(topic, p) for p in partitions]
            client.assign(assigned)
            if start == "beginning":
                client.seek_to_beginning(*assigned)
            elif start == "end":
                client.seek_to_end(*assigned)
            else:
                for tp in assigned:
                    client.seek(tp, start)
        while len(got) < count and deadline:
            polled = client.poll(timeout_ms=int(deadline.left(0.01, 0.5) * 1000),
                                 max_records=1000)
            for batch in polled.values():
                for r in batch:
                    record = Got(r.partition, r.offset, r.key, r.value,
                                 tuple((k, v) for k, v in (r.headers or ())), r.timestamp,
                                 "append" if r.timestamp_type == 1 else "create", r.topic,
                                 getattr(r, "leader_epoch", None))
                    got.append(record)
                    if on_record is not None:
                        on_record(record)
        if group and got:
            client.commit()
    finally:
        client.close()
    return sorted(got, key=lambda g: (g.partition, g.offset))
