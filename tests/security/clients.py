"""Produce and consume a few records with each Python client family, given security settings.

``settings`` uses librdkafka's names (``security.protocol``, ``ssl.ca.location``,
``ssl.certificate.location``, ``ssl.key.location``, ``sasl.mechanism``, ``sasl.username``,
``sasl.password``); each adapter translates them to its client's own.
"""

from __future__ import annotations

import asyncio
import ssl
import time

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


def _python_kwargs(settings):
    kwargs = {"security_protocol": settings["security.protocol"],
              "ssl_context": _ssl_context(settings)}
    if "sasl.mechanism" in settings:
        kwargs.update(sasl_mechanism=settings["sasl.mechanism"],
                      sasl_plain_username=settings["sasl.username"],
                      sasl_plain_password=settings["sasl.password"])
    return kwargs


def _kafka_python(bootstrap, topic, settings, values):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    kwargs = _python_kwargs(settings)
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

    kwargs = _python_kwargs(settings)

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
