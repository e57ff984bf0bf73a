"""Kafka's own ``kafka-acls.sh`` (``org.apache.kafka.tools.AclCommand``, from tools/kafka_ref)
adds, lists and removes kbroker's ACLs, as a super user over SASL PLAIN; the ACLs it adds take
effect for a confluent-kafka producer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from confluent_kafka import KafkaError

from tests.security.test_acls import produce_error, create_topic

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "kafka_ref"))
import run_kafka  # noqa: E402  (stdlib-only launcher of the reference Kafka)

from tests.security.test_acls import acl_broker  # noqa: E402,F401  (the module's broker)


def kafka_tool(main: str, broker, tmp_path, *args: str, user: str) -> tuple[int, str]:
    """Kafka's command-line tool ``main`` against the broker's SASL_PLAINTEXT listener as
    ``user`` (PLAIN, password ``<user>-secret``): its exit code and output."""
    client = tmp_path / f"{user}.properties"
    client.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f"username=\"{user}\" password=\"{user}-secret\";\n")
    cmd = run_kafka.java_cmd(main, ["--bootstrap-server", broker.endpoints["SASL_PLAINTEXT"],
                                    "--command-config", str(client), *args],
                             run_kafka.DEFAULT_VERSION, None, heap="256M")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout + done.stderr


def kafka_acls(broker, tmp_path, *args: str, user: str = "admin", ok: bool = True) -> str:
    code, output = kafka_tool("org.apache.kafka.tools.AclCommand", broker, tmp_path, *args,
                              user=user)
    if ok:
        assert code == 0, output
    return output


def test_kafka_acls_add_list_remove(acl_broker, tmp_path):  # noqa: F811
    topic = "tool-topic"
    create_topic(acl_broker, topic)
    assert produce_error(acl_broker, "bob", topic) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    kafka_acls(acl_broker, tmp_path, "--add", "--allow-principal", "User:bob", "--producer",
               "--topic", topic)
    listed = kafka_acls(acl_broker, tmp_path, "--list", "--topic", topic)
    assert "User:bob" in listed and "WRITE" in listed and "CREATE" in listed, listed
    assert produce_error(acl_broker, "bob", topic) is None
    kafka_acls(acl_broker, tmp_path, "--remove", "--force", "--allow-principal", "User:bob",
               "--producer", "--topic", topic)
    assert "User:bob" not in kafka_acls(acl_broker, tmp_path, "--list", "--topic", topic)
    assert produce_error(acl_broker, "bob", topic) == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_kafka_acls_list_needs_describe_on_the_cluster(acl_broker, tmp_path):  # noqa: F811
    out = kafka_acls(acl_broker, tmp_path, "--list", user="alice", ok=False)
    assert "ClusterAuthorizationException" in out, out
