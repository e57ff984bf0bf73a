"""``kbroker acl`` and ``kbroker user`` against kbroker (with its ACL authorizer) and once against
Apache Kafka 4.4.0 (tools/kafka_ref); a created SCRAM user then authenticates a real client."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kbroker.testing import KafkaBroker
from tests.cli.command import run_kbroker

ROOT = Path(__file__).resolve().parents[2]
AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:ANONYMOUS"}  # the PLAINTEXT listener's admin


def kbroker(brokers: str, *args) -> subprocess.CompletedProcess:
    return run_kbroker(*args, "--brokers", brokers)


def rows(done: subprocess.CompletedProcess) -> list[list[str]]:
    assert done.returncode == 0, done.stderr
    return [line.split() for line in done.stdout.strip().splitlines()[1:]]


def acl_lifecycle(brokers: str) -> None:
    created = rows(kbroker(brokers, "acl", "create", "--allow-principal", "User:alice",
                           "--operation", "read,describe", "--topic", "orders"))
    assert created == [["User:alice", "*", "TOPIC", "orders", "LITERAL", "READ", "ALLOW", "OK"],
                       ["User:alice", "*", "TOPIC", "orders", "LITERAL", "DESCRIBE", "ALLOW", "OK"]]
    rows(kbroker(brokers, "acl", "create", "--deny-principal", "User:eve", "--operation", "write",
                 "--topic", "logs-", "--resource-pattern-type", "prefixed"))
    rows(kbroker(brokers, "acl", "create", "--allow-principal", "User:app", "--operation", "read",
                 "--group", "app", "--cluster", "--operation", "describe"))
    everything = rows(kbroker(brokers, "acl", "list"))
    assert len(everything) == 7, everything
    assert rows(kbroker(brokers, "acl", "list", "--topic", "orders")) == [
        ["User:alice", "*", "TOPIC", "orders", "LITERAL", "DESCRIBE", "ALLOW"],
        ["User:alice", "*", "TOPIC", "orders", "LITERAL", "READ", "ALLOW"]]
    assert rows(kbroker(brokers, "acl", "list", "--deny-principal", "User:eve")) == [
        ["User:eve", "*", "TOPIC", "logs-", "PREFIXED", "WRITE", "DENY"]]
    deleted = rows(kbroker(brokers, "acl", "delete", "--allow-principal", "User:app"))
    assert {(r[2], r[5], r[-1]) for r in deleted} == {("GROUP", "READ", "DELETED"),
                                                        ("GROUP", "DESCRIBE", "DELETED"),
                                                        ("CLUSTER", "READ", "DELETED"),
                                                        ("CLUSTER", "DESCRIBE", "DELETED")}
    assert len(rows(kbroker(brokers, "acl", "list"))) == 3


def user_lifecycle(brokers: str) -> None:
    assert rows(kbroker(brokers, "user", "create", "carol", "-p", "carol-pw")) == [["carol", "OK"]]
    rows(kbroker(brokers, "user", "create", "carol", "-p", "carol-pw", "--mechanism", "SCRAM-SHA-512"))
    assert ["carol", "SCRAM-SHA-256,SCRAM-SHA-512"] in rows(kbroker(brokers, "user", "list"))
    rows(kbroker(brokers, "user", "delete", "carol", "--mechanism", "scram-sha-256"))
    assert ["carol", "SCRAM-SHA-512"] in rows(kbroker(brokers, "user", "list"))
    rows(kbroker(brokers, "user", "delete", "carol"))
    assert "carol" not in kbroker(brokers, "user", "list").stdout
    done = kbroker(brokers, "user", "delete", "carol")
    assert (done.returncode, done.stderr.strip()) == (
        1, "kbroker: RESOURCE_NOT_FOUND: user carol has no SCRAM credentials")


@pytest.fixture(scope="module")
def secured():
    with KafkaBroker(AUTHORIZER, security={"listeners": ["SASL_PLAINTEXT"],
                                           "mechanisms": ["SCRAM-SHA-256", "SCRAM-SHA-512"],
                                           "users": {"admin": "admin-pw"}}) as kafka:
        yield kafka


def test_acl_lifecycle_on_kbroker(secured):
    acl_lifecycle(secured.bootstrap_servers)


def test_user_lifecycle_on_kbroker(secured):
    user_lifecycle(secured.bootstrap_servers)


def test_a_created_user_authenticates_and_its_acls_apply(secured):
    from confluent_kafka.admin import AdminClient

    brokers = secured.bootstrap_servers
    rows(kbroker(brokers, "user", "create", "dan", "-p", "dan-pw", "--mechanism", "SCRAM-SHA-512"))
    rows(kbroker(brokers, "topic", "create", "dans", "--brokers", brokers))
    client = secured.security.client("SASL_PLAINTEXT", "SCRAM-SHA-512", user="dan", password="dan-pw")
    admin = AdminClient(client.librdkafka_config)
    assert "dans" not in admin.list_topics(timeout=20).topics  # no DESCRIBE yet: not listed
    rows(kbroker(brokers, "acl", "create", "--allow-principal", "User:dan", "--operation", "describe",
                 "--topic", "dans"))
    assert "dans" in admin.list_topics(timeout=20).topics


@pytest.mark.parametrize("args,message", [
    (["acl", "create", "--allow-principal", "User:a", "--operation", "raed", "--topic", "t"],
     "kbroker: --operation: unknown operation 'raed' (did you mean 'read'?)"),
    (["acl", "create", "--allow-principal", "alice", "--operation", "read", "--topic", "t"],
     "kbroker: principal 'alice': expected TYPE:NAME, e.g. User:alice"),
    (["acl", "create", "--allow-principal", "User:a", "--operation", "read"],
     "kbroker: name a resource: --topic, --group, --transactional-id or --cluster"),
    (["acl", "delete"], "kbroker: name what to delete: a principal or a resource (kbroker acl list "
                        "shows them)"),
    (["user", "create", "x", "-p", "y", "--mechanism", "SCRAM-SHA-521"],
     "kbroker: --mechanism SCRAM-SHA-521: expected SCRAM-SHA-256 or SCRAM-SHA-512 "
     "(did you mean 'SCRAM-SHA-512'?)"),
])
def test_bad_input_is_one_line(secured, args, message):
    done = kbroker(secured.bootstrap_servers, *args)
    assert (done.returncode, done.stderr.strip()) == (2, message)


def test_acls_without_an_authorizer_say_so():
    with KafkaBroker() as kafka:
        done = kbroker(kafka.bootstrap_servers, "acl", "list")
    assert done.returncode == 1
    assert done.stderr.startswith("kbroker: SECURITY_DISABLED") and len(done.stderr.splitlines()) == 1


def test_against_apache_kafka(tmp_path):
    sys.path.insert(0, str(ROOT / "tools" / "kafka_ref"))
    import run_kafka

    handle = run_kafka.start_kafka(port=run_kafka.free_port(), data_dir=str(tmp_path / "kafka"),
                                   heap="512M", extra_props=AUTHORIZER)
    try:
        acl_lifecycle(handle.bootstrap)
        user_lifecycle(handle.bootstrap)
    finally:
        handle.stop()
