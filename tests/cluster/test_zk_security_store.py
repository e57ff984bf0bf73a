"""SCRAM credentials and ACLs in ZooKeeper, followed live by every broker of a cluster.

Three in-process brokers over a real ZooKeeper, each with a PLAINTEXT listener (inter-broker
traffic and the admin: its principal, User:ANONYMOUS, is a super user, as a Kafka cluster with
plaintext inter-broker traffic needs) and a SASL_PLAINTEXT listener with SCRAM-SHA-256 for the
users under test, and Kafka's authorizer on. A credential written through one broker works on
another, and stops working there once deleted; an ACL written through one broker is enforced on
another; the znodes hold exactly what Kafka 3.x's ZooKeeper mode writes (read with kazoo)."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                   AdminClient, NewTopic, ResourcePatternType, ResourceType,
                                   ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialDeletion, UserScramCredentialUpsertion)

from kbroker.metadata.delta import MetadataDelta
from kbroker.metadata.zk import znodes as zn
from kbroker.metadata.zk.store import ZkMetadataStore
from kbroker.protocol.errors import Errors

from tests.cluster.conftest import start_brokers, stop_brokers, wait_for
from tests.security.test_quotas_api import alter as alter_quotas
from tests.security.test_quotas_api import describe as describe_quotas

TIMEOUT = 30
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"  # the ZooKeeper-mode name: an alias
CREDENTIAL = re.compile(r"salt=[A-Za-z0-9+/=]+,stored_key=[A-Za-z0-9+/=]+,"
                        r"server_key=[A-Za-z0-9+/=]+,iterations=4096")


def _wait_for(condition, what, timeout=TIMEOUT):
    return wait_for(condition, what, timeout)


@pytest.fixture
def cluster(connect_string):
    brokers = start_brokers(connect_string, lambda broker_id: {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "authorizer.class.name": AUTHORIZER, "super.users": "User:ANONYMOUS"})
    yield brokers
    stop_brokers(brokers)


def _address(broker, listener):
    host, port = broker.listeners[listener]
    return f"{host}:{port}"


def _admin(broker):
    return AdminClient({"bootstrap.servers": _address(broker, "PLAINTEXT")})


def _user_conf(broker, user, password):
    return {"bootstrap.servers": _address(broker, "SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": user, "sasl.password": password}


def _set_password(broker, user, password):
    admin = _admin(broker)
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    futures = admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(user, info, password.encode())])
    futures[user].result(TIMEOUT)


def _delete_password(broker, user):
    admin = _admin(broker)
    futures = admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)])
    futures[user].result(TIMEOUT)


def _logs_in(broker, user, password) -> bool:
    """Whether a SCRAM login on ``broker``'s SASL listener succeeds (one Metadata round trip)."""
    admin = AdminClient(_user_conf(broker, user, password))
    try:
        admin.list_topics(timeout=5)
        return True
    except KafkaException as exc:
        error = exc.args[0]
        # A refused login is _AUTHENTICATION (librdkafka's local code for the broker's
        # SASL_AUTHENTICATION_FAILED); anything else is not what this test is about.
        assert error.code() in (KafkaError._AUTHENTICATION, KafkaError._TRANSPORT,
                                KafkaError._TIMED_OUT), error
        return False


def _json(zk, path):
    data, _ = zk.get(path)
    return json.loads(data)


def _notifications(zk, parent):
    return [zk.get(f"{parent}/{child}")[0] for child in sorted(zk.get_children(parent))]


def test_a_scram_user_made_on_one_broker_logs_in_on_another_until_deleted(cluster, clients):
    zk = clients()
    _set_password(cluster[1], "carol", "carol-secret")
    # ScramCredentialUtils' string in the user's ConfigEntityZNode, and a version 2 change
    # notification naming the entity, as Kafka's ZooKeeper mode writes them.
    stored = _json(zk, "/config/users/carol")
    assert stored["version"] == 1 and list(stored["config"]) == ["SCRAM-SHA-256"]
    assert CREDENTIAL.fullmatch(stored["config"]["SCRAM-SHA-256"])
    assert {"version": 2, "entity_path": "users/carol"} in [
        json.loads(n) for n in _notifications(zk, zn.CONFIG_CHANGES)]

    _wait_for(lambda: _logs_in(cluster[3], "carol", "carol-secret"), "carol's login on broker 3")
    assert not _logs_in(cluster[3], "carol", "wrong-secret")

    # A quota set through broker 2 joins the credential in the same znode (neither loses the
    # other), and broker 3 follows it too.
    assert alter_quotas(_address(cluster[2], "PLAINTEXT"),
                        [({"user": "carol"}, {"producer_byte_rate": 1024.0})]) == [
        ({"user": "carol"}, 0, None)]
    assert set(_json(zk, "/config/users/carol")["config"]) == {"SCRAM-SHA-256",
                                                                "producer_byte_rate"}
    _wait_for(lambda: describe_quotas(_address(cluster[3], "PLAINTEXT"),
                                      [("user", 0, "carol")]) == {
        frozenset({("user", "carol")}): {"producer_byte_rate": 1024.0}},
        "broker 3 to describe carol's quota")

    _delete_password(cluster[1], "carol")
    assert _json(zk, "/config/users/carol") == {"version": 1,
                                                "config": {"producer_byte_rate": "1024"}}
    _wait_for(lambda: not _logs_in(cluster[3], "carol", "carol-secret"),
              "broker 3 to refuse carol once deleted")


def _produce_error(broker, user, password, topic):
    """None if one record is delivered through ``broker``'s SASL listener, else the error code."""
    errors = []
    producer = Producer({**_user_conf(broker, user, password), "message.timeout.ms": 10000,
                         "retries": 0})
    producer.produce(topic, b"v", callback=lambda err, msg: errors.append(err))
    producer.flush(20)
    assert errors, "no delivery report"
    return None if errors[0] is None else errors[0].code()


def test_an_acl_made_on_one_broker_is_enforced_on_another(cluster, clients):
    zk = clients()
    admin = _admin(cluster[2])
    # Broker 1 leads the only partition: alice's produce is decided there.
    admin.create_topics([NewTopic("orders", 1, replica_assignment=[[1, 2, 3]])])["orders"].result(
        TIMEOUT)
    _set_password(cluster[2], "alice", "alice-secret")
    _wait_for(lambda: _logs_in(cluster[1], "alice", "alice-secret"), "alice's login on broker 1")
    assert _produce_error(cluster[1], "alice", "alice-secret", "orders") \
        == KafkaError.TOPIC_AUTHORIZATION_FAILED

    write = AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice",
                       "*", AclOperation.WRITE, AclPermissionType.ALLOW)
    describe = AclBinding(ResourceType.TOPIC, "ord", ResourcePatternType.PREFIXED, "User:alice",
                          "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)
    for future in admin.create_acls([write, describe]).values():
        future.result(TIMEOUT)
    # Kafka's ZkAclStore: literal and prefixed patterns in their own trees, resource types and
    # operations in Pascal case; change notifications as AclAuthorizer writes them.
    assert _json(zk, "/kafka-acl/Topic/orders") == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Write",
         "host": "*"}]}
    assert _json(zk, "/kafka-acl-extended/prefixed/Topic/ord") == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Describe",
         "host": "*"}]}
    assert _notifications(zk, zn.ACL_CHANGES) == [b"TOPIC:orders"]
    assert [json.loads(n) for n in _notifications(zk, zn.EXTENDED_ACL_CHANGES)] == [
        {"version": 1, "resourceType": "TOPIC", "name": "ord", "patternType": "PREFIXED"}]

    _wait_for(lambda: _produce_error(cluster[1], "alice", "alice-secret", "orders") is None,
              "broker 1 to allow alice's write")
    # Every broker describes the same ACLs.
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    third = _admin(cluster[3])  # kept referenced: its futures die with it
    _wait_for(lambda: len(third.describe_acls(everything).result(TIMEOUT)) == 2,
              "broker 3 to describe both ACLs")

    # Deleting through a third broker removes the znode (Kafka deletes a resource's znode when
    # its last ACL goes) and broker 1 denies again.
    filters = [AclBindingFilter(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, None,
                                None, AclOperation.ANY, AclPermissionType.ANY)]
    for future in third.delete_acls(filters).values():
        assert len(future.result(TIMEOUT)) == 1
    assert zk.exists("/kafka-acl/Topic/orders") is None
    assert _notifications(zk, zn.ACL_CHANGES) == [b"TOPIC:orders", b"TOPIC:orders"]
    _wait_for(lambda: _produce_error(cluster[1], "alice", "alice-secret", "orders")
              == KafkaError.TOPIC_AUTHORIZATION_FAILED, "broker 1 to deny alice's write again")


def test_one_acl_that_cannot_be_stored_fails_alone(cluster, clients):
    """CreateAcls answers per creation, as Kafka's AclAuthorizer (one ZooKeeper update per
    resource): a name ZooKeeper cannot hold and a resource whose znode cannot be updated fail,
    with their own errors; the others in the same request are stored and described."""
    zk = clients()
    zk.ensure_path("/kafka-acl/Group")
    zk.create("/kafka-acl/Group/garbled", b"[garbled")  # written by hand, badly
    admin = _admin(cluster[2])

    def allow(resource_type, name, pattern=ResourcePatternType.LITERAL):
        return AclBinding(resource_type, name, pattern, "User:alice", "*", AclOperation.READ,
                          AclPermissionType.ALLOW)

    orders, slash = allow(ResourceType.TOPIC, "orders"), allow(ResourceType.TOPIC, "a/b")
    broken = allow(ResourceType.GROUP, "garbled")
    prefix = allow(ResourceType.GROUP, "app-", ResourcePatternType.PREFIXED)
    futures = admin.create_acls([orders, slash, broken, prefix])
    futures[orders].result(TIMEOUT)
    futures[prefix].result(TIMEOUT)
    with pytest.raises(KafkaException) as refused:
        futures[slash].result(TIMEOUT)
    assert refused.value.args[0].code() == KafkaError.INVALID_REQUEST
    assert "a/b" in refused.value.args[0].str()
    with pytest.raises(KafkaException) as failed:
        futures[broken].result(TIMEOUT)
    assert failed.value.args[0].code() == KafkaError.UNKNOWN  # UNKNOWN_SERVER_ERROR
    assert "/kafka-acl/Group/garbled" in failed.value.args[0].str()
    assert zk.get("/kafka-acl/Group/garbled")[0] == b"[garbled"  # left as it was

    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    for broker_id in (2, 3):
        other = _admin(cluster[broker_id])  # kept referenced: its futures die with it
        _wait_for(lambda: {(b.restype, b.name) for b in other.describe_acls(
            everything).result(TIMEOUT)} == {(ResourceType.TOPIC, "orders"),
                                             (ResourceType.GROUP, "app-")},
            f"broker {broker_id} to describe exactly the two stored ACLs")


# --- Kafka 3.9's own tools, writing and reading the same znodes directly -------------------------

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "kafka_ref"))
import zk_cluster  # noqa: E402  (Kafka 3.9's jars, installed by scripts/install-test-deps.sh)


def _kafka_tool(main_class, *args) -> str:
    done = subprocess.run(["java", "-Xmx256M", "-cp", zk_cluster.classpath(), main_class, *args],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_kafkas_zookeeper_tools_and_kbroker_share_users_and_acls(cluster, connect_string):
    """Kafka 3.9's ``kafka-configs.sh --zookeeper`` and ``kafka-acls.sh --authorizer-properties
    zookeeper.connect=...`` write ZooKeeper directly: kbroker's brokers follow their writes, and
    the tools read kbroker's."""
    admin = _admin(cluster[1])
    admin.create_topics([NewTopic("orders", 1, replica_assignment=[[1, 2, 3]])])["orders"].result(
        TIMEOUT)
    _kafka_tool("kafka.admin.ConfigCommand", "--zookeeper", connect_string, "--alter",
                "--add-config", "SCRAM-SHA-256=[password=bob-secret]", "--entity-type", "users",
                "--entity-name", "bob")
    _wait_for(lambda: _logs_in(cluster[2], "bob", "bob-secret"), "bob's login on broker 2")
    _kafka_tool("kafka.admin.AclCommand", "--authorizer-properties",
                f"zookeeper.connect={connect_string}", "--add", "--allow-principal", "User:bob",
                "--operation", "Write", "--topic", "orders")
    _wait_for(lambda: _produce_error(cluster[1], "bob", "bob-secret", "orders") is None,
              "broker 1 to allow bob's write")
    group = AclBinding(ResourceType.GROUP, "app-", ResourcePatternType.PREFIXED, "User:bob",
                       "*", AclOperation.READ, AclPermissionType.ALLOW)
    for future in admin.create_acls([group]).values():
        future.result(TIMEOUT)
    listed = _kafka_tool("kafka.admin.AclCommand", "--authorizer-properties",
                         f"zookeeper.connect={connect_string}", "--list")
    assert "name=app-, patternType=PREFIXED" in listed
    assert "(principal=User:bob, host=*, operation=READ, permissionType=ALLOW)" in listed
    assert "(principal=User:bob, host=*, operation=WRITE, permissionType=ALLOW)" in listed


# --- the store alone ------------------------------------------------------------------------------

ALICE_READ = (2, "orders", 3, "User:alice", "*", 3, 3)     # topic, literal, read, allow
BOB_DENY = (2, "orders", 3, "User:bob", "10.0.0.1", 4, 2)  # topic, literal, write, deny
GROUP_PREFIX = (3, "app-", 4, "User:alice", "*", 2, 3)     # group, prefixed, all, allow


def _store(clients, node_id):
    return asyncio.run(ZkMetadataStore.open(clients(), node_id))


def _acls(store, added=(), removed=()):
    """The ACLs the store refused (a delta of ACLs committed)."""
    commit = asyncio.run(store.commit(MetadataDelta(acls_added=tuple(added),
                                                    acls_removed=tuple(removed))))
    return dict(commit.refused)


def _loaded(clients):
    return asyncio.run(_store(clients, 3).load())


def test_acl_writes_are_deltas_on_what_zookeeper_holds(clients):
    one, two = _store(clients, 1), _store(clients, 2)
    _acls(one, [ALICE_READ, GROUP_PREFIX])
    # Broker 2 never saw broker 1's write: its change adds to it, never replaces it.
    _acls(two, [BOB_DENY])
    assert sorted(_loaded(clients).acls) == sorted([ALICE_READ, BOB_DENY, GROUP_PREFIX])
    zk = clients()
    assert _json(zk, "/kafka-acl/Topic/orders")["acls"] == [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
        {"principal": "User:bob", "permissionType": "Deny", "operation": "Write",
         "host": "10.0.0.1"}]
    assert _json(zk, "/kafka-acl-extended/prefixed/Group/app-")["acls"] == [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "All", "host": "*"}]
    _acls(one, removed=[ALICE_READ, GROUP_PREFIX])
    assert list(_loaded(clients).acls) == [BOB_DENY]
    assert zk.exists("/kafka-acl-extended/prefixed/Group/app-") is None
    # A name ZooKeeper cannot hold as one znode is refused, naming it; the other resource in
    # the same change is written (Kafka's AclAuthorizer writes one resource at a time).
    bad = (3, "a/b", 3, "User:alice", "*", 3, 3)
    failures = _acls(one, [bad, GROUP_PREFIX])
    assert list(failures) == [bad]
    assert failures[bad].code == Errors.INVALID_REQUEST.code and "a/b" in failures[bad].message
    assert sorted(_loaded(clients).acls) == [BOB_DENY, GROUP_PREFIX]


def test_scram_writes_keep_quota_keys_and_sanitize_the_user(clients):
    store = _store(clients, 1)
    user = (("user", "dave@example.com"),)
    asyncio.run(store.commit(MetadataDelta(client_quotas={user: {"producer_byte_rate": 1024.0}})))
    asyncio.run(store.commit(MetadataDelta(scram={("dave@example.com", "SCRAM-SHA-512"):
                                                  "salt=a"})))
    zk = clients()
    assert _json(zk, "/config/users/dave%40example.com")["config"] == {
        "producer_byte_rate": "1024", "SCRAM-SHA-512": "salt=a"}
    image = asyncio.run(_store(clients, 2).load())
    assert image.scram_credential("dave@example.com", "SCRAM-SHA-512") == "salt=a"
    asyncio.run(store.commit(MetadataDelta(scram={("dave@example.com", "SCRAM-SHA-512"): None})))
    assert _json(zk, "/config/users/dave%40example.com")["config"] == {
        "producer_byte_rate": "1024"}
    changes = [json.loads(n)["entity_path"] for n in _notifications(zk, zn.CONFIG_CHANGES)]
    assert changes == ["users/dave%40example.com"] * 3


def test_a_write_that_loses_the_race_reads_again_and_keeps_the_winners_acl(clients):
    store = _store(clients, 1)
    _acls(store, [ALICE_READ])
    zk, rival = store._zk, clients()
    reads = []
    original_get = zk.get_async

    def get_then_rival_writes(path, *args, **kwargs):
        # The first read of the resource znode is followed at once by another broker's write to
        # it, so this store's conditional write names a version that is gone.
        result = original_get(path, *args, **kwargs)
        if path == "/kafka-acl/Topic/orders" and not reads:
            data, stat = result.get()
            reads.append(path)
            entries = zn.decode_acls(data) + [BOB_DENY[3:]]
            rival.set(path, zn.encode_acls(entries), stat.version)
        return result

    zk.get_async = get_then_rival_writes
    try:
        assert _acls(store, [(2, "orders", 3, "User:carol", "*", 3, 3)]) == {}
    finally:
        zk.get_async = original_get
    assert reads
    principals = [a["principal"] for a in _json(clients(), "/kafka-acl/Topic/orders")["acls"]]
    assert sorted(principals) == ["User:alice", "User:bob", "User:carol"]


def test_an_unreadable_acl_znode_is_skipped_and_reported_once(clients, caplog):
    store = _store(clients, 1)
    _acls(store, [ALICE_READ])
    zk = clients()
    zk.ensure_path("/kafka-acl/Group")
    zk.create("/kafka-acl/Group/broken", b"{not json")
    with caplog.at_level("WARNING", logger="kbroker.metadata.zk"):
        for _ in range(3):
            assert list(asyncio.run(store.load()).acls) == [ALICE_READ]
    reports = [r for r in caplog.records if "/kafka-acl/Group/broken" in r.getMessage()]
    assert len(reports) == 1 and "unreadable ACLs" in reports[0].getMessage()


def test_an_acl_change_notification_reads_only_its_resource(clients):
    """What a broker's sync does on an ACL change notification: read the one resource it
    names, as a delta against the image."""
    from kbroker.metadata.image import MetadataImage
    from kbroker.metadata.zk import security

    store = _store(clients, 1)
    _acls(store, [ALICE_READ, GROUP_PREFIX])
    image = MetadataImage.build("c", acls=[ALICE_READ, GROUP_PREFIX])
    _acls(store, [BOB_DENY], [ALICE_READ])
    zk = clients()
    notes = sorted(zk.get_children(zn.ACL_CHANGES))
    resource = security.acl_change_resource(zn.ACL_CHANGES,
                                            zk.get(f"{zn.ACL_CHANGES}/{notes[-1]}")[0])
    assert resource == (2, zn.LITERAL, "orders")
    delta = asyncio.run(security.read_acl_resource(zk, image, *resource))
    assert delta.acls_added == (BOB_DENY,) and delta.acls_removed == (ALICE_READ,)
    assert sorted(image.apply(delta).acls) == sorted([BOB_DENY, GROUP_PREFIX])
