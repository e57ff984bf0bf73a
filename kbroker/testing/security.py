"""Secured test brokers: TLS, mTLS and SASL listeners with certificates and users made on start.

``BrokerSecurity`` describes what a test wants; a broker started with it (``KafkaBroker(security=
...)``, ``SubprocessKafkaBroker(security=...)``, the ``kafka_secure_broker`` fixture or
``@pytest.mark.kafka_security`` on ``fresh_kafka_broker``) gets, next to its ``PLAINTEXT`` listener
(for the admin helpers):

====================  ==================  ==================================================
listener              protocol            clients need
====================  ==================  ==================================================
``SSL``               SSL                 the CA file
``MTLS``              SSL, client auth    the CA file and the client certificate and key
``SASL_PLAINTEXT``    SASL_PLAINTEXT      a user and password (PLAIN or SCRAM-SHA-256/512)
``SASL_SSL``          SASL_SSL            the CA file, a user and password
====================  ==================  ==================================================

Every user gets the same password for every mechanism: PLAIN users come from the listeners' JAAS
entries, SCRAM credentials are created through the broker's AlterUserScramCredentials, as
``kafka-configs.sh`` would. ``SecurityInfo.client(listener, mechanism)`` hands out what a client
needs, as a librdkafka (confluent-kafka) dict, kafka-python or aiokafka keyword arguments, or a
Java ``.properties`` text.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

if TYPE_CHECKING:  # certs needs the optional 'cryptography': imported when certificates are made
    from kbroker.testing.certs import Certificates


PROTOCOLS = {"SSL": "SSL", "MTLS": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT",
             "SASL_SSL": "SASL_SSL"}
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_USERS = {"alice": "alice-secret", "bob": "bob-secret"}
JAAS_MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
                "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
                "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}


@dataclass(frozen=True)
class BrokerSecurity:
    """What a secured test broker offers. ``listeners``: a subset of ``PROTOCOLS``' names."""

    listeners: Sequence[str] = tuple(PROTOCOLS)
    users: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_USERS))
    mechanisms: Sequence[str] = MECHANISMS

    def __post_init__(self) -> None:
        listeners = [self.listeners] if isinstance(self.listeners, str) else self.listeners
        mechanisms = [self.mechanisms] if isinstance(self.mechanisms, str) else self.mechanisms
        object.__setattr__(self, "listeners", tuple(name.upper() for name in listeners))
        object.__setattr__(self, "mechanisms", tuple(m.upper() for m in mechanisms))
        for name in self.listeners:
            if name not in PROTOCOLS:
                raise ValueError(f"secured listener {name!r}: expected one of {', '.join(PROTOCOLS)}")
        for mechanism in self.mechanisms:
            if mechanism not in MECHANISMS:
                raise ValueError(f"SASL mechanism {mechanism!r}: expected one of {', '.join(MECHANISMS)}")
        if any(n.startswith("SASL_") for n in self.listeners) and not self.mechanisms:
            raise ValueError("a SASL listener needs at least one of mechanisms "
                             f"({', '.join(MECHANISMS)})")
        for user in self.users:
            if not user or any(c in user for c in '"=, '):
                raise ValueError(f"user name {user!r}: no quotes, '=', ',' or spaces (JAAS syntax)")

    @classmethod
    def of(cls, value) -> "BrokerSecurity | None":
        """``True``, a dict of this class's fields, or a ``BrokerSecurity``; None/False: off."""
        if value is None or value is False:
            return None
        if value is True:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, Mapping):
            return cls(**value)
        raise TypeError(f"security={value!r}: expected True, a dict or a BrokerSecurity")

    def check_settings(self, settings: Mapping[str, object]) -> None:
        """The listeners are ours to lay out: refuse settings that would move them."""
        for key in ("listeners", "listener.security.protocol.map", "advertised.listeners"):
            if key in settings:
                raise ValueError(f"a broker started with security= lays out its listeners itself; "
                                 f"leave '{key}' out of its settings")

    def prepare(self) -> "PreparedSecurity":
        """Make the certificates (in a temp dir removed by ``PreparedSecurity.remove``)."""
        from kbroker.testing.certs import make_certificates

        directory = Path(tempfile.mkdtemp(prefix="kbroker-certs-"))
        try:
            return PreparedSecurity(self, make_certificates(directory), directory)
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            raise


@dataclass(frozen=True)
class PreparedSecurity:
    security: BrokerSecurity
    certificates: Certificates
    directory: Path

    def broker_settings(self) -> dict[str, str]:
        names = ("PLAINTEXT",) + self.security.listeners
        protocols = {"PLAINTEXT": "PLAINTEXT", **{n: PROTOCOLS[n] for n in self.security.listeners}}
        settings = {
            "listeners": ",".join(f"{name}://127.0.0.1:0" for name in names),
            "listener.security.protocol.map": ",".join(f"{n}:{p}" for n, p in protocols.items()),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.certificates.server_keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.certificates.ca_file),
            "sasl.enabled.mechanisms": ",".join(self.security.mechanisms),
        }
        if "MTLS" in self.security.listeners:
            settings["listener.name.mtls.ssl.client.auth"] = "required"
        if "PLAIN" in self.security.mechanisms:
            jaas = (f"{JAAS_MODULES['PLAIN']} required "
                    + " ".join(f'user_{u}="{p}"' for u, p in self.security.users.items()) + ";")
            for name in self.security.listeners:
                if name.startswith("SASL_"):
                    settings[f"listener.name.{name.lower()}.plain.sasl.jaas.config"] = jaas
        return settings

    def create_scram_users(self, plaintext_bootstrap: str) -> None:
        """Every user's SCRAM credentials, through AlterUserScramCredentials on PLAINTEXT."""
        from kafka.admin import UserScramCredentialUpsertion

        from kbroker.admin_client import admin_client

        upsertions = [UserScramCredentialUpsertion(user, mechanism, password)
                      for mechanism in self.security.mechanisms if mechanism.startswith("SCRAM")
                      for user, password in self.security.users.items()]
        if not upsertions:
            return
        admin = admin_client(plaintext_bootstrap)
        try:
            failed = {u: e for u, e in admin.alter_user_scram_credentials(upsertions).items() if e}
        finally:
            admin.close()
        if failed:
            raise RuntimeError(f"creating SCRAM users failed: {failed}")

    def info(self, listeners: Mapping[str, tuple[str, int]]) -> "SecurityInfo":
        return SecurityInfo(
            bootstrap_servers={name: f"{host}:{port}" for name, (host, port) in listeners.items()},
            protocols={"PLAINTEXT": "PLAINTEXT",
                       **{n: PROTOCOLS[n] for n in self.security.listeners}},
            users=dict(self.security.users), mechanisms=self.security.mechanisms,
            certificates=self.certificates)

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


@dataclass(frozen=True)
class SecurityInfo:
    """What clients of a secured test broker need; ``client(...)`` assembles it per listener."""

    bootstrap_servers: dict[str, str]  # listener name -> "host:port"
    protocols: dict[str, str]  # listener name -> security protocol
    users: dict[str, str]
    mechanisms: tuple[str, ...]
    certificates: Certificates

    ca_file = property(lambda self: str(self.certificates.ca_file))
    client_cert_file = property(lambda self: str(self.certificates.client_cert_file))
    client_key_file = property(lambda self: str(self.certificates.client_key_file))
    client_principal = property(lambda self: self.certificates.client_principal)

    def client(self, listener: str, mechanism: str | None = None, user: str | None = None,
               password: str | None = None) -> "ClientSecurity":
        """Settings for ``listener``; on a SASL listener ``mechanism`` defaults to the first
        enabled, ``user`` to the first user and ``password`` to that user's."""
        listener = listener.upper()
        if listener not in self.bootstrap_servers:
            raise KeyError(f"no listener {listener!r}; the broker has "
                           f"{', '.join(self.bootstrap_servers)}")
        protocol = self.protocols[listener]
        tls = protocol in ("SSL", "SASL_SSL")
        sasl = protocol.startswith("SASL_")
        if sasl:
            mechanism = (mechanism or self.mechanisms[0]).upper()
            user = user or next(iter(self.users))
            password = password if password is not None else self.users.get(user, "")
        mtls = listener == "MTLS"
        certs = self.certificates
        return ClientSecurity(
            bootstrap_servers=self.bootstrap_servers[listener], security_protocol=protocol,
            ca_file=str(certs.ca_file) if tls else None,
            cert_file=str(certs.client_cert_file) if mtls else None,
            key_file=str(certs.client_key_file) if mtls else None,
            keystore_file=str(certs.client_keystore) if mtls else None,
            mechanism=mechanism if sasl else None, username=user if sasl else None,
            password=password if sasl else None)


@dataclass(frozen=True)
class ClientSecurity:
    bootstrap_servers: str
    security_protocol: str
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    keystore_file: str | None = None  # key + chain, for Java's ssl.keystore.type=PEM
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None

    @property
    def librdkafka_config(self) -> dict[str, str]:
        """confluent-kafka / librdkafka (and kcat ``-X``) settings."""
        config = {"bootstrap.servers": self.bootstrap_servers,
                  "security.protocol": self.security_protocol}
        if self.ca_file:
            config["ssl.ca.location"] = self.ca_file
        if self.cert_file:
            config["ssl.certificate.location"] = self.cert_file
            config["ssl.key.location"] = self.key_file
        if self.mechanism:
            config.update({"sasl.mechanism": self.mechanism, "sasl.username": self.username,
                           "sasl.password": self.password})
        return config

    @property
    def kafka_python_config(self) -> dict:
        """Keyword arguments for kafka-python's clients."""
        config = {"bootstrap_servers": self.bootstrap_servers,
                  "security_protocol": self.security_protocol}
        if self.ca_file:
            config["ssl_cafile"] = self.ca_file
        if self.cert_file:
            config.update(ssl_certfile=self.cert_file, ssl_keyfile=self.key_file)
        if self.mechanism:
            config.update(sasl_mechanism=self.mechanism, sasl_plain_username=self.username,
                          sasl_plain_password=self.password)
        return config

    @property
    def aiokafka_config(self) -> dict:
        """Keyword arguments for aiokafka's clients (TLS through an ``ssl.SSLContext``)."""
        config = {k: v for k, v in self.kafka_python_config.items() if not k.startswith("ssl_")}
        if self.ca_file:
            config["ssl_context"] = self.ssl_context()
        return config

    def ssl_context(self):
        import ssl

        context = ssl.create_default_context(cafile=self.ca_file)
        if self.cert_file:
            context.load_cert_chain(self.cert_file, self.key_file)
        return context

    @property
    def java_properties(self) -> str:
        """A client ``.properties`` file's text (Java clients, Kafka's ``--command-config``)."""
        lines = [f"bootstrap.servers={self.bootstrap_servers}",
                 f"security.protocol={self.security_protocol}"]
        if self.ca_file:
            lines += ["ssl.truststore.type=PEM", f"ssl.truststore.location={self.ca_file}"]
        if self.keystore_file:
            lines += ["ssl.keystore.type=PEM", f"ssl.keystore.location={self.keystore_file}"]
        if self.mechanism:
            lines += [f"sasl.mechanism={self.mechanism}",
                      f"sasl.jaas.config={JAAS_MODULES[self.mechanism]} required "
                      f'username="{self.username}" password="{self.password}";']
        return "\n".join(lines) + "\n"
