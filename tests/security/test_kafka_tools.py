"""Kafka's own tools against kbroker: ``kafka-configs.sh`` (``org.apache.kafka.tools.ConfigCommand``
in Kafka 4.4.0, from tools/kafka_ref) creates and deletes SCRAM users, and the Java client
authenticates with them over SASL_SSL (PEM trust store, SCRAM-SHA-512).

``kafka-configs.sh --describe --entity-type users`` also asks DescribeClientQuotas, which kbroker
does not serve yet (quotas are not implemented), so credentials are described here through the
admin API (DescribeUserScramCredentials) instead."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "kafka_ref"))
import run_kafka  # noqa: E402  (stdlib-only launcher of the reference Kafka)

from tests.security.clients import round_trip  # noqa: E402


def kafka_configs(*args: str) -> str:
    cmd = run_kafka.java_cmd("org.apache.kafka.tools.ConfigCommand", list(args),
                             run_kafka.DEFAULT_VERSION, None, heap="256M")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_kafka_configs_manages_scram_users(full_broker, ca, tmp_path):
    plaintext = full_broker.endpoints["PLAINTEXT"]
    kafka_configs("--bootstrap-server", plaintext, "--alter", "--entity-type", "users",
                  "--entity-name", "erin", "--add-config",
                  "SCRAM-SHA-256=[iterations=8192,password=erin-secret],"
                  "SCRAM-SHA-512=[password=erin-secret]")
    client = tmp_path / "client.properties"
    client.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        "username=\"erin\" password=\"erin-secret\";\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={ca.ca_pem}\n")
    # The Java client authenticates with the new credential (alter needs only AlterUserScram...)
    kafka_configs("--bootstrap-server", full_broker.endpoints["SASL_SSL"], "--command-config",
                  str(client), "--alter", "--entity-type", "users", "--entity-name", "frank",
                  "--add-config", "SCRAM-SHA-512=[password=frank-secret]")
    assert described_credentials(plaintext, "erin") == {("SCRAM-SHA-256", 8192),
                                                        ("SCRAM-SHA-512", 4096)}
    assert described_credentials(plaintext, "frank") == {("SCRAM-SHA-512", 4096)}
    got = round_trip("confluent", full_broker.endpoints["SASL_SSL"], "erin-topic", {
        "security.protocol": "SASL_SSL", "ssl.ca.location": str(ca.ca_pem),
        "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "erin",
        "sasl.password": "erin-secret"})
    assert len(got) == 5
    kafka_configs("--bootstrap-server", plaintext, "--alter", "--entity-type", "users",
                  "--entity-name", "erin", "--delete-config", "SCRAM-SHA-256")
    assert described_credentials(plaintext, "erin") == {("SCRAM-SHA-512", 4096)}


def described_credentials(bootstrap: str, user: str) -> set:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    description = admin.describe_user_scram_credentials([user])[user].result(20)
    return {(info.mechanism.name.replace("_", "-"), info.iterations)
            for info in description.scram_credential_infos}
