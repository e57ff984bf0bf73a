"""The security columns of the matrix: the modes, the broker that serves them, and each client's
words for them.

One broker (started once per session, only when a security cell runs) has a listener per mode:
``SSL``, ``SASL_SSL`` (PLAIN from the listener's JAAS entry, SCRAM-SHA-512 from a credential
created through AlterUserScramCredentials as ``kafka-configs.sh`` does) and ``MTLS`` (SSL with
``ssl.client.auth=required``; the principal is the certificate's subject), plus ``PLAINTEXT``
for the reference side (topics, the SCRAM user, ACLs). Kafka's StandardAuthorizer is on with
``allow.everyone.if.no.acl.found=true``: an mTLS cell's topic carries one ACL, for the principal
the certificate's subject maps to, so using it proves that mapping. Certificates come from a CA
made per session (``kbroker/testing/certs.py``), never committed.

A driver is handed a mode as ``--property k=v`` settings in its client's own vocabulary
(``Driver.config_style``): Kafka's Java names (Java, franz-go, KafkaJS, Spark with ``kafka.``),
librdkafka's (confluent-kafka, kcat) or the Python clients' keyword names (kafka-python,
aiokafka; ``ssl.cafile`` becomes ``ssl_cafile``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kbroker.testing.certs import TestCA
from tests.broker_process import BrokerProcess

# The mTLS client certificate's subject as Kafka's default principal builder names it.
MTLS_PRINCIPAL = "User:CN=compat-client,O=kbroker-compat"
PLAIN_USER, PLAIN_PASSWORD = "alice", "alice-secret"
SCRAM_USER, SCRAM_PASSWORD = "carol", "carol-secret"
PLAIN_JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
              f'user_{PLAIN_USER}="{PLAIN_PASSWORD}";')
LOGIN_MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
                 "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}


@dataclass(frozen=True)
class Mode:
    name: str                  # the column of the matrix
    listener: str              # the broker listener that serves it
    protocol: str              # security.protocol on the client
    mechanism: str | None = None
    client_cert: bool = False

    @property
    def credentials(self) -> tuple[str, str]:
        return (SCRAM_USER, SCRAM_PASSWORD) if self.mechanism and \
            self.mechanism.startswith("SCRAM") else (PLAIN_USER, PLAIN_PASSWORD)


MODES = (
    Mode("SSL", "SSL", "SSL"),
    Mode("SASL_SSL PLAIN", "SASL_SSL", "SASL_SSL", "PLAIN"),
    Mode("SASL_SSL SCRAM-SHA-512", "SASL_SSL", "SASL_SSL", "SCRAM-SHA-512"),
    Mode("mTLS", "MTLS", "SSL", client_cert=True),
)
# Feature names of drivers/registry.py, one per mode (what a client may lack).
FEATURE = {"SSL": "security.ssl", "SASL_SSL PLAIN": "security.sasl-plain",
           "SASL_SSL SCRAM-SHA-512": "security.sasl-scram-sha-512", "mTLS": "security.mtls"}


def make_ca(directory: Path) -> TestCA:
    """A CA with the broker's certificate (SANs localhost and 127.0.0.1) and a client one whose
    subject is the mTLS principal ``CN=compat-client,O=kbroker-compat``."""
    ca = TestCA(directory)
    ca.server = ca.issue("server", "localhost", server=True)
    ca.client = ca.issue("client", "compat-client", org="kbroker-compat")
    return ca


class SecureBroker:
    """A ``kbroker serve`` with one listener per mode (and PLAINTEXT), all on 127.0.0.1."""

    LISTENERS = {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "SASL_SSL": "SASL_SSL", "MTLS": "SSL"}

    def __init__(self, data_dir: Path, ca: TestCA):
        self.ca = ca
        self.process = BrokerProcess(data_dir, {
            "listeners": ",".join(f"{n}://127.0.0.1:0" for n in self.LISTENERS),
            "listener.security.protocol.map": ",".join(f"{n}:{p}"
                                                       for n, p in self.LISTENERS.items()),
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(ca.server.keystore_pem),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca.ca_pem),
            "listener.name.mtls.ssl.client.auth": "required",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
            # ACLs only where a cell asks for them (grant_only): every other resource stays open.
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "true",
            "group.initial.rebalance.delay.ms": 0})
        self.endpoints: dict[str, str] = {}

    def start(self) -> "SecureBroker":
        self.process.start()
        line = next(ln for ln in self.process.log().splitlines() if "kbroker ready" in ln)
        self.endpoints = {name: f"127.0.0.1:{port}" for name, port in
                          re.findall(r"(\w+)://127\.0\.0\.1:(\d+)", line)}
        missing = set(self.LISTENERS) - set(self.endpoints)
        assert not missing, f"listeners {missing} not in the ready line: {line}"
        self._create_scram_user()
        return self

    def _create_scram_user(self) -> None:
        from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                           UserScramCredentialUpsertion)

        admin = AdminClient({"bootstrap.servers": self.plaintext})
        futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            SCRAM_USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
            SCRAM_PASSWORD.encode())])
        for future in futures.values():
            future.result(20)

    def grant_only(self, topic: str, principal: str) -> None:
        """One ACL: ``principal`` may do anything with ``topic``. With an ACL on it, the topic is
        closed to every other principal, so a client that uses it proves the broker gave it
        that principal (for mTLS: the one derived from the certificate's subject)."""
        from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType,
                                           AdminClient, ResourcePatternType, ResourceType)

        admin = AdminClient({"bootstrap.servers": self.plaintext})
        binding = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal,
                             "*", AclOperation.ALL, AclPermissionType.ALLOW)
        for future in admin.create_acls([binding]).values():
            future.result(20)

    @property
    def plaintext(self) -> str:
        return self.endpoints["PLAINTEXT"]

    def bootstrap(self, mode: Mode) -> str:
        return self.endpoints[mode.listener]

    def stop(self) -> None:
        self.process.stop(timeout=10)


# ------------------------------------------------------------------ each client's vocabulary

def java_settings(mode: Mode, ca: TestCA) -> dict[str, str]:
    """Kafka's own client settings; PEM trust and key stores (Kafka 2.7+)."""
    out = {"security.protocol": mode.protocol, "ssl.truststore.type": "PEM",
           "ssl.truststore.location": str(ca.ca_pem)}
    if mode.client_cert:
        out.update({"ssl.keystore.type": "PEM",
                    "ssl.keystore.location": str(ca.client.keystore_pem)})
    if mode.mechanism:
        user, password = mode.credentials
        out.update({"sasl.mechanism": mode.mechanism, "sasl.jaas.config":
                    f'{LOGIN_MODULES[mode.mechanism]} required username="{user}" '
                    f'password="{password}";'})
    return out


def librdkafka_settings(mode: Mode, ca: TestCA) -> dict[str, str]:
    out = {"security.protocol": mode.protocol, "ssl.ca.location": str(ca.ca_pem)}
    if mode.client_cert:
        out.update({"ssl.certificate.location": str(ca.client.cert_pem),
                    "ssl.key.location": str(ca.client.key_pem)})
    if mode.mechanism:
        user, password = mode.credentials
        out.update({"sasl.mechanisms": mode.mechanism, "sasl.username": user,
                    "sasl.password": password})
    return out


def python_settings(mode: Mode, ca: TestCA) -> dict[str, str]:
    """kafka-python's keyword arguments with dots (the Python driver turns them into ``_``);
    aiokafka takes an ``ssl_context``, which its driver builds from the same three files."""
    out = {"security.protocol": mode.protocol, "ssl.cafile": str(ca.ca_pem)}
    if mode.client_cert:
        out.update({"ssl.certfile": str(ca.client.cert_pem),
                    "ssl.keyfile": str(ca.client.key_pem)})
    if mode.mechanism:
        user, password = mode.credentials
        out.update({"sasl.mechanism": mode.mechanism, "sasl.plain.username": user,
                    "sasl.plain.password": password})
    return out


STYLES = {"java": java_settings, "librdkafka": librdkafka_settings, "python": python_settings}


def settings(style: str, mode: Mode, ca: TestCA) -> dict[str, str]:
    return STYLES[style](mode, ca)


def property_args(style: str, mode: Mode, ca: TestCA) -> list[str]:
    """``--property k=v`` arguments of the driver contract."""
    out = []
    for key, value in settings(style, mode, ca).items():
        out += ["--property", f"{key}={value}"]
    return out
