"""Throw-away certificates for secured test brokers and the security tests, made when a fixture
starts (never committed).

``TestCA`` is a CA made per run that issues identities: a server certificate for ``localhost`` /
``127.0.0.1`` and client certificates (for mTLS). Each identity is written as Kafka clients and
brokers take it: its key (PKCS#8 PEM, encrypted when asked), its certificate with the chain
(PEM), a PEM key store holding key plus chain (the broker's ``ssl.keystore.type=PEM``, Java's
client key store) and a PKCS12 key store; the CA goes to a PEM file (clients' ``ssl.ca.location``,
Java's PEM trust store) and a PKCS12 trust store. ``make_certificates`` is the fixed set a
secured test broker uses: one server and one client identity.

Needs the ``cryptography`` package (``pip install kbroker[tls]``): kbroker.testing imports this
module only when a secured broker is asked for.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

try:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import pkcs12
    from cryptography.x509.oid import NameOID
except ImportError as exc:
    raise ImportError("test certificates need the 'cryptography' package: "
                      "pip install kbroker[tls]") from exc

VALID_DAYS = 7
KEYSTORE_P12_PASSWORD = b"storepass"
TRUSTSTORE_P12_PASSWORD = b"trustpass"


@dataclass
class Identity:
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate
    key_pem: Path
    cert_pem: Path  # certificate + chain
    keystore_pem: Path  # key + chain in one file (Kafka's PEM key store)
    keystore_p12: Path


class TestCA:
    __test__ = False  # not a pytest test class

    def __init__(self, directory: Path, org: str = "kbroker-tests"):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._now = datetime.datetime.now(datetime.timezone.utc)
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = _name("kbroker test CA", org)
        self.cert = (self._builder(subject, subject, self.key)
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None),
                                    critical=True)
                     .sign(self.key, hashes.SHA256()))
        self.ca_pem = self.dir / "ca.pem"
        self.ca_pem.write_bytes(_pem_cert(self.cert))
        self.truststore_p12 = self.dir / "truststore.p12"
        self.truststore_p12.write_bytes(pkcs12.serialize_java_truststore(
            [pkcs12.PKCS12Certificate(self.cert, b"ca")],
            serialization.BestAvailableEncryption(TRUSTSTORE_P12_PASSWORD))
            if hasattr(pkcs12, "serialize_java_truststore") else b"")

    def issue(self, name: str, cn: str, server: bool = False, key_password: str | None = None,
              org: str = "kbroker-tests") -> Identity:
        """An identity signed by this CA, written as ``<name>.key.pem``, ``<name>.cert.pem``,
        ``<name>.keystore.pem`` and ``<name>.p12``; ``server``: valid for localhost and
        127.0.0.1. A broker maps it to the principal ``User:CN=<cn>,O=<org>``."""
        key = ec.generate_private_key(ec.SECP256R1())
        builder = self._builder(_name(cn, org), self.cert.subject, key)
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        chain = _pem_cert(cert) + _pem_cert(self.cert)
        identity = Identity(key, cert, self.dir / f"{name}.key.pem", self.dir / f"{name}.cert.pem",
                            self.dir / f"{name}.keystore.pem", self.dir / f"{name}.p12")
        identity.key_pem.write_bytes(_pem_key(key, key_password))
        identity.cert_pem.write_bytes(chain)
        identity.keystore_pem.write_bytes(_pem_key(key, key_password) + chain)
        identity.keystore_p12.write_bytes(pkcs12.serialize_key_and_certificates(
            name.encode(), key, cert, [self.cert],
            serialization.BestAvailableEncryption(KEYSTORE_P12_PASSWORD)))
        for path in (identity.key_pem, identity.keystore_pem, identity.keystore_p12):
            path.chmod(0o600)
        return identity

    def _builder(self, subject: x509.Name, issuer: x509.Name, key) -> x509.CertificateBuilder:
        return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(self._now - datetime.timedelta(days=1))
                .not_valid_after(self._now + datetime.timedelta(days=VALID_DAYS)))


@dataclass(frozen=True)
class Certificates:
    ca_file: Path  # the CA certificate (PEM): clients' ssl.ca.location, Java's PEM trust store
    server_keystore: Path  # broker key + chain (ssl.keystore.type=PEM)
    client_cert_file: Path  # client certificate + chain (PEM)
    client_key_file: Path  # client key (PKCS#8 PEM, not encrypted)
    client_keystore: Path  # client key + chain in one file (Java: ssl.keystore.type=PEM)
    client_principal: str  # the principal the broker maps the client certificate to


def make_certificates(directory: Path, client_cn: str = "client") -> Certificates:
    org = "kbroker-test"
    ca = TestCA(directory, org)
    server = ca.issue("server", "localhost", server=True, org=org)
    client = ca.issue("client", client_cn, org=org)
    return Certificates(
        ca_file=ca.ca_pem, server_keystore=server.keystore_pem, client_cert_file=client.cert_pem,
        client_key_file=client.key_pem, client_keystore=client.keystore_pem,
        client_principal=f"User:CN={client_cn},O={org}")


def _name(cn: str, org: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, org),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _pem_key(key, password: str | None) -> bytes:
    encryption = (serialization.BestAvailableEncryption(password.encode()) if password
                  else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             encryption)


def _pem_cert(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)
