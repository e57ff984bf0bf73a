"""The in-process API: KafkaBroker (sync, background loop) and AsyncKafkaBroker, real clients."""

from __future__ import annotations

import asyncio
import logging

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient

from kbroker.config import ConfigError
from kbroker.testing import AsyncKafkaBroker, KafkaBroker, running_broker


def test_sync_broker_serves_real_clients_and_cleans_up():
    with KafkaBroker({"num.partitions": 3}) as kafka:
        host, port = kafka.listeners["PLAINTEXT"]
        assert kafka.bootstrap_servers == f"{host}:{port}" and port > 0
        producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers)
        producer.send("auto", b"hello").get(timeout=30)
        producer.close()
        admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
        [topic] = admin.describe_topics(["auto"])
        admin.close()
        assert len(topic["partitions"]) == 3
        data_dir = kafka.data_dir
        assert data_dir.exists()
    assert not data_dir.exists()


def test_dev_profile_makes_the_first_group_ready_at_once():
    with running_broker() as kafka:
        assert kafka.broker.config.get("group.initial.rebalance.delay.ms") == 0
        assert kafka.broker.config.get("offsets.topic.num.partitions") == 1
        producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers)
        producer.send("t", b"v").get(timeout=30)
        producer.close()
        consumer = KafkaConsumer("t", bootstrap_servers=kafka.bootstrap_servers, group_id="g",
                                 auto_offset_reset="earliest", consumer_timeout_ms=15000)
        assert next(iter(consumer)).value == b"v"
        consumer.close()


def test_explicit_settings_win_over_the_dev_profile():
    with KafkaBroker({"group.initial.rebalance.delay.ms": 100}) as kafka:
        assert kafka.broker.config.get("group.initial.rebalance.delay.ms") == 100


def test_kept_data_dir_survives(tmp_path):
    with KafkaBroker(data_dir=tmp_path / "data") as kafka:
        KafkaProducer(bootstrap_servers=kafka.bootstrap_servers).send("t", b"v").get(timeout=30)
    assert any((tmp_path / "data").glob("t-0/*.log"))


def test_unknown_setting_warns_with_the_closest_name(caplog):
    caplog.set_level(logging.WARNING, "kbroker.config")
    with KafkaBroker({"num.partitons": 2}):
        pass
    assert "unknown broker setting 'num.partitons' is ignored (did you mean 'num.partitions'?)" \
        in caplog.text


def test_bad_setting_value_is_refused_naming_it():
    with pytest.raises(ConfigError, match="num.partitions"):
        KafkaBroker({"num.partitions": "zero"}).start()


def test_async_broker_with_aiokafka():
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def scenario():
        async with AsyncKafkaBroker() as kafka:
            producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap_servers)
            await producer.start()
            await producer.send_and_wait("t", b"async")
            await producer.stop()
            consumer = AIOKafkaConsumer("t", bootstrap_servers=kafka.bootstrap_servers,
                                        auto_offset_reset="earliest")
            await consumer.start()
            record = await asyncio.wait_for(consumer.getone(), 30)
            await consumer.stop()
            return record.value, kafka.port, kafka.broker.port()

    value, port, broker_port = asyncio.run(scenario())
    assert value == b"async" and port == broker_port
