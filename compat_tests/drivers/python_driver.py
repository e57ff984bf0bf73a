#!/usr/bin/env python3
"""Compatibility driver for the Python clients: confluent-kafka, aiokafka and kafka-python.

Speaks the driver contract of ``compat_tests/README.md`` (the Java driver's command line and
JSON-lines output, plus the extensions listed there)::

    python_driver.py --client confluent|aiokafka|kafka-python version
    python_driver.py --client C produce --bootstrap H:P --topic T --count N [--compression X] ...
    python_driver.py --client C consume --bootstrap H:P --topic T --count N [--group G] ...
    python_driver.py --client C admin --bootstrap H:P create-topic|delete-topic|... --topic T ...

One JSON object per line on stdout; exit codes 0 ok, 1 error, 2 consume timed out, 64 usage.
Each client is driven through its own public API only: this is what a user of that client does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import warnings

warnings.simplefilter("ignore")  # client deprecation warnings must not pollute the output

EXIT_OK, EXIT_ERROR, EXIT_TIMEOUT, EXIT_USAGE = 0, 1, 2, 64


class Usage(Exception):
    pass


def emit(event: str, **fields) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


def error_fields(exc: BaseException) -> dict:
    """Exception class name, message and, when the client exposes one, the Kafka error name."""
    fields = {"error": type(exc).__name__, "message": str(exc)}
    code = None
    inner = exc.args[0] if exc.args else None
    if hasattr(inner, "name") and callable(inner.name):  # confluent KafkaError
        code = inner.name()
    elif hasattr(exc, "name") and callable(getattr(exc, "name", None)):
        code = exc.name()
    elif getattr(type(exc), "errno", None) not in (None, -1):  # kafka-python / aiokafka errors
        code = getattr(type(exc), "message", None) or type(exc).__name__
    if code:
        fields["code"] = code
    return fields


def text(b: bytes | None) -> str | None:
    return None if b is None else b.decode("utf-8", errors="replace")


def record_event(topic, partition, offset, key, value, headers, timestamp, append_time,
                 leader_epoch=None) -> None:
    emit("record", topic=topic, partition=partition, offset=offset, key=text(key),
         value=text(value), headers=[{"key": k, "value": text(v)} for k, v in headers or ()],
         timestamp=timestamp, timestampType="LogAppendTime" if append_time else "CreateTime",
         leaderEpoch=leader_epoch)


def properties(pairs: list[str]) -> dict:
    out = {}
    for kv in pairs:
        key, eq, value = kv.partition("=")
        if not eq or not key:
            raise Usage(f"--property/--config wants k=v, got {kv}")
        out[key] = value
    return out


def typed(value: str):
    """--property values for the Python clients' keyword arguments: ints and bools typed."""
    if value in ("true", "false"):
        return value == "true"
    try:
        return int(value)
    except ValueError:
        return value


def records_to_produce(a):
    """The contract's record i: key <key-prefix>i (null every N), value <value-prefix>i padded
    to --value-size, headers h-index=i and h-client=<client>, timestamp --timestamp + i."""
    for i in range(a.count):
        null_key = a.null_key_every > 0 and i % a.null_key_every == a.null_key_every - 1
        key = None if null_key else f"{a.key_prefix}{i}".encode()
        value = f"{a.value_prefix}{i}".encode()
        if a.value_size and len(value) < a.value_size:
            value += b"." * (a.value_size - len(value))
        headers = [("h-index", str(i).encode()), ("h-client", a.client.encode())] \
            if a.headers else None
        timestamp = a.timestamp + i if a.timestamp is not None else None
        yield i, key, value, headers, timestamp


def codec_or_none(codec: str):
    return None if codec == "none" else codec


# ---------------------------------------------------------------------------------- confluent

class Confluent:
    @staticmethod
    def version():
        import confluent_kafka
        return {"version": confluent_kafka.version()[0] if isinstance(
                    confluent_kafka.version(), tuple) else confluent_kafka.version(),
                "librdkafka": confluent_kafka.libversion()[0]}

    @staticmethod
    def produce(a) -> int:
        from confluent_kafka import Producer

        config = {"bootstrap.servers": a.bootstrap, "client.id": a.client_id,
                  "compression.type": a.compression, "acks": a.acks,
                  "enable.idempotence": a.idempotent, "linger.ms": a.linger_ms,
                  "message.timeout.ms": a.timeout_ms}
        config.update(properties(a.property))
        producer = Producer(config)
        acked, failed = [0], [False]

        def report(index):
            def on_delivery(err, msg):
                if err is not None:
                    failed[0] = True
                    emit("error", index=index, error="KafkaException", code=err.name(),
                         message=err.str())
                else:
                    acked[0] += 1
                    emit("produced", index=index, topic=msg.topic(), partition=msg.partition(),
                         offset=msg.offset(), timestamp=msg.timestamp()[1])
            return on_delivery

        deadline = time.monotonic() + a.timeout_ms / 1000
        for i, key, value, headers, timestamp in records_to_produce(a):
            kwargs = {"key": key, "value": value, "on_delivery": report(i)}
            if a.partition is not None:
                kwargs["partition"] = a.partition
            if headers:
                kwargs["headers"] = headers
            if timestamp is not None:
                kwargs["timestamp"] = timestamp
            producer.produce(a.topic, **kwargs)
            producer.poll(0)
        left = producer.flush(max(0.1, deadline - time.monotonic()) + 5)
        if left:
            failed[0] = True
            emit("error", error="TimeoutError", message=f"{left} records undelivered")
        emit("done", produced=acked[0], requested=a.count)
        return EXIT_OK if not failed[0] and acked[0] == a.count else EXIT_ERROR

    @staticmethod
    def consume(a) -> int:
        from confluent_kafka import (OFFSET_BEGINNING, OFFSET_END, TIMESTAMP_LOG_APPEND_TIME,
                                     Consumer, KafkaException, TopicPartition)

        config = {"bootstrap.servers": a.bootstrap, "client.id": a.client_id,
                  "auto.offset.reset": "earliest" if a.from_beginning else "latest",
                  "isolation.level": a.isolation, "enable.partition.eof": False,
                  # librdkafka insists on a group.id; without --group it is never used (assign).
                  "group.id": a.group or f"{a.client_id}-unused"}
        if not a.group:
            config.update({"enable.auto.commit": False, "enable.auto.offset.store": False})
        config.update(properties(a.property))
        consumer = Consumer(config)
        deadline = time.monotonic() + a.timeout_ms / 1000
        seen = 0
        try:
            if a.group:
                consumer.subscribe(
                    [a.topic],
                    on_assign=lambda c, ps: emit("assigned", partitions=sorted(
                        p.partition for p in ps)),
                    on_revoke=lambda c, ps: emit("revoked", partitions=sorted(
                        p.partition for p in ps)))
            else:
                parts = []
                while not parts and time.monotonic() < deadline:
                    meta = consumer.list_topics(a.topic, timeout=max(0.1, min(
                        5.0, deadline - time.monotonic()))).topics.get(a.topic)
                    if meta is not None and meta.error is None:
                        parts = sorted(meta.partitions)
                    if not parts:
                        time.sleep(0.2)
                if not parts:
                    raise no_partitions(a.topic)
                start = OFFSET_BEGINNING if a.from_beginning else OFFSET_END
                consumer.assign([TopicPartition(a.topic, p, start) for p in parts])
            while seen < a.count and time.monotonic() < deadline:
                left = max(0.01, min(0.5, deadline - time.monotonic()))
                for msg in consumer.consume(num_messages=500, timeout=left):
                    if msg.error() is not None:
                        if msg.error().fatal() or not msg.error().retriable():
                            raise KafkaException(msg.error())
                        continue
                    ts_type, ts = msg.timestamp()
                    leader_epoch = msg.leader_epoch() if hasattr(msg, "leader_epoch") else None
                    record_event(msg.topic(), msg.partition(), msg.offset(), msg.key(),
                                 msg.value(), msg.headers(), ts,
                                 ts_type == TIMESTAMP_LOG_APPEND_TIME, leader_epoch)
                    seen += 1
            if a.group and seen:
                consumer.commit(asynchronous=False)
        finally:
            consumer.close()
        return done_consuming(seen, a.count)

    @staticmethod
    def admin(a) -> int:
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,
                                           ConfigResource, NewPartitions, NewTopic, OffsetSpec)

        admin = AdminClient({"bootstrap.servers": a.bootstrap, "client.id": a.client_id,
                             **properties(a.property)})
        timeout = a.timeout_ms / 1000

        def wait(futures):
            return {k: f.result(timeout) for k, f in futures.items()}

        action = a.action
        if action == "create-topic":
            topic = NewTopic(a.topic, num_partitions=a.partitions or 1,
                             replication_factor=a.replication_factor,
                             config=properties(a.config))
            wait(admin.create_topics([topic], request_timeout=timeout))
            emit("created", topic=a.topic, partitions=a.partitions or 1,
                 replicationFactor=a.replication_factor)
        elif action == "delete-topic":
            wait(admin.delete_topics([a.topic], request_timeout=timeout))
            emit("deleted", topic=a.topic)
        elif action == "describe-topic":
            meta = admin.list_topics(a.topic, timeout=timeout).topics[a.topic]
            if meta.error is not None:
                from confluent_kafka import KafkaException
                raise KafkaException(meta.error)
            emit("topic", topic=a.topic, partitions=[
                {"partition": p.id, "leader": p.leader, "replicas": list(p.replicas),
                 "isr": list(p.isrs)} for p in sorted(meta.partitions.values(),
                                                      key=lambda p: p.id)])
        elif action == "list-topics":
            names = admin.list_topics(timeout=timeout).topics
            emit("topics", topics=sorted(n for n in names
                                         if a.internal or not n.startswith("__")))
        elif action == "create-partitions":
            wait(admin.create_partitions([NewPartitions(a.topic, a.partitions)],
                                         request_timeout=timeout))
            emit("partitions-created", topic=a.topic, partitions=a.partitions)
        elif action == "describe-configs":
            resource = ConfigResource("topic", a.topic)
            entries = wait(admin.describe_configs([resource], request_timeout=timeout))[resource]
            emit("configs", topic=a.topic, configs={k: e.value for k, e in entries.items()})
        elif action == "alter-configs":
            wanted = properties(a.config)
            resource = ConfigResource("topic", a.topic, incremental_configs=[
                ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                for k, v in wanted.items()])
            wait(admin.incremental_alter_configs([resource], request_timeout=timeout))
            emit("configs-altered", topic=a.topic, configs=wanted)
        elif action == "list-offsets":
            parts = sorted(admin.list_topics(a.topic, timeout=timeout)
                           .topics[a.topic].partitions)
            specs = {"earliest": OffsetSpec.earliest(), "latest": OffsetSpec.latest()}
            if a.timestamp is not None:
                specs["forTimestamp"] = OffsetSpec.for_timestamp(a.timestamp)
            found = {p: {"partition": p} for p in parts}
            for name, spec in specs.items():
                got = wait(admin.list_offsets({TopicPartition(a.topic, p): spec for p in parts},
                                              request_timeout=timeout))
                for tp, info in got.items():
                    found[tp.partition][name] = info.offset
            emit("offsets", topic=a.topic, partitions=[found[p] for p in parts])
        elif action == "delete-records":
            tp = TopicPartition(a.topic, a.partition, a.offset)
            got = wait(admin.delete_records([tp], request_timeout=timeout))
            low = next(iter(got.values()))
            emit("records-deleted", topic=a.topic, partition=a.partition,
                 lowWatermark=getattr(low, "low_watermark", a.offset))
        else:
            raise Usage(f"unknown admin action {action}")
        return EXIT_OK


# ---------------------------------------------------------------------------------- kafka-python

class KafkaPython:
    @staticmethod
    def version():
        import kafka
        return {"version": kafka.__version__}

    @staticmethod
    def produce(a) -> int:
        from kafka import KafkaProducer

        kwargs = {"bootstrap_servers": a.bootstrap, "client_id": a.client_id,
                  "compression_type": codec_or_none(a.compression),
                  "acks": a.acks if a.acks == "all" else int(a.acks),
                  "enable_idempotence": a.idempotent, "linger_ms": a.linger_ms,
                  "max_block_ms": a.timeout_ms, "request_timeout_ms": min(a.timeout_ms, 30000)}
        if a.value_size:
            kwargs["max_request_size"] = max(1048576, a.value_size + 4096)
        kwargs.update({k.replace(".", "_"): typed(v) for k, v in properties(a.property).items()})
        producer = KafkaProducer(**kwargs)
        acked, failed = 0, False
        try:
            futures = []
            for i, key, value, headers, timestamp in records_to_produce(a):
                futures.append((i, producer.send(a.topic, key=key, value=value,
                                                 partition=a.partition, headers=headers,
                                                 timestamp_ms=timestamp)))
            producer.flush(a.timeout_ms / 1000)
            for i, future in futures:
                try:
                    md = future.get(timeout=a.timeout_ms / 1000)
                except Exception as exc:  # noqa: BLE001 - reported as an event
                    failed = True
                    emit("error", index=i, **error_fields(exc))
                    continue
                acked += 1
                emit("produced", index=i, topic=md.topic, partition=md.partition,
                     offset=md.offset, timestamp=md.timestamp)
        finally:
            producer.close(timeout=5)
        emit("done", produced=acked, requested=a.count)
        return EXIT_OK if not failed and acked == a.count else EXIT_ERROR

    @staticmethod
    def consume(a) -> int:
        from kafka import ConsumerRebalanceListener, KafkaConsumer, TopicPartition

        kwargs = {"bootstrap_servers": a.bootstrap, "client_id": a.client_id,
                  "group_id": a.group, "isolation_level": a.isolation,
                  "auto_offset_reset": "earliest" if a.from_beginning else "latest",
                  "enable_auto_commit": bool(a.group), "fetch_max_wait_ms": 200}
        kwargs.update({k.replace(".", "_"): typed(v) for k, v in properties(a.property).items()})
        consumer = KafkaConsumer(**kwargs)
        deadline = time.monotonic() + a.timeout_ms / 1000
        seen = 0
        try:
            if a.group:
                class Listener(ConsumerRebalanceListener):
                    def on_partitions_assigned(self, assigned):
                        emit("assigned", partitions=sorted(tp.partition for tp in assigned))

                    def on_partitions_revoked(self, revoked):
                        emit("revoked", partitions=sorted(tp.partition for tp in revoked))

                consumer.subscribe([a.topic], listener=Listener())
            else:
                parts = None
                while not parts and time.monotonic() < deadline:
                    parts = consumer.partitions_for_topic(a.topic)
                    if not parts:
                        time.sleep(0.2)
                if not parts:
                    raise no_partitions(a.topic)
                tps = [TopicPartition(a.topic, p) for p in sorted(parts)]
                consumer.assign(tps)
                if a.from_beginning:
                    consumer.seek_to_beginning(*tps)
                else:
                    consumer.seek_to_end(*tps)
            while seen < a.count and time.monotonic() < deadline:
                left = int(max(10, min(500, (deadline - time.monotonic()) * 1000)))
                for tp, batch in consumer.poll(timeout_ms=left).items():
                    for r in batch:
                        record_event(r.topic, r.partition, r.offset, r.key, r.value,
                                     r.headers, r.timestamp, r.timestamp_type == 1,
                                     getattr(r, "leader_epoch", None))
                        seen += 1
            if a.group and seen:
                consumer.commit()
        finally:
            consumer.close()
        return done_consuming(seen, a.count)

    @staticmethod
    def admin(a) -> int:
        from kafka import KafkaConsumer, TopicPartition
        from kafka.admin import (ConfigResource, ConfigResourceType, KafkaAdminClient,
                                 NewPartitions, NewTopic)

        admin = KafkaAdminClient(bootstrap_servers=a.bootstrap, client_id=a.client_id,
                                 request_timeout_ms=a.timeout_ms,
                                 **{k.replace(".", "_"): typed(v)
                                    for k, v in properties(a.property).items()})
        try:
            action = a.action
            if action == "create-topic":
                admin.create_topics([NewTopic(a.topic, a.partitions or 1, a.replication_factor,
                                              topic_configs=properties(a.config))],
                                    raise_errors=True)
                emit("created", topic=a.topic, partitions=a.partitions or 1,
                     replicationFactor=a.replication_factor)
            elif action == "delete-topic":
                admin.delete_topics([a.topic], raise_errors=True)
                emit("deleted", topic=a.topic)
            elif action == "describe-topic":
                (desc,) = admin.describe_topics([a.topic])
                if desc.get("error_code"):
                    raise RuntimeError(f"describe_topics error_code {desc['error_code']}")
                emit("topic", topic=a.topic, partitions=[
                    {"partition": p["partition_index"], "leader": p["leader_id"],
                     "replicas": p["replica_nodes"], "isr": p["isr_nodes"]}
                    for p in sorted(desc["partitions"], key=lambda p: p["partition_index"])])
            elif action == "list-topics":
                emit("topics", topics=sorted(t for t in admin.list_topics()
                                             if a.internal or not t.startswith("__")))
            elif action == "create-partitions":
                admin.create_partitions({a.topic: NewPartitions(a.partitions)}, raise_errors=True)
                emit("partitions-created", topic=a.topic, partitions=a.partitions)
            elif action == "describe-configs":
                # {resource type: {resource name: {config key: {config data}}}}
                response = admin.describe_configs(
                    [ConfigResource(ConfigResourceType.TOPIC, a.topic)], config_filter="all")
                configs = {}
                for by_name in response.values():
                    for key, data in by_name.get(a.topic, {}).items():
                        configs[key] = data.get("value") if isinstance(data, dict) else data
                emit("configs", topic=a.topic, configs=configs)
            elif action == "alter-configs":
                # IncrementalAlterConfigs SET when the broker serves it (kafka-python's default).
                wanted = properties(a.config)
                response = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, a.topic,
                                                               configs=wanted)])
                for by_name in response.values():
                    result = by_name.get(a.topic)
                    if isinstance(result, BaseException):
                        raise result
                emit("configs-altered", topic=a.topic, configs=wanted)
            elif action == "list-offsets":
                consumer = KafkaConsumer(bootstrap_servers=a.bootstrap, client_id=a.client_id)
                try:
                    tps = [TopicPartition(a.topic, p)
                           for p in sorted(consumer.partitions_for_topic(a.topic) or ())]
                    earliest = consumer.beginning_offsets(tps)
                    latest = consumer.end_offsets(tps)
                    by_time = consumer.offsets_for_times({tp: a.timestamp for tp in tps}) \
                        if a.timestamp is not None else {}
                finally:
                    consumer.close()
                out = []
                for tp in tps:
                    entry = {"partition": tp.partition, "earliest": earliest[tp],
                             "latest": latest[tp]}
                    if a.timestamp is not None:
                        found = by_time.get(tp)
                        entry["forTimestamp"] = found.offset if found else -1
                    out.append(entry)
                emit("offsets", topic=a.topic, partitions=out)
            elif action == "delete-records":
                got = admin.delete_records({TopicPartition(a.topic, a.partition): a.offset})
                low = a.offset
                for value in (got or {}).values():
                    low = value.get("low_watermark", low) if isinstance(value, dict) else low
                emit("records-deleted", topic=a.topic, partition=a.partition, lowWatermark=low)
            else:
                raise Usage(f"unknown admin action {action}")
        finally:
            admin.close()
        return EXIT_OK


# ---------------------------------------------------------------------------------- aiokafka

class AioKafka:
    @staticmethod
    def version():
        import aiokafka
        return {"version": aiokafka.__version__}

    @staticmethod
    def produce(a) -> int:
        return asyncio.run(AioKafka._produce(a))

    @staticmethod
    async def _produce(a) -> int:
        from aiokafka import AIOKafkaProducer

        kwargs = {"bootstrap_servers": a.bootstrap, "client_id": a.client_id,
                  "compression_type": codec_or_none(a.compression),
                  "acks": a.acks if a.acks == "all" else int(a.acks),
                  "enable_idempotence": a.idempotent, "linger_ms": a.linger_ms,
                  "request_timeout_ms": min(a.timeout_ms, 30000)}
        if a.value_size:
            kwargs["max_request_size"] = max(1048576, a.value_size + 4096)
        kwargs.update({k.replace(".", "_"): typed(v) for k, v in properties(a.property).items()})
        producer = AIOKafkaProducer(**kwargs)
        acked, failed = 0, False
        await producer.start()
        try:
            deadline = time.monotonic() + a.timeout_ms / 1000
            jobs = []
            for i, key, value, headers, timestamp in records_to_produce(a):
                try:
                    # send() waits for metadata (and buffer space); it is ordered per partition.
                    future = await asyncio.wait_for(producer.send(
                        a.topic, key=key, value=value, partition=a.partition, headers=headers,
                        timestamp_ms=timestamp), max(0.1, deadline - time.monotonic()) + 2)
                except Exception as exc:  # noqa: BLE001 - reported as an event
                    future = asyncio.get_running_loop().create_future()
                    future.set_exception(exc)
                jobs.append((i, future))
            pending = [j for _, j in jobs if not j.done()]
            done = set(j for _, j in jobs if j.done())
            if pending:
                finished, _ = await asyncio.wait(pending, timeout=max(
                    0.1, deadline - time.monotonic()))
                done |= finished
            for i, job in jobs:
                if job not in done:
                    job.cancel()
                    failed = True
                    emit("error", index=i, error="TimeoutError",
                         message=f"not delivered within {a.timeout_ms} ms")
                elif job.exception() is not None:
                    failed = True
                    emit("error", index=i, **error_fields(job.exception()))
                else:
                    md = job.result()
                    acked += 1
                    emit("produced", index=i, topic=md.topic, partition=md.partition,
                         offset=md.offset, timestamp=md.timestamp)
        finally:
            await asyncio.wait_for(producer.stop(), 10)
        emit("done", produced=acked, requested=a.count)
        return EXIT_OK if not failed and acked == a.count else EXIT_ERROR

    @staticmethod
    def consume(a) -> int:
        return asyncio.run(AioKafka._consume(a))

    @staticmethod
    async def _consume(a) -> int:
        from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition

        kwargs = {"bootstrap_servers": a.bootstrap, "client_id": a.client_id,
                  "group_id": a.group, "isolation_level": a.isolation,
                  "auto_offset_reset": "earliest" if a.from_beginning else "latest",
                  "enable_auto_commit": bool(a.group), "fetch_max_wait_ms": 200}
        kwargs.update({k.replace(".", "_"): typed(v) for k, v in properties(a.property).items()})
        consumer = AIOKafkaConsumer(**kwargs)
        deadline = time.monotonic() + a.timeout_ms / 1000
        seen = 0
        await consumer.start()
        try:
            if a.group:
                class Listener(ConsumerRebalanceListener):
                    async def on_partitions_assigned(self, assigned):
                        emit("assigned", partitions=sorted(tp.partition for tp in assigned))

                    async def on_partitions_revoked(self, revoked):
                        emit("revoked", partitions=sorted(tp.partition for tp in revoked))

                consumer.subscribe([a.topic], listener=Listener())
            else:
                parts = None
                while not parts and time.monotonic() < deadline:
                    await refresh_metadata(consumer)
                    parts = consumer.partitions_for_topic(a.topic)
                    if not parts:
                        await asyncio.sleep(0.2)
                if not parts:
                    raise no_partitions(a.topic)
                tps = [TopicPartition(a.topic, p) for p in sorted(parts)]
                consumer.assign(tps)
                if a.from_beginning:
                    await consumer.seek_to_beginning(*tps)
                else:
                    await consumer.seek_to_end(*tps)
            while seen < a.count and time.monotonic() < deadline:
                left = int(max(10, min(500, (deadline - time.monotonic()) * 1000)))
                for tp, batch in (await consumer.getmany(timeout_ms=left)).items():
                    for r in batch:
                        record_event(r.topic, r.partition, r.offset, r.key, r.value,
                                     r.headers, r.timestamp, r.timestamp_type == 1)
                        seen += 1
            if a.group and seen:
                await consumer.commit()
        finally:
            await asyncio.wait_for(consumer.stop(), 10)
        return done_consuming(seen, a.count)

    @staticmethod
    def admin(a) -> int:
        return asyncio.run(AioKafka._admin(a))

    @staticmethod
    async def _admin(a) -> int:
        from aiokafka import AIOKafkaConsumer, TopicPartition
        from aiokafka.admin import (AIOKafkaAdminClient, NewPartitions, NewTopic,
                                    RecordsToDelete)
        from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

        admin = AIOKafkaAdminClient(bootstrap_servers=a.bootstrap, client_id=a.client_id,
                                    request_timeout_ms=a.timeout_ms)
        await admin.start()
        try:
            action = a.action
            if action == "create-topic":
                response = await admin.create_topics([NewTopic(
                    a.topic, a.partitions or 1, a.replication_factor,
                    topic_configs=properties(a.config))])
                check_topic_errors(response, "topic_errors", a.topic)
                emit("created", topic=a.topic, partitions=a.partitions or 1,
                     replicationFactor=a.replication_factor)
            elif action == "delete-topic":
                response = await admin.delete_topics([a.topic])
                check_topic_errors(response, "topic_error_codes", a.topic)
                emit("deleted", topic=a.topic)
            elif action == "describe-topic":
                (desc,) = await admin.describe_topics([a.topic])
                if desc.get("error_code"):
                    raise RuntimeError(f"describe_topics error_code {desc['error_code']}")
                emit("topic", topic=a.topic, partitions=[
                    {"partition": p["partition"], "leader": p["leader"],
                     "replicas": p["replicas"], "isr": p["isr"]}
                    for p in sorted(desc["partitions"], key=lambda p: p["partition"])])
            elif action == "list-topics":
                emit("topics", topics=sorted(t for t in await admin.list_topics()
                                             if a.internal or not t.startswith("__")))
            elif action == "create-partitions":
                response = await admin.create_partitions({a.topic: NewPartitions(a.partitions)})
                check_topic_errors(response, "topic_errors", a.topic)
                emit("partitions-created", topic=a.topic, partitions=a.partitions)
            elif action == "describe-configs":
                responses = await admin.describe_configs(
                    [ConfigResource(ConfigResourceType.TOPIC, a.topic)])
                configs = {}
                for resp in responses:
                    for res in resp.resources:
                        if res[0]:
                            raise RuntimeError(f"describe_configs error {res[0]}: {res[1]}")
                        configs.update({entry[0]: entry[1] for entry in res[4]})
                emit("configs", topic=a.topic, configs=configs)
            elif action == "alter-configs":
                # aiokafka has AlterConfigs only (not incremental): replaces all overrides.
                wanted = properties(a.config)
                response = await admin.alter_configs(
                    [ConfigResource(ConfigResourceType.TOPIC, a.topic, configs=wanted)])
                for resp in response if isinstance(response, list) else [response]:
                    for res in resp.resources:
                        if res[0]:
                            raise RuntimeError(f"alter_configs error {res[0]}: {res[1]}")
                emit("configs-altered", topic=a.topic, configs=wanted)
            elif action == "list-offsets":
                # aiokafka's admin client has no ListOffsets; its consumer has the calls.
                consumer = AIOKafkaConsumer(bootstrap_servers=a.bootstrap, client_id=a.client_id)
                await consumer.start()
                try:
                    await refresh_metadata(consumer)
                    tps = [TopicPartition(a.topic, p)
                           for p in sorted(consumer.partitions_for_topic(a.topic) or ())]
                    earliest = await consumer.beginning_offsets(tps)
                    latest = await consumer.end_offsets(tps)
                    by_time = await consumer.offsets_for_times(
                        {tp: a.timestamp for tp in tps}) if a.timestamp is not None else {}
                finally:
                    await consumer.stop()
                out = []
                for tp in tps:
                    entry = {"partition": tp.partition, "earliest": earliest[tp],
                             "latest": latest[tp]}
                    if a.timestamp is not None:
                        found = by_time.get(tp)
                        entry["forTimestamp"] = found.offset if found else -1
                    out.append(entry)
                emit("offsets", topic=a.topic, partitions=out)
            elif action == "delete-records":
                got = await admin.delete_records(
                    {TopicPartition(a.topic, a.partition): RecordsToDelete(a.offset)})
                low = next(iter(got.values())) if got else a.offset
                emit("records-deleted", topic=a.topic, partition=a.partition, lowWatermark=low)
            else:
                raise Usage(f"unknown admin action {action}")
        finally:
            await admin.close()
        return EXIT_OK


async def refresh_metadata(consumer) -> None:
    """aiokafka loads metadata for every topic at start() and then only every metadata.max.age.ms;
    ``topics()`` does not update the consumer's own view, so a new topic needs a forced refresh."""
    await consumer._client.force_metadata_update()


def no_partitions(topic: str):
    return RuntimeError(f"topic {topic} not found in metadata before the timeout")


def check_topic_errors(response, field: str, topic: str) -> None:
    """aiokafka returns raw responses: raise on a per-topic error code."""
    for entry in getattr(response, field, ()) or ():
        name, code = entry[0], entry[1]
        if code:
            from aiokafka.errors import for_code
            error = for_code(code)
            message = entry[2] if len(entry) > 2 and isinstance(entry[2], str) else ""
            raise error(f"{name}: {message}")


def done_consuming(seen: int, count: int) -> int:
    ok = seen >= count
    emit("done", consumed=seen, requested=count, timedOut=not ok)
    return EXIT_OK if ok else EXIT_TIMEOUT


CLIENTS = {"confluent": Confluent, "kafka-python": KafkaPython, "aiokafka": AioKafka}


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--bootstrap", required=True)
    common.add_argument("--client-id", default="kbroker-python-driver")
    common.add_argument("--property", action="append", default=[])
    common.add_argument("--timeout-ms", type=int, default=30000)

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--client", choices=sorted(CLIENTS), required=True)
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("version")

    prod = sub.add_parser("produce", parents=[common])
    prod.add_argument("--topic", required=True)
    prod.add_argument("--count", type=int, default=10)
    prod.add_argument("--compression", default="none",
                      choices=["none", "gzip", "snappy", "lz4", "zstd"])
    prod.add_argument("--acks", default="all", choices=["all", "-1", "1", "0"])
    prod.add_argument("--idempotent", default="true", choices=["true", "false"])
    prod.add_argument("--key-prefix", default="key-")
    prod.add_argument("--value-prefix", default="value-")
    prod.add_argument("--null-key-every", type=int, default=0)
    prod.add_argument("--headers", action="store_true")
    prod.add_argument("--partition", type=int)
    prod.add_argument("--linger-ms", type=int, default=5)
    prod.add_argument("--timestamp", type=int, help="record i gets timestamp TIMESTAMP + i")
    prod.add_argument("--value-size", type=int, default=0, help="pad each value to N bytes")

    cons = sub.add_parser("consume", parents=[common])
    cons.add_argument("--topic", required=True)
    cons.add_argument("--count", type=int, default=10)
    cons.add_argument("--group")
    cons.add_argument("--from-beginning", action="store_true")
    cons.add_argument("--isolation", default="read_uncommitted",
                      choices=["read_uncommitted", "read_committed"])

    adm = sub.add_parser("admin", parents=[common])
    adm.add_argument("action")
    adm.add_argument("--topic")
    adm.add_argument("--partitions", type=int)
    adm.add_argument("--replication-factor", type=int, default=1)
    adm.add_argument("--config", action="append", default=[])
    adm.add_argument("--internal", action="store_true")
    adm.add_argument("--partition", type=int, default=0)
    adm.add_argument("--offset", type=int)
    adm.add_argument("--timestamp", type=int)
    return p


def main(argv=None) -> int:
    try:
        a = parser().parse_args(argv)
    except SystemExit as exit_:
        return EXIT_USAGE if exit_.code else EXIT_OK
    impl = CLIENTS[a.client]
    if a.command == "version":
        emit("version", client=a.client, **impl.version())
        return EXIT_OK
    if a.command == "produce":
        a.idempotent = a.idempotent == "true"
        if a.acks == "-1":
            a.acks = "all"
    try:
        return getattr(impl, a.command)(a)
    except Usage as exc:
        emit("error", error="usage", message=str(exc))
        return EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 - every failure is reported as an event
        emit("error", **error_fields(exc))
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
