"""Produce and consume a few records with each Python client family, given security settings.

``settings`` uses librdkafka's names (``security.protocol``, ``ssl.ca.location``,
``ssl.certificate.location``, ``ssl.key.location``, ``sasl.mechanism``, ``sasl.username``,
``sasl.password``; for OAUTHBEARER ``sasl.oauthbearer.config=principal=<name>`` with
``enable.sasl.oauthbearer.unsecure.jwt``, librdkafka's built-in unsecured JWT); each adapter
translates them to its client's own (the Python clients get a token provider that makes the same
unsecured JWT).
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import subprocess
import time
from pathlib import Path

CLIENTS = ("confluent", "kafka-python", "aiokafka")


def round_trip(client: str, bootstrap: str, topic: str, settings: dict, count: int = 5
               ) -> list[bytes]:
    values = [f"{client}-{i}".encode() for i in range(count)]
    return {"confluent": _confluent, "kafka-python": _kafka_python,
            "aiokafka": _aiokafka}[client](bootstrap, topic, settings, values)


def _confluent(bootstrap, topic, settings, values):
    from confluent_kafka import Consumer, Producer, TopicPartition

    conf = {"bootstrap.servers": bootstrap, **settings}
    producer = Producer(conf)
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(20) == 0, "records not delivered"
    consumer = Consumer({**conf, "group.id": f"g-{topic}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got, deadline = [], time.monotonic() + 20
    while len(got) < len(values) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value())
    consumer.close()
    return got


def _ssl_context(settings):
    if not settings["security.protocol"].endswith("SSL"):
        return None
    context = ssl.create_default_context(cafile=settings["ssl.ca.location"])
    if "ssl.certificate.location" in settings:
        context.load_cert_chain(settings["ssl.certificate.location"], settings["ssl.key.location"])
    return context


def _python_kwargs(settings, client):
    kwargs = {"security_protocol": settings["security.protocol"],
              "ssl_context": _ssl_context(settings)}
    if settings.get("sasl.mechanism") == "OAUTHBEARER":
        kwargs.update(sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=_token_provider(
            client, oauth_claims(settings)))
    elif "sasl.mechanism" in settings:
        kwargs.update(sasl_mechanism=settings["sasl.mechanism"],
                      sasl_plain_username=settings["sasl.username"],
                      sasl_plain_password=settings["sasl.password"])
    return kwargs


def oauth_claims(settings) -> dict:
    """The claims librdkafka's unsecured JWT carries for ``sasl.oauthbearer.config``
    (``principal=<sub> [scope=<a,b>]``)."""
    config = dict(part.split("=", 1) for part in settings["sasl.oauthbearer.config"].split())
    claims = {"sub": config["principal"]}
    if "scope" in config:
        claims["scope"] = config["scope"].split(",")
    return claims


def unsecured_jwt(claims: dict, header: dict | None = None) -> str:
    """An unsigned JWT (``alg`` none, empty signature), as Kafka's unsecured login makes."""
    encode = lambda obj: base64.urlsafe_b64encode(  # noqa: E731
        json.dumps(obj, separators=(",", ":")).encode()).rstrip(b"=").decode()
    return f"{encode(header or {'alg': 'none'})}.{encode(claims)}."


def _token_provider(client, claims):
    def token():
        now = int(time.time())
        return unsecured_jwt({**claims, "iat": now, "exp": now + 3600})

    if client == "aiokafka":
        from aiokafka.abc import AbstractTokenProvider

        class Provider(AbstractTokenProvider):
            async def token(self):
                return token()
    else:
        from kafka.net.sasl.oauth import AbstractTokenProvider

        class Provider(AbstractTokenProvider):
            def token(self):
                return token()
    return Provider()


def java_oauth_producer_perf(bootstrap: str, ca_pem: Path, workdir: Path, args: list[str],
                             props: list[str], scope: str | None = None
                             ) -> subprocess.CompletedProcess:
    """Kafka's ProducerPerformance (the reference jars) over SASL_SSL with kafka-clients' own
    OAUTHBEARER login (its unsecured JWT, subject alice, and ``scope`` as a scope claim when
    given), trusting the test CA. ``args``: the tool's; ``props``: producer properties after
    ``bootstrap.servers``."""
    from tools.kafka_ref import run_kafka

    claims = 'unsecuredLoginStringClaim_sub="alice"'
    if scope:
        claims += f' unsecuredLoginListClaim_scope=",{scope}"'
    config = Path(workdir) / "producer.properties"
    config.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\n"
        "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
        f"required {claims};\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={ca_pem}\n")
    cmd = run_kafka.java_cmd("org.apache.kafka.tools.ProducerPerformance", [
        *args, "--producer.config", str(config),
        "--producer-props", f"bootstrap.servers={bootstrap}", *props],
        run_kafka.DEFAULT_VERSION, None, heap="256M")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


def _kafka_python(bootstrap, topic, settings, values):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    kwargs = _python_kwargs(settings, "kafka-python")
    producer = KafkaProducer(bootstrap_servers=bootstrap, **kwargs)
    for value in values:
        producer.send(topic, value=value).get(timeout=20)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=10000, **kwargs)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    got = []
    for message in consumer:
        got.append(message.value)
        if len(got) == len(values):
            break
    consumer.close()
    return got


def _aiokafka(bootstrap, topic, settings, values):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    kwargs = _python_kwargs(settings, "aiokafka")

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **kwargs)
        await producer.start()
        try:
            for value in values:
                await producer.send_and_wait(topic, value)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                    auto_offset_reset="earliest", **kwargs)
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, 0)])
            await consumer.seek_to_beginning()
            got = []
            while len(got) < len(values):
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 20)
                for messages in batch.values():
                    got.extend(m.value for m in messages)
            return got
        finally:
            await consumer.stop()

    return asyncio.run(run())
