"""The security columns with an outside identity service: GSSAPI (Kerberos, a throwaway MIT KDC
on 127.0.0.1, keytabs for the broker and the client), OAUTHBEARER with signed tokens from a local
identity provider's token endpoint, checked by the broker against its JWKS (KIP-768), and
delegation tokens (KIP-48).

One broker for the module: a SASL_PLAINTEXT listener (advertised as ``localhost``, the host of
the broker's principal ``kafka/localhost``) with GSSAPI and OAUTHBEARER (Kafka's
OAuthBearerValidatorCallbackHandler), and PLAINTEXT for the reference side. A driver gets the
settings as ``--property`` pairs in its client's vocabulary; the JVM's (the KDC's krb5.conf, Kafka
4's allow-list of token endpoints) through ``JAVA_TOOL_OPTIONS``, MIT's (``KRB5_CONFIG``, a
ticket cache) through the environment. Records are checked exactly, as in ``produce-consume``.

Delegation tokens have a broker of their own (:class:`TokenBroker`, started only when a driver
can run the cell): alice asks for a token over SASL PLAIN, and the driver produces and consumes
with it (SCRAM-SHA-512, ``tokenauth="true"`` in Kafka's ScramLoginModule options). Clients whose
SCRAM cannot send the extension are n/a (compat_tests/drivers/registry.py).
"""

from __future__ import annotations

import base64
import os
import socket
import subprocess

import pytest

from compat_tests import harness
from compat_tests.harness import Spec
from compat_tests.reference import ensure_topic
from compat_tests.test_produce_consume import explicit_timestamps
from tests.broker_process import BrokerProcess

KRB5 = "com.sun.security.auth.module.Krb5LoginModule"
JWKS_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
CLIENT, SECRET = "compat-client", "compat-secret"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SsoBroker:
    def __init__(self, directory):
        from kbroker.testing.kdc import TestKdc
        from kbroker.testing.oauth_idp import IdentityProvider

        self.kdc = TestKdc(directory / "kdc").start()
        self.idp = IdentityProvider(audience="kafka", issuer="https://idp.compat.test").start()
        self.idp.add_client(CLIENT, SECRET)
        self.broker_keytab = self.kdc.keytab("kafka/localhost")
        self.client_keytab = self.kdc.keytab("alice")
        self.client_principal = f"alice@{self.kdc.realm}"
        self.ccache = directory / "alice.ccache"
        self.sasl_port, plain_port = _free_port(), _free_port()
        self._saved = {k: os.environ.get(k) for k in
                       ("KRB5_CONFIG", "KRB5_KDC_PROFILE", "KRB5CCNAME", "JAVA_TOOL_OPTIONS")}
        os.environ.update({**self.kdc.env, "KRB5CCNAME": f"FILE:{self.ccache}",
                           "JAVA_TOOL_OPTIONS": f"-Djava.security.krb5.conf={self.kdc.krb5_conf} "
                           f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls="
                           f"{self.idp.token_url}"})
        # A ticket for the clients that read MIT's ticket cache (kafka-python, aiokafka).
        subprocess.run(["kinit", "-kt", str(self.client_keytab), self.client_principal],
                       check=True, capture_output=True)
        self.process = BrokerProcess(directory / "data", {
            "listeners": f"PLAINTEXT://127.0.0.1:{plain_port},"
                         f"SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{plain_port},"
                                    f"SASL_PLAINTEXT://localhost:{self.sasl_port}",
            "sasl.enabled.mechanisms": "GSSAPI,OAUTHBEARER",
            "sasl.kerberos.service.name": "kafka",
            "listener.name.sasl_plaintext.gssapi.sasl.jaas.config":
                f'{KRB5} required useKeyTab=true storeKey=true keyTab="{self.broker_keytab}" '
                f'principal="kafka/localhost@{self.kdc.realm}";',
            "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class":
                JWKS_HANDLER,
            "sasl.oauthbearer.jwks.endpoint.url": self.idp.jwks_url,
            "sasl.oauthbearer.expected.audience": "kafka",
            "sasl.oauthbearer.expected.issuer": self.idp.issuer,
            "group.initial.rebalance.delay.ms": 0}).start()
        self.plaintext = f"127.0.0.1:{plain_port}"
        self.bootstrap = f"localhost:{self.sasl_port}"

    def settings(self, style: str, mechanism: str) -> dict[str, str]:
        if mechanism == "GSSAPI":
            return {
                "java": {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI",
                         "sasl.kerberos.service.name": "kafka",
                         "sasl.jaas.config": f'{KRB5} required useKeyTab=true storeKey=true '
                                             f'keyTab="{self.client_keytab}" '
                                             f'principal="{self.client_principal}";'},
                "librdkafka": {"security.protocol": "SASL_PLAINTEXT",
                               "sasl.mechanisms": "GSSAPI", "sasl.kerberos.service.name": "kafka",
                               "sasl.kerberos.keytab": str(self.client_keytab),
                               "sasl.kerberos.principal": self.client_principal},
                "python": {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI",
                           "sasl.kerberos.service.name": "kafka"},
            }[style]
        return {
            "java": {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                     "sasl.login.callback.handler.class": "org.apache.kafka.common.security."
                                                          "oauthbearer."
                                                          "OAuthBearerLoginCallbackHandler",
                     "sasl.oauthbearer.token.endpoint.url": self.idp.token_url,
                     "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer."
                                         f'OAuthBearerLoginModule required clientId="{CLIENT}" '
                                         f'clientSecret="{SECRET}" scope="kafka";'},
            "librdkafka": {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "OAUTHBEARER",
                           "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": CLIENT,
                           "sasl.oauthbearer.client.secret": SECRET,
                           "sasl.oauthbearer.token.endpoint.url": self.idp.token_url,
                           "sasl.oauthbearer.scope": "kafka"},
            # librdkafka's names; the Python driver builds a token provider from them
            "python": {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                       "sasl.oauthbearer.token.endpoint.url": self.idp.token_url,
                       "sasl.oauthbearer.client.id": CLIENT,
                       "sasl.oauthbearer.client.secret": SECRET, "sasl.oauthbearer.scope": "kafka"},
        }[style]

    def stop(self) -> None:
        self.process.stop(timeout=10)
        self.idp.stop()
        self.kdc.stop()
        for key, value in self._saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def sso_broker(tmp_path_factory):
    broker = SsoBroker(tmp_path_factory.mktemp("compat-sso"))
    yield broker
    broker.stop()


MODES = {"GSSAPI": "security.gssapi", "OAUTHBEARER": "security.oauthbearer-jwks"}


@pytest.mark.parametrize("mechanism", list(MODES), ids=["GSSAPI", "OAUTHBEARER-JWKS"])
@pytest.mark.compat("security: SASL_PLAINTEXT {mechanism}")
def test_produce_consume_with_an_identity_service(sso_broker, driver, mechanism, cell):
    cell.need(driver, MODES[mechanism])
    topic = harness.unique("sso", driver.name, mechanism.lower())
    ensure_topic(sso_broker.plaintext, topic, partitions=1)
    args = []
    for key, value in sso_broker.settings(driver.config_style, mechanism).items():
        args += ["--property", f"{key}={value}"]
    spec = Spec(count=6, timestamp=explicit_timestamps(driver))
    started = harness.now_ms()
    produced = harness.produce(driver, sso_broker.bootstrap, topic, spec, timeout=40,
                               args=args).ok()
    window = (started, harness.now_ms())
    consumed = harness.consume(driver, sso_broker.bootstrap, topic, spec.count, timeout=30,
                               args=args).ok()
    problems = harness.compare(spec, driver, produced, consumed.records, window)
    assert not problems, "; ".join(problems[:5])


TOKEN_SECRET = "compat-token-secret"


class TokenBroker:
    """A SASL_PLAINTEXT listener with PLAIN (alice, who asks for the token) and SCRAM (the token
    authenticates through it, ``tokenauth=true``), delegation tokens enabled; PLAINTEXT for the
    reference side."""

    def __init__(self, directory):
        from tests.security.test_delegation_tokens import PLAIN_JAAS, create, login

        self.process = BrokerProcess(directory / "data", {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            "delegation.token.secret.key": TOKEN_SECRET,
            "group.initial.rebalance.delay.ms": 0}).start()
        line = [entry for entry in self.process.log().splitlines() if "kbroker ready" in entry][-1]
        import re
        self.endpoints = {name: f"127.0.0.1:{port}" for name, port
                          in re.findall(r"(\w+)://127\.0\.0\.1:(\d+)", line)}
        self.plaintext = self.endpoints["PLAINTEXT"]
        self.bootstrap = self.endpoints["SASL_PLAINTEXT"]
        with login(self, "alice") as wire:
            token = create(wire)
        assert token.error_code == 0, token
        self.token_id = token.token_id
        self.hmac = base64.b64encode(bytes(token.hmac)).decode()

    def settings(self, style: str) -> dict[str, str]:
        # Kafka's words (Java, franz-go): ScramLoginModule's tokenauth option.
        return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
                                    f'required username="{self.token_id}" '
                                    f'password="{self.hmac}" tokenauth="true";'}

    def stop(self) -> None:
        self.process.stop(timeout=10)


@pytest.fixture(scope="module")
def token_broker(tmp_path_factory):
    broker = TokenBroker(tmp_path_factory.mktemp("compat-token"))
    yield broker
    broker.stop()


@pytest.mark.compat("security: delegation token")
def test_delegation_token(driver, cell, request):
    cell.need(driver, "security.delegation-token")
    token_broker = request.getfixturevalue("token_broker")
    topic = harness.unique("token", driver.name)
    ensure_topic(token_broker.plaintext, topic, partitions=1)
    args = []
    for key, value in token_broker.settings(driver.config_style).items():
        args += ["--property", f"{key}={value}"]
    spec = Spec(count=6, timestamp=explicit_timestamps(driver))
    started = harness.now_ms()
    produced = harness.produce(driver, token_broker.bootstrap, topic, spec, timeout=40,
                               args=args).ok()
    window = (started, harness.now_ms())
    consumed = harness.consume(driver, token_broker.bootstrap, topic, spec.count, timeout=30,
                               args=args).ok()
    problems = harness.compare(spec, driver, produced, consumed.records, window)
    assert not problems, "; ".join(problems[:5])
