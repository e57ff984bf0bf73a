"""Secured test brokers: the plugin's ``kafka_secure_broker`` and ``kafka_security`` marker run by
a sample project (real confluent-kafka and kafka-python clients on every listener kind, wrong
passwords refused), the in-process ``KafkaBroker(security=...)`` with aiokafka, and the Java
``.properties`` text used by Apache Kafka's own tool."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from kbroker.testing import KafkaBroker
from kbroker.testing.security import BrokerSecurity
from tests.testing.test_plugin import outcome, run_sample

ROOT = Path(__file__).resolve().parents[2]
SECURE_PROJECT = Path(__file__).parent / "secure_project"


@pytest.mark.parametrize("mode", ["inprocess", "subprocess"])
def test_secure_sample_project_passes(tmp_path, mode):
    code, output = run_sample(tmp_path, f"--kafka-broker-mode={mode}", project=SECURE_PROJECT)
    assert code == 0, output
    assert outcome(output) == {"passed": 16}, output


def test_certificates_are_removed_with_the_broker():
    with KafkaBroker(security={"listeners": ["SSL"]}) as kafka:
        ca = Path(kafka.security.ca_file)
        assert ca.exists()
    assert not ca.parent.exists()


async def _aiokafka_round_trip(config: dict, topic: str) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    producer = AIOKafkaProducer(**config)
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"v1")
        await producer.send_and_wait(topic, b"v2")
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(**config, enable_auto_commit=False)
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        got = []
        while len(got) < 2:
            got += [r.value for r in (await consumer.getmany(tp, timeout_ms=10000)).get(tp, [])]
        return got
    finally:
        await consumer.stop()


def test_inprocess_context_manager_takes_the_security_options():
    security = {"listeners": ["SASL_SSL", "MTLS"], "mechanisms": ["SCRAM-SHA-512"],
                "users": {"dave": "dave-pw"}}
    with KafkaBroker(security=security) as kafka:
        assert sorted(kafka.security.bootstrap_servers) == ["MTLS", "PLAINTEXT", "SASL_SSL"]
        assert kafka.bootstrap_servers == kafka.security.bootstrap_servers["PLAINTEXT"]
        for listener, topic in (("SASL_SSL", "over-scram"), ("MTLS", "over-mtls")):
            config = kafka.security.client(listener).aiokafka_config
            assert asyncio.run(_aiokafka_round_trip(config, topic)) == [b"v1", b"v2"]


def _kafka_topics(properties: Path, *args: str) -> subprocess.CompletedProcess:
    sys.path.insert(0, str(ROOT / "tools" / "kafka_ref"))
    import run_kafka

    cmd = run_kafka.java_cmd("org.apache.kafka.tools.TopicCommand",
                             ["--command-config", str(properties), *args],
                             run_kafka.DEFAULT_VERSION, None, heap="256M")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_java_properties_work_with_kafkas_own_tool(tmp_path):
    """Kafka 4.4.0's kafka-topics.sh (the Java admin client) with the .properties text."""
    with KafkaBroker(security={"listeners": ["SASL_SSL", "MTLS"], "mechanisms": ["SCRAM-SHA-512"]}) as kafka:
        for listener in ("SASL_SSL", "MTLS"):
            client = kafka.security.client(listener)
            properties = tmp_path / f"{listener}.properties"
            properties.write_text(client.java_properties)
            done = _kafka_topics(properties, "--bootstrap-server", client.bootstrap_servers,
                                 "--create", "--topic", f"java-{listener.lower()}")
            assert done.returncode == 0, done.stdout + done.stderr
        wrong = kafka.security.client("SASL_SSL", password="wrong")
        properties = tmp_path / "wrong.properties"
        properties.write_text(wrong.java_properties)
        done = _kafka_topics(properties, "--bootstrap-server", wrong.bootstrap_servers, "--list")
        assert done.returncode != 0
        assert "Authentication failed" in done.stdout + done.stderr, done.stdout + done.stderr
        from kbroker.testing import KafkaHelpers

        helpers = KafkaHelpers(kafka.bootstrap_servers)
        try:
            assert {"java-sasl_ssl", "java-mtls"} <= set(helpers.admin.list_topics())
        finally:
            helpers.close()


def test_settings_that_move_the_listeners_are_refused():
    with pytest.raises(ValueError, match="leave 'listeners' out of its settings"):
        KafkaBroker({"listeners": "PLAINTEXT://127.0.0.1:0"}, security=True).start()


@pytest.mark.parametrize("options,message", [
    ({"listeners": ["TLS"]}, "secured listener 'TLS': expected one of SSL, MTLS"),
    ({"mechanisms": ["GSSAPI"]}, "SASL mechanism 'GSSAPI'"),
    ({"listeners": ["SASL_SSL"], "mechanisms": []}, "a SASL listener needs at least one"),
    ({"users": {'a"b': "x"}}, "user name 'a\"b'"),
])
def test_bad_security_options_name_the_problem(options, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        BrokerSecurity(**options)
