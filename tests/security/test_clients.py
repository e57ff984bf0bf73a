"""Real clients over real sockets on every listener type: SSL, mTLS, SASL_PLAINTEXT and SASL_SSL
with PLAIN and SCRAM-SHA-512 (credentials created through AlterUserScramCredentials)."""

from __future__ import annotations

import pytest

from tests.security.clients import CLIENTS, round_trip


def _tls(ca, **more):
    return {"ssl.ca.location": str(ca.ca_pem), **more}


@pytest.mark.parametrize("client", CLIENTS)
def test_ssl(full_broker, ca, client):
    settings = _tls(ca, **{"security.protocol": "SSL"})
    got = round_trip(client, full_broker.endpoints["SSL"], f"ssl-{client}", settings)
    assert got == [f"{client}-{i}".encode() for i in range(5)]


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("client", CLIENTS)
def test_sasl_plain(full_broker, ca, client, protocol):
    settings = {"security.protocol": protocol, "sasl.mechanism": "PLAIN",
                "sasl.username": "alice", "sasl.password": "alice-secret"}
    if protocol == "SASL_SSL":
        settings.update(_tls(ca))
    topic = f"plain-{protocol.lower()}-{client}"
    got = round_trip(client, full_broker.endpoints[protocol], topic, settings)
    assert got == [f"{client}-{i}".encode() for i in range(5)]


@pytest.fixture(scope="module")
def scram_user(full_broker):
    """carol's SCRAM-SHA-512 credential, created as kafka-configs.sh would (through the admin API
    on the PLAINTEXT listener)."""
    from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialUpsertion)

    admin = AdminClient({"bootstrap.servers": full_broker.endpoints["PLAINTEXT"]})
    futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"carol-secret")])
    for future in futures.values():
        future.result(20)
    described = admin.describe_user_scram_credentials(["carol"])["carol"].result(20)
    infos = described.scram_credential_infos
    assert [(i.mechanism, i.iterations) for i in infos] == [(ScramMechanism.SCRAM_SHA_512, 8192)]
    return "carol", "carol-secret"


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("client", CLIENTS)
def test_sasl_scram_sha_512(full_broker, ca, scram_user, client, protocol):
    user, password = scram_user
    settings = {"security.protocol": protocol, "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": user, "sasl.password": password}
    if protocol == "SASL_SSL":
        settings.update(_tls(ca))
    topic = f"scram-{protocol.lower()}-{client}"
    got = round_trip(client, full_broker.endpoints[protocol], topic, settings)
    assert got == [f"{client}-{i}".encode() for i in range(5)]


def test_mtls_required(secure_broker, ca):
    """ssl.client.auth=required with a PKCS12 key store and a PEM trust store: a client with a
    certificate from the CA gets in, one without does not; the broker keeps serving."""
    from confluent_kafka.admin import AdminClient

    broker = secure_broker({"MTLS": "SSL"}, **{
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(ca.server.keystore_p12),
        "ssl.keystore.password": "storepass", "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca.ca_pem), "ssl.client.auth": "required"})
    with_cert = _tls(ca, **{"security.protocol": "SSL",
                            "ssl.certificate.location": str(ca.client.cert_pem),
                            "ssl.key.location": str(ca.client.key_pem)})
    for client in CLIENTS:
        got = round_trip(client, broker.endpoints["MTLS"], f"mtls-{client}", with_cert)
        assert got == [f"{client}-{i}".encode() for i in range(5)]
    admin = AdminClient({"bootstrap.servers": broker.endpoints["MTLS"],
                         **_tls(ca, **{"security.protocol": "SSL"})})
    with pytest.raises(Exception):
        admin.list_topics(timeout=3)
    assert "TLS handshake failed" in broker.log() and broker.alive()


def test_inline_pem_key_store(secure_broker, ca):
    broker = secure_broker({"SSL": "SSL"}, **{
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": ca.server.cert_pem.read_text(),
        "ssl.keystore.key": ca.server.key_pem.read_text()})
    got = round_trip("confluent", broker.endpoints["SSL"], "inline",
                     _tls(ca, **{"security.protocol": "SSL"}))
    assert len(got) == 5


def test_metadata_advertises_the_listener_asked(full_broker):
    from kafka import KafkaAdminClient

    for name in ("PLAINTEXT", "SASL_PLAINTEXT"):
        kwargs = {} if name == "PLAINTEXT" else {
            "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
            "sasl_plain_username": "bob", "sasl_plain_password": "bob-secret"}
        admin = KafkaAdminClient(bootstrap_servers=full_broker.endpoints[name], **kwargs)
        (node,) = admin.describe_cluster()["brokers"]
        admin.close()
        assert f"{node['host']}:{node['port']}" == full_broker.endpoints[name]


def test_large_fetch_over_tls(full_broker, ca):
    """A fetch larger than the 1 MiB piece the TLS path reads at a time arrives whole."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    conf = {"bootstrap.servers": full_broker.endpoints["SSL"], "security.protocol": "SSL",
            "ssl.ca.location": str(ca.ca_pem)}
    producer = Producer({**conf, "linger.ms": 50})
    values = [(b"%06d" % i) * 700 for i in range(1500)]  # ~6 MB
    for value in values:
        producer.produce("large-tls", value=value)
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": "large", "fetch.max.bytes": 8 * 1024 * 1024,
                         "max.partition.fetch.bytes": 8 * 1024 * 1024})
    consumer.assign([TopicPartition("large-tls", 0, 0)])
    got = []
    while len(got) < len(values):
        message = consumer.poll(10)
        assert message is not None, f"stalled after {len(got)} records"
        assert message.error() is None, message.error()
        got.append(message.value())
    consumer.close()
    assert got == values
