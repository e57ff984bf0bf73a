"""Kafka's own ``kafka-configs.sh`` (``org.apache.kafka.tools.ConfigCommand``, Kafka 4.4.0 from
tools/kafka_ref) manages kbroker's client quotas: users, clients, user+client pairs and the
``<default>`` entities, added, described and deleted."""

from __future__ import annotations

import pytest

from tests.integration.clients import running_broker
from tests.security.test_kafka_tools import kafka_configs


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with running_broker(tmp_path_factory.mktemp("quota-tool") / "data") as process:
        yield process


def test_kafka_configs_round_trip(broker):
    b = broker.bootstrap
    kafka_configs("--bootstrap-server", b, "--alter", "--add-config",
                  "producer_byte_rate=1024,consumer_byte_rate=2048,request_percentage=50",
                  "--entity-type", "users", "--entity-name", "alice")
    kafka_configs("--bootstrap-server", b, "--alter", "--add-config", "producer_byte_rate=4096",
                  "--entity-type", "clients", "--entity-default")
    kafka_configs("--bootstrap-server", b, "--alter", "--add-config", "consumer_byte_rate=512",
                  "--entity-type", "users", "--entity-name", "alice",
                  "--entity-type", "clients", "--entity-name", "reporting")
    out = kafka_configs("--bootstrap-server", b, "--describe", "--entity-type", "users",
                        "--entity-name", "alice")
    assert "Quota configs for user-principal 'alice' are" in out
    for expected in ("producer_byte_rate=1024.0", "consumer_byte_rate=2048.0",
                     "request_percentage=50.0"):
        assert expected in out, out
    out = kafka_configs("--bootstrap-server", b, "--describe", "--entity-type", "clients",
                        "--entity-default")
    assert "Quota configs for the default client-id are producer_byte_rate=4096.0" in out, out
    out = kafka_configs("--bootstrap-server", b, "--describe", "--entity-type", "users",
                        "--entity-name", "alice", "--entity-type", "clients",
                        "--entity-name", "reporting")
    assert "consumer_byte_rate=512.0" in out, out
    # Every client-id entity.
    out = kafka_configs("--bootstrap-server", b, "--describe", "--entity-type", "clients")
    assert "the default client-id" in out and "reporting" not in out, out

    kafka_configs("--bootstrap-server", b, "--alter", "--delete-config",
                  "producer_byte_rate,request_percentage", "--entity-type", "users",
                  "--entity-name", "alice")
    out = kafka_configs("--bootstrap-server", b, "--describe", "--entity-type", "users",
                        "--entity-name", "alice")
    assert "consumer_byte_rate=2048.0" in out and "producer_byte_rate" not in out, out
