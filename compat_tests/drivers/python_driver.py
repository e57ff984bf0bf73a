"""Compatibility driver for the Python clients: confluent-kafka, aiokafka and kafka-python.

Speaks the driver contract of ``compat_tests/README.md`` (the Java driver's command line and
JSON-lines output, plus the extensions listed there)::

    python_driver.py --client confluent|aiokafka|kafka-python version
    python_driver.py --client C produce --bootstrap H:P --topic T --count N [--compression X] ...
    python_driver.py --client C consume --bootstrap H:P --topic T --count N [--group G] ...
    python_driver.py --client C admin --bootstrap H:P create-topic|delete-topic|... --topic T ...
    python_driver.py --client confluent sr-produce|sr-consume|sr-register --registry URL ...

One JSON object per line on stdout; exit codes 0 ok, 1 error, 2 consume timed out, 64 usage.
Each client is driven through its own public API only: this is what a user of that client does.
Produce and consume go through the shared adapters of ``compat_tests/clients`` (the integration
tests use them too); this module turns the contract's options into each client's settings.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import warnings

warnings.simplefilter("ignore")  # client deprecation warnings must not pollute the output

from contract import (EXIT_ERROR, EXIT_OK, EXIT_USAGE, Usage, contract_records,  # noqa: E402
                      done_consuming, emit, error_fields, rebalance_event, record_event,
                      report_produced, text)

import python_schema_registry  # noqa: E402
from compat_tests.clients import adapter  # noqa: E402
from compat_tests.clients.aio import refresh_metadata  # noqa: E402


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


def produce(a) -> int:
    """The contract's records through the client's adapter; settings from the options."""
    records = contract_records(a.count, a.key_prefix, a.value_prefix, a.null_key_every,
                               a.value_size, a.client if a.headers else None, a.partition,
                               a.timestamp)
    config = PRODUCER_CONFIG[a.client](a)
    if a.transactional_id:
        config[TRANSACTIONAL_ID[a.client]] = a.transactional_id
    results = adapter(a.client).produce(a.bootstrap, a.topic, records, codec=a.compression,
                                        acks=a.acks, config=config,
                                        timeout=a.timeout_ms / 1000 + FLUSH_GRACE[a.client],
                                        transaction=a.transaction if a.transactional_id
                                        else None)
    code = report_produced(a.topic, results)
    if a.transactional_id:
        emit("transaction", result=a.transaction)
    return code


def consume(a) -> int:
    if a.pattern and not a.group:
        raise SystemExit("--pattern needs --group")
    if a.pattern and a.client != "confluent":
        raise SystemExit(f"--pattern: not wired for {a.client}")
    # librdkafka reads a subscribed topic that starts with "^" as a regular expression.
    topic = "^" + a.topic.lstrip("^") if a.pattern else a.topic
    got = adapter(a.client).consume(
        a.bootstrap, topic, a.count, start="beginning" if a.from_beginning else "end",
        group=a.group, isolation=a.isolation, config=CONSUMER_CONFIG[a.client](a),
        timeout=a.timeout_ms / 1000, on_record=record_event, on_rebalance=rebalance_event)
    return done_consuming(len(got), a.count)


def python_client_settings(a) -> dict:
    """kafka-python's and aiokafka's producer keyword arguments for the options."""
    kwargs = {"client_id": a.client_id, "enable_idempotence": a.idempotent,
              "linger_ms": a.linger_ms, "request_timeout_ms": min(a.timeout_ms, 30000)}
    if a.value_size:
        kwargs["max_request_size"] = max(1048576, a.value_size + 4096)
    return kwargs


def python_properties(a) -> dict:
    kwargs = {k.replace(".", "_"): typed(v) for k, v in properties(a.property).items()}
    _oidc_token_provider(a.client, kwargs)
    return kwargs


def _oidc_token_provider(client: str, kwargs: dict) -> None:
    """kafka-python and aiokafka take OAUTHBEARER tokens from a token-provider object: given
    librdkafka's oidc settings (``sasl.oauthbearer.token.endpoint.url``, ``.client.id``,
    ``.client.secret``, ``.scope``), build one that asks the endpoint for a client-credentials
    token (HTTP Basic, as Kafka's and librdkafka's logins do) each time a connection logs in."""
    url = kwargs.pop("sasl_oauthbearer_token_endpoint_url", None)
    if url is None:
        return
    import base64
    import json
    import urllib.parse
    import urllib.request

    client_id = str(kwargs.pop("sasl_oauthbearer_client_id"))
    secret = str(kwargs.pop("sasl_oauthbearer_client_secret"))
    scope = kwargs.pop("sasl_oauthbearer_scope", None)

    def fetch() -> str:
        form = {"grant_type": "client_credentials", **({"scope": scope} if scope else {})}
        basic = base64.b64encode(f"{urllib.parse.quote_plus(client_id)}:"
                                 f"{urllib.parse.quote_plus(secret)}".encode()).decode()
        request = urllib.request.Request(url, urllib.parse.urlencode(form).encode(),
                                         {"Authorization": f"Basic {basic}"})
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return json.load(response)["access_token"]

    if client == "aiokafka":
        import asyncio

        from aiokafka.abc import AbstractTokenProvider

        class Provider(AbstractTokenProvider):
            async def token(self):
                return await asyncio.to_thread(fetch)
    else:
        from kafka.net.sasl.oauth import AbstractTokenProvider

        class Provider(AbstractTokenProvider):
            def token(self):
                return fetch()
    kwargs["sasl_oauth_token_provider"] = Provider()


def aiokafka_properties(a) -> dict:
    """As kafka-python's, except that aiokafka takes TLS settings only as an ``ssl_context``:
    ``ssl.cafile``/``ssl.certfile``/``ssl.keyfile`` build one with aiokafka's own helper."""
    kwargs = python_properties(a)
    files = {k: kwargs.pop(f"ssl_{k}") for k in ("cafile", "certfile", "keyfile")
             if f"ssl_{k}" in kwargs}
    if files:
        from aiokafka.helpers import create_ssl_context
        kwargs["ssl_context"] = create_ssl_context(**files)
    return kwargs


PRODUCER_CONFIG = {
    "confluent": lambda a: {"client.id": a.client_id, "enable.idempotence": a.idempotent,
                            "linger.ms": a.linger_ms, "message.timeout.ms": a.timeout_ms,
                            **properties(a.property)},
    "kafka-python": lambda a: {**python_client_settings(a), "max_block_ms": a.timeout_ms,
                               **python_properties(a)},
    "aiokafka": lambda a: {**python_client_settings(a), **aiokafka_properties(a)},
}
TRANSACTIONAL_ID = {"confluent": "transactional.id", "kafka-python": "transactional_id",
                    "aiokafka": "transactional_id"}
# librdkafka gives up after message.timeout.ms by itself: its flush waits a little longer.
FLUSH_GRACE = {"confluent": 5, "kafka-python": 0, "aiokafka": 0}
CONSUMER_CONFIG = {
    # librdkafka insists on a group.id; without --group it is never used (assign).
    "confluent": lambda a: {"client.id": a.client_id,
                            **({} if a.group else {"group.id": f"{a.client_id}-unused"}),
                            **properties(a.property)},
    "kafka-python": lambda a: {"client_id": a.client_id, "fetch_max_wait_ms": 200,
                               **python_properties(a)},
    "aiokafka": lambda a: {"client_id": a.client_id, "fetch_max_wait_ms": 200,
                           **aiokafka_properties(a)},
}


# ---------------------------------------------------------------------------------- confluent

class Confluent:
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




class KafkaPython:
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
                emit_offsets(a, tps, earliest, latest, by_time)
            elif action == "delete-records":
                got = admin.delete_records({TopicPartition(a.topic, a.partition): a.offset})
                low = a.offset
                for value in (got or {}).values():
                    low = value.get("low_watermark", low) if isinstance(value, dict) else low
                emit("records-deleted", topic=a.topic, partition=a.partition, lowWatermark=low)
            elif action == "move-log-dir":
                from kafka import TopicPartitionReplica
                replica = TopicPartitionReplica(a.topic, a.partition, a.broker)
                got = admin.alter_replica_log_dirs({replica: a.log_dir})
                error = got.get(replica)
                if error is None or error.errno != 0:
                    raise RuntimeError(f"alter_replica_log_dirs: {error}")
                emit("log-dir-moved", topic=a.topic, partition=a.partition, broker=a.broker,
                     logDir=a.log_dir)
            else:
                raise Usage(f"unknown admin action {action}")
        finally:
            admin.close()
        return EXIT_OK



class AioKafka:
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
                emit_offsets(a, tps, earliest, latest, by_time)
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


def emit_offsets(a, tps, earliest: dict, latest: dict, by_time: dict) -> None:
    """The `offsets` event from kafka-python's or aiokafka's consumer offset lookups."""
    out = []
    for tp in tps:
        entry = {"partition": tp.partition, "earliest": earliest[tp], "latest": latest[tp]}
        if a.timestamp is not None:
            found = by_time.get(tp)
            entry["forTimestamp"] = found.offset if found else -1
        out.append(entry)
    emit("offsets", topic=a.topic, partitions=out)


def check_topic_errors(response, field: str, topic: str) -> None:
    """aiokafka returns raw responses: raise on a per-topic error code."""
    for entry in getattr(response, field, ()) or ():
        name, code = entry[0], entry[1]
        if code:
            from aiokafka.errors import for_code
            error = for_code(code)
            message = entry[2] if len(entry) > 2 and isinstance(entry[2], str) else ""
            raise error(f"{name}: {message}")


def share_consume(a) -> int:
    """A share group member (KIP-932): confluent-kafka's ShareConsumer is the only Python one.
    ``--ack implicit`` accepts on the next poll; accept/release/reject acknowledge each record
    explicitly and commit; ``hold`` acknowledges nothing and keeps the acquisition locks until
    the process is killed (the lock-expiry scenario)."""
    if a.client != "confluent":
        emit("error", error="unsupported", message=f"{a.client} has no share consumer")
        return EXIT_USAGE
    import time

    from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer

    explicit = a.ack != "implicit"
    consumer = ShareConsumer({"bootstrap.servers": a.bootstrap, "group.id": a.group,
                              "client.id": a.client_id,
                              "share.acknowledgement.mode": "explicit" if explicit else "implicit",
                              **properties(a.property)})
    consumer.subscribe([a.topic])
    deadline = time.monotonic() + a.timeout_ms / 1000
    seen = 0
    try:
        while seen < a.count and time.monotonic() < deadline:
            for m in consumer.poll(min(0.5, max(0.01, deadline - time.monotonic()))):
                if m.error() is not None:
                    if m.error().fatal() or not m.error().retriable():
                        raise KafkaException(m.error())
                    continue
                seen += 1
                emit("record", topic=m.topic(), partition=m.partition(), offset=m.offset(),
                     key=text(m.key()), value=text(m.value()),
                     deliveryCount=m.delivery_count())
                if a.ack in ACK_TYPES:
                    consumer.acknowledge(m, getattr(AcknowledgeType, ACK_TYPES[a.ack]))
            if explicit and a.ack != "hold":
                consumer.commit_sync(a.timeout_ms / 1000)
        if a.ack == "hold" and seen:
            emit("holding", records=seen)
            time.sleep(3600)  # keep the locks until the scenario kills this process
        code = done_consuming(seen, a.count)
    finally:
        if a.ack != "hold":
            consumer.close()
    return code


ACK_TYPES = {"accept": "ACCEPT", "release": "RELEASE", "reject": "REJECT"}
ADMIN = {"confluent": Confluent.admin, "kafka-python": KafkaPython.admin,
         "aiokafka": AioKafka.admin}
COMMANDS = {"produce": produce, "consume": consume, "share-consume": share_consume,
            "admin": lambda a: ADMIN[a.client](a), **python_schema_registry.COMMANDS}


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--bootstrap", required=True)
    common.add_argument("--client-id", default="kbroker-python-driver")
    common.add_argument("--property", action="append", default=[])
    common.add_argument("--timeout-ms", type=int, default=30000)

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--client", choices=sorted(ADMIN), required=True)
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
    prod.add_argument("--transactional-id", help="write every record in one transaction")
    prod.add_argument("--transaction", default="commit", choices=["commit", "abort"])

    cons = sub.add_parser("consume", parents=[common])
    cons.add_argument("--topic", required=True)
    cons.add_argument("--count", type=int, default=10)
    cons.add_argument("--group")
    cons.add_argument("--from-beginning", action="store_true")
    cons.add_argument("--pattern", action="store_true",
                      help="the topic is a regular expression (with --group)")
    cons.add_argument("--isolation", default="read_uncommitted",
                      choices=["read_uncommitted", "read_committed"])

    share = sub.add_parser("share-consume", parents=[common])
    share.add_argument("--topic", required=True)
    share.add_argument("--group", required=True)
    share.add_argument("--count", type=int, default=10)
    share.add_argument("--ack", default="implicit",
                       choices=["implicit", "accept", "release", "reject", "hold"])

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
    adm.add_argument("--broker", type=int)
    adm.add_argument("--log-dir")

    python_schema_registry.add_parsers(sub, common)
    return p


def main(argv=None) -> int:
    try:
        a = parser().parse_args(argv)
    except SystemExit as exit_:
        return EXIT_USAGE if exit_.code else EXIT_OK
    if a.command == "version":
        emit("version", client=a.client, **adapter(a.client).version())
        return EXIT_OK
    if a.command == "produce":
        a.idempotent = a.idempotent == "true"
        if a.acks == "-1":
            a.acks = "all"
    try:
        return COMMANDS[a.command](a)
    except Usage as exc:
        emit("error", error="usage", message=str(exc))
        return EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 - every failure is reported as an event
        emit("error", **error_fields(exc))
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
