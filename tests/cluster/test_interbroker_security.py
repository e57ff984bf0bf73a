"""Brokers reach each other over a secured inter-broker listener, as Kafka's do: three in-process
brokers over a real ZooKeeper replicate through an ``INTERNAL`` listener that is SSL with client
authentication (mTLS), or SASL_SSL with PLAIN (the broker's credentials from the listener's JAAS
entry); a stock client (librdkafka) produces on the PLAINTEXT listener. Replication can only
happen through INTERNAL, so a record on every replica proves the secured connection works; a
broker with a wrong inter-broker password gets nothing and says why once."""

from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kbroker.testing import KafkaBroker
from kbroker.testing.certs import make_certificates
from tests.cluster.conftest import SESSION_TIMEOUT_MS, start_brokers, stop_brokers
from tests.cluster.test_replication_zk import _log_bytes, _wait_for

TIMEOUT = 30
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


@pytest.fixture
def certificates():
    directory = Path(tempfile.mkdtemp(prefix="kbroker-interbroker-"))
    yield make_certificates(directory)
    shutil.rmtree(directory, ignore_errors=True)


def _internal(protocol: str, certs, password_of=lambda broker_id: "broker-secret") -> dict:
    """Settings (per broker id) for an INTERNAL inter-broker listener of ``protocol``."""
    def settings(broker_id: int) -> dict:
        out = {"listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
               "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,INTERNAL:{protocol}",
               # Lower case, as many configs write it: listener names are case-insensitive.
               "inter.broker.listener.name": "internal",
               "listener.name.internal.ssl.keystore.type": "PEM",
               "listener.name.internal.ssl.keystore.location": str(certs.server_keystore),
               "listener.name.internal.ssl.truststore.type": "PEM",
               "listener.name.internal.ssl.truststore.location": str(certs.ca_file)}
        if protocol == "SSL":
            out["listener.name.internal.ssl.client.auth"] = "required"
        else:
            out.update({
                "sasl.mechanism.inter.broker.protocol": "PLAIN",
                "listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
                # Kafka's broker JAAS entry: its own credentials and the users it accepts.
                "listener.name.internal.plain.sasl.jaas.config":
                    f'{PLAIN_MODULE} required username="broker" '
                    f'password="{password_of(broker_id)}" user_broker="broker-secret";'})
        return out
    return settings


@pytest.fixture
def start_cluster(connect_string):
    started = {}

    def start(settings_of) -> dict[int, KafkaBroker]:
        started.update(start_brokers(connect_string, settings_of, SESSION_TIMEOUT_MS))
        return started

    yield start
    stop_brokers(started)


def _plaintext(broker) -> str:
    host, port = broker._inner.listeners["PLAINTEXT"]
    return f"{host}:{port}"


def _create(broker, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": _plaintext(broker)})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=3,
                                  config={"min.insync.replicas": "2"})])[topic].result(TIMEOUT)


def _leaders(brokers, topic: str, partitions: int):
    """{partition: leader id} once every broker hosts every partition, else None."""
    hosted = [b._inner.broker.replicas.get(topic, p) for b in brokers.values()
              for p in range(partitions)]
    if None in hosted:
        return None
    leaders = {p: brokers[1]._inner.broker.replicas.get(topic, p).leader_id
               for p in range(partitions)}
    return leaders if all(leader in brokers for leader in leaders.values()) else None


def _produce(broker, topic: str, partition: int, values, acks: str) -> None:
    producer = Producer({"bootstrap.servers": _plaintext(broker), "acks": acks,
                         "message.timeout.ms": TIMEOUT * 1000})
    failed = []
    for value in values:
        producer.produce(topic, value, partition=partition,
                         on_delivery=lambda err, msg: err and failed.append(err))
    assert producer.flush(TIMEOUT) == 0 and not failed, failed


def _log_end(broker, topic: str, partition: int) -> int:
    return broker._inner.broker.replicas.get(topic, partition).log_end_offset


@pytest.mark.parametrize("protocol", ["SSL", "SASL_PLAINTEXT", "SASL_SSL"])
def test_acks_all_writes_replicate_over_a_secured_inter_broker_listener(start_cluster,
                                                                        certificates, protocol):
    brokers = start_cluster(_internal(protocol, certificates))
    _create(brokers[1], "secured", 1)
    leader = _wait_for(lambda: _leaders(brokers, "secured", 1), "the topic on every broker")[0]
    values = [f"v-{i}".encode() for i in range(200)]
    _produce(brokers[leader], "secured", 0, values, acks="all")
    _wait_for(lambda: all(_log_end(b, "secured", 0) == 200 for b in brokers.values()),
              "every replica at the leader's end")
    logs = {node: _log_bytes(b, "secured") for node, b in brokers.items()}
    assert logs[leader] and all(data == logs[leader] for data in logs.values())


def test_a_wrong_inter_broker_password_stops_replication_with_one_clear_line(
        start_cluster, certificates, caplog):
    caplog.set_level(logging.INFO)
    wrong = 3
    brokers = start_cluster(_internal("SASL_SSL", certificates, lambda broker_id:
                                      "not-the-secret" if broker_id == wrong else "broker-secret"))
    # Three partitions spread their leaders, so broker 3 follows at least one led by 1 or 2.
    _create(brokers[1], "guarded", 3)
    leaders = _wait_for(lambda: _leaders(brokers, "guarded", 3), "the topic on every broker")
    partition, leader = next((p, l) for p, l in leaders.items() if l != wrong)
    other = next(b for b in (1, 2, 3) if b not in (leader, wrong))
    _produce(brokers[leader], "guarded", partition, [b"x"] * 20, acks="1")
    _wait_for(lambda: _log_end(brokers[other], "guarded", partition) == 20,
              "the follower with the right password to replicate")
    refusal = "SASL PLAIN authentication as broker to 127.0.0.1:"

    def refusals():
        return [r for r in caplog.records if r.name == "kbroker.replicas.fetcher"
                and refusal in r.getMessage() and f"leader {leader}:" in r.getMessage()]
    _wait_for(refusals, "broker 3's fetcher to report the refusal")
    assert _log_end(brokers[wrong], "guarded", partition) == 0
    (line,) = refusals()
    assert line.levelno == logging.WARNING and "Invalid username or password" in line.getMessage()
    assert "listener INTERNAL" in line.getMessage()
    assert "listener.name.internal.plain.sasl.jaas.config" in line.getMessage()
    assert not [r for r in caplog.records if r.name.startswith("kbroker") and r.exc_info], \
        "a refused authentication is one line, never a traceback"


@pytest.fixture
def kdc(tmp_path):
    """A throwaway MIT KDC (kbroker.testing.kdc); KRB5_CONFIG for the in-process brokers."""
    import os

    from kbroker.testing.kdc import TestKdc

    kdc = TestKdc(tmp_path / "kdc").start()
    saved = {k: os.environ.get(k) for k in kdc.env}
    os.environ.update(kdc.env)
    yield kdc
    kdc.stop()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def test_gssapi_between_brokers(start_cluster, certificates, kdc):
    """SASL_PLAINTEXT with GSSAPI between brokers: each broker logs in to the others as
    kafka/127.0.0.1 from the keytab of its listener's Krb5LoginModule entry (the acceptor's
    too), and replication works only through it."""
    keytab = kdc.keytab("kafka/127.0.0.1")
    jaas = (f'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true '
            f'storeKey=true keyTab="{keytab}" principal="kafka/127.0.0.1@{kdc.realm}";')

    def settings(broker_id: int) -> dict:
        return {"listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
                "inter.broker.listener.name": "INTERNAL",
                "sasl.mechanism.inter.broker.protocol": "GSSAPI",
                "listener.name.internal.sasl.enabled.mechanisms": "GSSAPI",
                "sasl.kerberos.service.name": "kafka",
                "listener.name.internal.gssapi.sasl.jaas.config": jaas}
    brokers = start_cluster(settings)
    _create(brokers[1], "kerberized", 1)
    leader = _wait_for(lambda: _leaders(brokers, "kerberized", 1), "the topic on every broker")[0]
    _produce(brokers[leader], "kerberized", 0, [f"v-{i}".encode() for i in range(100)],
             acks="all")
    _wait_for(lambda: all(_log_end(b, "kerberized", 0) == 100 for b in brokers.values()),
              "every replica at the leader's end")


def test_security_inter_broker_protocol_instead_of_a_listener_name(start_cluster, certificates):
    """Kafka's alternative key: security.inter.broker.protocol=SASL_SSL makes the listener named
    SASL_SSL the inter-broker listener (no inter.broker.listener.name)."""
    def settings(broker_id: int) -> dict:
        return {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
                "security.inter.broker.protocol": "SASL_SSL",
                "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certificates.server_keystore),
                "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certificates.ca_file),
                "sasl.mechanism.inter.broker.protocol": "PLAIN",
                "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_ssl.plain.sasl.jaas.config":
                    f'{PLAIN_MODULE} required username="broker" password="broker-secret" '
                    'user_broker="broker-secret";'}
    brokers = start_cluster(settings)
    assert brokers[1]._inner.broker.config.inter_broker_listener_name == "SASL_SSL"
    _create(brokers[1], "by-protocol", 1)
    leader = _wait_for(lambda: _leaders(brokers, "by-protocol", 1), "the topic on every broker")[0]
    _produce(brokers[leader], "by-protocol", 0, [b"x"] * 50, acks="all")
    _wait_for(lambda: all(_log_end(b, "by-protocol", 0) == 50 for b in brokers.values()),
              "every replica at the leader's end")
