"""The inter-broker client's security: SASL client state machines against kbroker's servers,
inter-broker settings read as Kafka's brokers read them, and BrokerClient over real sockets to a
broker with TLS, mTLS and SASL_SSL (PLAIN and SCRAM) listeners."""

from __future__ import annotations

import asyncio

import pytest

from kbroker.config import BrokerConfig
from kbroker.protocol.messages import API_KEY_BY_NAME, request_class
from kbroker.replica.broker_client import (BrokerAuthenticationError, BrokerClient,
                                           BrokerClientError)
from kbroker.security import inter_broker
from kbroker.security.sasl import AuthenticationFailed
from kbroker.security.sasl.client import ClientAuthenticationFailed, PlainClient, ScramClient
from kbroker.security.sasl.plain import PlainServer
from kbroker.security.sasl.scram import ScramCredential, ScramServer
from kbroker.security.tls import client_context
from kbroker.testing import KafkaBroker

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


def _scram_pair(mechanism: str, password: str):
    credential = ScramCredential.from_password(mechanism, "broker,1", b"salt-salt", 4096)
    server = ScramServer(mechanism, lambda user, mech: credential if user == "broker,1" else None)
    return ScramClient(mechanism, "broker,1", password), server


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_client_completes_against_the_server_and_checks_its_signature(mechanism):
    client, server = _scram_pair(mechanism, "broker,1")
    final = client.evaluate(server.evaluate(client.first()))
    assert client.evaluate(server.evaluate(final)) is None
    assert client.complete and server.authorization_id == "broker,1"

    client, server = _scram_pair(mechanism, "wrong")
    with pytest.raises(AuthenticationFailed):
        server.evaluate(client.evaluate(server.evaluate(client.first())))

    # A server that does not hold the credential cannot produce the signature.
    client, server = _scram_pair(mechanism, "broker,1")
    client.evaluate(server.evaluate(client.first()))
    with pytest.raises(ClientAuthenticationFailed, match="signature is wrong"):
        client.evaluate(b"v=" + b"A" * 44)
    assert not client.complete


def test_plain_client():
    client, server = PlainClient("broker", "pw"), PlainServer({"broker": "pw"})
    assert client.evaluate(server.evaluate(client.first())) is None and client.complete


def _cluster_config(tmp_path, **extra) -> BrokerConfig:
    return BrokerConfig({"zookeeper.connect": "127.0.0.1:2181", "log.dirs": str(tmp_path),
                         "listeners": "PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9093",
                         "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,"
                                                           "INTERNAL:SASL_PLAINTEXT",
                         "inter.broker.listener.name": "INTERNAL",
                         "sasl.mechanism.inter.broker.protocol": "PLAIN",
                         "listener.name.internal.sasl.enabled.mechanisms": "PLAIN", **extra})


def test_credentials_come_from_the_listeners_jaas_entry(tmp_path):
    config = _cluster_config(tmp_path, **{"listener.name.internal.plain.sasl.jaas.config":
        f'{PLAIN_MODULE} required username="broker" password="s3cret" user_broker="s3cret";'})
    security = inter_broker.from_config(config)
    assert (security.listener, security.protocol, security.mechanism, security.username,
            security.password, security.ssl_context) == ("INTERNAL", "SASL_PLAINTEXT", "PLAIN",
                                                         "broker", "s3cret", None)
    assert "s3cret" not in repr(security)
    # Users only (no username/password of its own): the broker cannot authenticate to others.
    config = _cluster_config(tmp_path, **{"listener.name.internal.plain.sasl.jaas.config":
                                          f'{PLAIN_MODULE} required user_broker="s3cret";'})
    with pytest.raises(inter_broker.InterBrokerSecurityError,
                       match="listener.name.internal.plain.sasl.jaas.config has no username"):
        inter_broker.from_config(config)
    plaintext = BrokerConfig({"log.dirs": str(tmp_path)})
    assert inter_broker.from_config(plaintext).protocol == "PLAINTEXT"


# --- real sockets ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def secured():
    with KafkaBroker(security=True) as kafka:
        yield kafka


def _security(secured, listener, protocol, mechanism=None, user=None, password=None, *,
              client_cert=False, ca_file=None):
    info = secured.security
    keys = {"ssl.keystore.location": str(info.certificates.client_keystore) if client_cert
            else None,
            "ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": None,
            "ssl.key.password": None, "ssl.truststore.location": ca_file or info.ca_file,
            "ssl.truststore.type": "PEM", "ssl.truststore.certificates": None,
            "ssl.endpoint.identification.algorithm": "https",
            "ssl.enabled.protocols": ["TLSv1.2", "TLSv1.3"], "ssl.cipher.suites": []}
    context = client_context(keys.__getitem__, listener) if "SSL" in protocol else None
    return inter_broker.InterBrokerSecurity(listener, protocol, context, mechanism, user, password)


async def _metadata(secured, listener, security):
    host, port = secured.security.bootstrap_servers[listener].split(":")
    client = BrokerClient(host, int(port), client_id="broker-9", timeout_s=10,
                          max_response_bytes=1 << 20, security=security)
    try:
        await client.connect()
        return await client.request("Metadata", request_class(API_KEY_BY_NAME["Metadata"])(
            topics=[]))
    finally:
        client.close()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_broker_client_authenticates_over_sasl_ssl(secured, mechanism):
    security = _security(secured, "SASL_SSL", "SASL_SSL", mechanism, "alice", "alice-secret")
    response = asyncio.run(_metadata(secured, "SASL_SSL", security))
    assert response.brokers
    wrong = _security(secured, "SASL_SSL", "SASL_SSL", mechanism, "alice", "nope")
    with pytest.raises(BrokerAuthenticationError,
                       match=f"SASL {mechanism} authentication as alice to 127.0.0.1:\\d+ "
                             "\\(listener SASL_SSL\\) failed: Authentication failed"):
        asyncio.run(_metadata(secured, "SASL_SSL", wrong))


def test_broker_client_presents_its_certificate_to_an_mtls_listener(secured):
    with_cert = _security(secured, "MTLS", "SSL", client_cert=True)
    assert asyncio.run(_metadata(secured, "MTLS", with_cert)).brokers
    without = _security(secured, "MTLS", "SSL")
    with pytest.raises(BrokerClientError):
        asyncio.run(_metadata(secured, "MTLS", without))


def test_broker_client_refuses_a_broker_its_trust_store_does_not_vouch_for(secured, tmp_path):
    from kbroker.testing.certs import make_certificates

    stranger = make_certificates(tmp_path).ca_file
    security = _security(secured, "SSL", "SSL", ca_file=str(stranger))
    with pytest.raises(BrokerAuthenticationError, match="TLS handshake with 127.0.0.1:\\d+ "
                                                        "\\(listener SSL\\) failed: "
                                                        "CERTIFICATE_VERIFY_FAILED"):
        asyncio.run(_metadata(secured, "SSL", security))


def test_start_up_names_the_key_of_unusable_inter_broker_settings(tmp_path):
    from kbroker.server import listener_security
    from kbroker.startup import StartupError

    config = _cluster_config(tmp_path, **{"listener.name.internal.plain.sasl.jaas.config":
                                          f'{PLAIN_MODULE} required user_broker="s3cret";'})
    with pytest.raises(StartupError) as info:
        listener_security.inter_broker(config)
    assert "inter-broker client" in str(info.value)
    assert "listener.name.internal.plain.sasl.jaas.config" in str(info.value)
    ssl_config = BrokerConfig({"zookeeper.connect": "127.0.0.1:2181", "log.dirs": str(tmp_path),
                               "listeners": "INTERNAL://127.0.0.1:9093",
                               "listener.security.protocol.map": "INTERNAL:SSL",
                               "ssl.keystore.type": "PEM",
                               "ssl.keystore.location": str(tmp_path / "missing.pem")})
    with pytest.raises(StartupError, match="ssl.keystore.location"):
        listener_security.inter_broker(ssl_config)


def test_broker_client_reconnects_within_the_session_lifetime_kip_368():
    with KafkaBroker({"connections.max.reauth.ms": 400},
                     security={"listeners": ["SASL_SSL"], "mechanisms": ["PLAIN"]}) as kafka:
        security = _security(kafka, "SASL_SSL", "SASL_SSL", "PLAIN", "alice", "alice-secret")
        host, port = kafka.security.bootstrap_servers["SASL_SSL"].split(":")

        async def session():
            client = BrokerClient(host, int(port), client_id="broker-9", timeout_s=10,
                                  max_response_bytes=1 << 20, security=security)
            await client.connect()
            assert client.connected
            while client.connected:  # the session runs out at 85% of 400 ms
                await asyncio.sleep(0.02)
            await client.connect()  # authenticates afresh
            metadata = request_class(API_KEY_BY_NAME["Metadata"])(topics=[])
            assert (await client.request("Metadata", metadata)).brokers
            client.close()

        asyncio.run(asyncio.wait_for(session(), 20))
