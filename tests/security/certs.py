"""Certificates for the security tests, generated per run with ``cryptography`` (never committed).

One CA signs a server certificate for 127.0.0.1 / localhost and client certificates; files are
written as Kafka users would hand them to a broker: a PEM key store (PKCS#8 key + chain), a PEM
trust store, and PKCS12 stores.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID


def _name(cn: str, org: str = "kbroker-tests") -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, org),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _key():
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key, password: str | None = None) -> bytes:
    encryption = (serialization.BestAvailableEncryption(password.encode()) if password
                  else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             encryption)


def _pem_cert(cert) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


@dataclass
class Identity:
    key: object
    cert: x509.Certificate
    key_pem: Path
    cert_pem: Path
    keystore_pem: Path  # key + chain in one file (Kafka's PEM key store)
    keystore_p12: Path


class TestCA:
    __test__ = False

    def __init__(self, directory: Path):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.key = _key()
        now = datetime.datetime.now(datetime.timezone.utc)
        self._now = now
        self.cert = (x509.CertificateBuilder().subject_name(_name("kbroker test CA"))
                     .issuer_name(_name("kbroker test CA")).public_key(self.key.public_key())
                     .serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(days=1))
                     .not_valid_after(now + datetime.timedelta(days=2))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .sign(self.key, hashes.SHA256()))
        self.ca_pem = self.dir / "ca.pem"
        self.ca_pem.write_bytes(_pem_cert(self.cert))
        self.truststore_p12 = self.dir / "truststore.p12"
        self.truststore_p12.write_bytes(pkcs12.serialize_java_truststore(
            [pkcs12.PKCS12Certificate(self.cert, b"ca")],
            serialization.BestAvailableEncryption(b"trustpass"))
            if hasattr(pkcs12, "serialize_java_truststore") else b"")

    def issue(self, name: str, cn: str, server: bool = False, key_password: str | None = None,
              org: str = "kbroker-tests") -> Identity:
        key = _key()
        builder = (x509.CertificateBuilder().subject_name(_name(cn, org))
                   .issuer_name(self.cert.subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(self._now - datetime.timedelta(days=1))
                   .not_valid_after(self._now + datetime.timedelta(days=2)))
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        key_pem = self.dir / f"{name}.key.pem"
        key_pem.write_bytes(_pem_key(key, key_password))
        cert_pem = self.dir / f"{name}.cert.pem"
        cert_pem.write_bytes(_pem_cert(cert) + _pem_cert(self.cert))
        keystore = self.dir / f"{name}.keystore.pem"
        keystore.write_bytes(_pem_key(key, key_password) + _pem_cert(cert) + _pem_cert(self.cert))
        p12 = self.dir / f"{name}.p12"
        p12.write_bytes(pkcs12.serialize_key_and_certificates(
            name.encode(), key, cert, [self.cert],
            serialization.BestAvailableEncryption(b"storepass")))
        return Identity(key, cert, key_pem, cert_pem, keystore, p12)
