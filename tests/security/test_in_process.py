"""In-process brokers: the principal a handler sees (``ctx.principal``) for SASL and mTLS
clients, TLS settings a client can observe, and start-up refusals naming the key."""

from __future__ import annotations

import asyncio
import ssl

import pytest

from kbroker.config import BrokerConfig
from kbroker.server.broker import Broker
from kbroker.startup import StartupError
from tests.security.conftest import PLAIN_JAAS

METADATA = 3


def _config(tmp_path, listeners: dict, **settings) -> BrokerConfig:
    return BrokerConfig({
        "listeners": ",".join(f"{name}://127.0.0.1:0" for name in listeners),
        "listener.security.protocol.map": ",".join(f"{n}:{p}" for n, p in listeners.items()),
        "log.dirs": str(tmp_path / "data"), **settings})


def _principals(broker) -> list[str]:
    seen = []
    broker.dispatcher.faults[METADATA] = lambda ctx, request: seen.append(ctx.principal)
    return seen


async def _metadata(bootstrap: str, **kwargs):
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **kwargs)
    await admin.start()
    try:
        await admin.describe_cluster()
    finally:
        await admin.close()


def test_principal_of_sasl_and_mtls_clients(tmp_path, ca):
    config = _config(tmp_path, {"SASL_PLAINTEXT": "SASL_PLAINTEXT", "SSL": "SSL",
                                "PLAINTEXT": "PLAINTEXT"}, **{
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(ca.server.keystore_pem),
        "ssl.truststore.location": str(ca.ca_pem), "ssl.truststore.type": "PEM",
        "ssl.client.auth": "requested",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]*),O=dev$/$1-via-cert/L,DEFAULT"})

    async def run():
        async with Broker(config) as broker:
            seen = _principals(broker)
            await _metadata(f"127.0.0.1:{broker.port('PLAINTEXT')}")
            await _metadata(f"127.0.0.1:{broker.port('SASL_PLAINTEXT')}",
                            security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                            sasl_plain_username="bob", sasl_plain_password="bob-secret")
            context = ssl.create_default_context(cafile=str(ca.ca_pem))
            context.load_cert_chain(str(ca.client.cert_pem), str(ca.client.key_pem))
            await _metadata(f"127.0.0.1:{broker.port('SSL')}", security_protocol="SSL",
                            ssl_context=context)
            # requested, not required: a client without a certificate is ANONYMOUS
            await _metadata(f"127.0.0.1:{broker.port('SSL')}", security_protocol="SSL",
                            ssl_context=ssl.create_default_context(cafile=str(ca.ca_pem)))
            return seen

    seen = asyncio.run(run())
    assert set(seen) == {"User:ANONYMOUS", "User:bob", "User:alice-via-cert"}


def test_tls_versions_are_enforced(tmp_path, ca, caplog):
    config = _config(tmp_path, {"SSL": "SSL"}, **{
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(ca.server.keystore_pem),
        "ssl.enabled.protocols": "TLSv1.3"})

    async def run():
        async with Broker(config) as broker:
            port = broker.port("SSL")
            old = ssl.create_default_context(cafile=str(ca.ca_pem))
            old.maximum_version = ssl.TLSVersion.TLSv1_2
            with pytest.raises((ssl.SSLError, ConnectionError)):
                await asyncio.open_connection("127.0.0.1", port, ssl=old,
                                              server_hostname="localhost")
            new = ssl.create_default_context(cafile=str(ca.ca_pem))
            reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=new,
                                                           server_hostname="localhost")
            version = writer.get_extra_info("ssl_object").version()
            writer.close()
            return version

    assert asyncio.run(run()) == "TLSv1.3"
    assert "UNSUPPORTED_PROTOCOL" in caplog.text


@pytest.mark.parametrize("settings, key", [
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "/nonexistent.pem"},
     "ssl.keystore.location"),
    ({"ssl.keystore.type": "PKCS12", "ssl.keystore.password": "wrong"}, "ssl.keystore.location"),
    ({"ssl.keystore.type": "JKS", "ssl.keystore.password": "storepass",
      "ssl.keystore.location": "JUNK"}, "JKS"),
    ({"ssl.keystore.type": "PEM", "ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"},
     "ssl.cipher.suites"),
    ({"ssl.keystore.type": "PEM", "ssl.cipher.suites": "NOT_A_SUITE"}, "ssl.cipher.suites"),
    ({"ssl.keystore.type": "PEM", "ssl.principal.mapping.rules": "RULE:x"},
     "ssl.principal.mapping.rules"),
])
def test_unusable_tls_settings_stop_start_up(tmp_path, ca, settings, key):
    defaults = {"ssl.keystore.location": str(ca.server.keystore_p12
                                              if settings["ssl.keystore.type"] != "PEM"
                                              else ca.server.keystore_pem)}
    settings = {**defaults, **settings}
    if settings["ssl.keystore.location"] == "JUNK":
        junk = tmp_path / "store.jks"
        junk.write_bytes(b"\xfe\xed\xfe\xed" + b"\0" * 64)  # JKS magic
        settings["ssl.keystore.location"] = str(junk)
    config = _config(tmp_path, {"SSL": "SSL"}, **settings)

    async def run():
        async with Broker(config):
            pass

    with pytest.raises(StartupError) as info:
        asyncio.run(run())
    assert key in str(info.value) and "SSL" in str(info.value)


@pytest.mark.parametrize("jaas, words", [
    ('org.apache.kafka.common.security.plain.PlainLoginModule required;', "OAuthBearerLoginModule"),
    ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
     'unsecuredValidatorAllowableClockSkewMs="-5";', "negative"),
    ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
     'unsecuredValidatorAllowableClockSkewMs="soon";', "integer"),
])
def test_unusable_oauthbearer_jaas_stops_start_up(tmp_path, jaas, words):
    key = "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config"
    config = _config(tmp_path, {"SASL_PLAINTEXT": "SASL_PLAINTEXT"},
                     **{"sasl.enabled.mechanisms": "OAUTHBEARER", key: jaas})

    async def run():
        async with Broker(config):
            pass

    with pytest.raises(StartupError) as info:
        asyncio.run(run())
    assert key in str(info.value) and words in str(info.value)


def test_pkcs12_trust_store_and_encrypted_pem_key(tmp_path, ca):
    protected = ca.issue("protected", "localhost", server=True, key_password="keypass")
    config = _config(tmp_path, {"SSL": "SSL"}, **{
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(protected.keystore_pem),
        "ssl.key.password": "keypass", "ssl.client.auth": "required",
        "ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(ca.truststore_p12),
        "ssl.truststore.password": "trustpass"})

    async def run():
        async with Broker(config) as broker:
            seen = _principals(broker)
            context = ssl.create_default_context(cafile=str(ca.ca_pem))
            context.load_cert_chain(str(ca.client.cert_pem), str(ca.client.key_pem))
            await _metadata(f"127.0.0.1:{broker.port('SSL')}", security_protocol="SSL",
                            ssl_context=context)
            return seen

    assert "User:CN=alice,O=dev" in asyncio.run(run())
