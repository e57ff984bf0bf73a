"""aiokafka adapter (run on a private event loop). ``config`` holds AIOKafkaProducer /
AIOKafkaConsumer keyword arguments."""

from __future__ import annotations

import asyncio

from .records import Ack, Deadline, Failed, Got, as_rec, no_partitions, start_position


def version() -> dict:
    import aiokafka

    return {"version": aiokafka.__version__}


async def refresh_metadata(client) -> None:
    """aiokafka loads metadata for every topic at start() and then only every metadata.max.age.ms;
    ``topics()`` does not update the consumer's own view, so a new topic needs a forced refresh."""
    await client._client.force_metadata_update()


def produce(bootstrap: str, topic: str, records, *, codec: str = "none", acks="all",
            config: dict | None = None, timeout: float = 30.0,
            transaction: str | None = None) -> list:
    """One Ack or Failed per record, in record order; ``timeout`` bounds the whole delivery.
    ``transaction`` ("commit" or "abort", with ``transactional_id`` in ``config``): all records
    in one transaction, ended that way."""
    return asyncio.run(_produce(bootstrap, topic, [as_rec(r) for r in records], codec, acks,
                                config or {}, timeout, transaction))


async def _produce(bootstrap, topic, recs, codec, acks, config, timeout,
                   transaction=None) -> list:
    from aiokafka import AIOKafkaProducer

    client = AIOKafkaProducer(**{"bootstrap_servers": bootstrap,
                                 "acks": acks if acks == "all" else int(acks),
                                 "compression_type": None if codec == "none" else codec,
                                 "linger_ms": 5, **config})
    deadline = Deadline(timeout)
    await client.start()
    try:
        if transaction:
            await client.begin_transaction()
        jobs = []
        for rec in recs:
            try:
                # send() waits for metadata (and buffer space); it is ordered per partition.
                job = await asyncio.wait_for(client.send(
                    topic, value=rec.value, key=rec.key, partition=rec.partition,
                    timestamp_ms=rec.timestamp, headers=list(rec.headers) or None),
                    deadline.left(0.1) + 2)
            except Exception as exc:  # noqa: BLE001 - the client's error is the result
                job = asyncio.get_running_loop().create_future()
                job.set_exception(exc)
            jobs.append(job)
        pending = [j for j in jobs if not j.done()]
        if pending:
            await asyncio.wait(pending, timeout=deadline.left(0.1))
        if transaction == "commit":
            await client.commit_transaction()
        elif transaction:
            await client.abort_transaction()
        results = []
        for job in jobs:
            if not job.done():
                job.cancel()
                results.append(Failed(TimeoutError(f"not delivered within {timeout} s")))
            elif job.exception() is not None:
                results.append(Failed(job.exception()))
            else:
                md = job.result()
                # aiokafka 0.14 (_ProducerBatch.done) hands every record of a CreateTime batch
                # the first record's timestamp, so only a broker-assigned LogAppendTime is a
                # timestamp the client really had acknowledged.
                acked = md.timestamp if md.timestamp_type == 1 else None
                results.append(Ack(md.partition, md.offset, acked))
        return results
    finally:
        await asyncio.wait_for(client.stop(), 10)


def consume(bootstrap: str, topic: str, count: int, *, partitions=None, start="beginning",
            group: str | None = None, isolation: str = "read_uncommitted",
            config: dict | None = None, timeout: float = 20.0, on_record=None,
            on_rebalance=None) -> list[Got]:
    """As compat_tests.clients.confluent.consume."""
    got = asyncio.run(asyncio.wait_for(_consume(
        bootstrap, topic, count, partitions, start_position(start), group, isolation,
        config or {}, timeout, on_record, on_rebalance), timeout + 30))
    return sorted(got, key=lambda g: (g.partition, g.offset))


async def _consume(bootstrap, topic, count, partitions, start, group, isolation, config,
                   timeout, on_record, on_rebalance) -> list[Got]:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition

    client = AIOKafkaConsumer(**{"bootstrap_servers": bootstrap, "group_id": group,
                                 "enable_auto_commit": bool(group), "isolation_level": isolation,
                                 "auto_offset_reset": "latest" if start == "end" else "earliest",
                                 **config})
    deadline = Deadline(timeout)
    got: list[Got] = []
    await client.start()
    try:
        if group:
            rebalanced = on_rebalance or (lambda kind, parts: None)

            class Listener(ConsumerRebalanceListener):
                async def on_partitions_assigned(self, assigned):
                    rebalanced("assigned", sorted(tp.partition for tp in assigned))

                async def on_partitions_revoked(self, revoked):
                    rebalanced("revoked", sorted(tp.partition for tp in revoked))

            client.subscribe([topic], listener=Listener())
        else:
            while partitions is None:
                await refresh_metadata(client)
                found = client.partitions_for_topic(topic)
                if found:
                    partitions = sorted(found)
                elif not deadline:
                    raise no_partitions(topic)
                else:
                    await asyncio.sleep(0.2)
            assigned = [TopicPartition(topic, p) for p in partitions]
            client.assign(assigned)
            if start == "beginning":
                await client.seek_to_beginning(*assigned)
            elif start == "end":
                await client.seek_to_end(*assigned)
            else:
                for tp in assigned:
                    client.seek(tp, start)
        while len(got) < count and deadline:
            batches = await client.getmany(timeout_ms=int(deadline.left(0.01, 0.5) * 1000),
                                           max_records=1000)
            for batch in batches.values():
                for r in batch:
                    record = Got(r.partition, r.offset, r.key, r.value,
                                 tuple((k, v) for k, v in (r.headers or ())), r.timestamp,
                                 "append" if r.timestamp_type == 1 else "create", r.topic)
                    got.append(record)
                    if on_record is not None:
                        on_record(record)
        if group and got:
            await client.commit()
    finally:
        await asyncio.wait_for(client.stop(), 10)
    return got
