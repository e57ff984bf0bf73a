"""Throw-away certificates for secured test brokers, made when a fixture starts (never committed).

One CA signs a server certificate for ``localhost`` / ``127.0.0.1`` and one client certificate
(for mTLS). Files are written as Kafka clients and brokers take them: PEM CA file, PEM client
certificate (with chain) and unencrypted PKCS#8 key, and PEM key stores holding key plus chain
(the broker's ``ssl.keystore.type=PEM``, Java's client key store). Needs the ``cryptography``
package (``pip install kbroker[tls]``); imported only when a secured broker is asked for.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

VALID_DAYS = 7


@dataclass(frozen=True)
class Certificates:
    ca_file: Path  # the CA certificate (PEM): clients' ssl.ca.location, Java's PEM trust store
    server_keystore: Path  # broker key + chain (ssl.keystore.type=PEM)
    client_cert_file: Path  # client certificate + chain (PEM)
    client_key_file: Path  # client key (PKCS#8 PEM, not encrypted)
    client_keystore: Path  # client key + chain in one file (Java: ssl.keystore.type=PEM)
    client_principal: str  # the principal the broker maps the client certificate to


def make_certificates(directory: Path, client_cn: str = "client") -> Certificates:
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        raise RuntimeError("a secured test broker needs the 'cryptography' package to make its "
                           "certificates: pip install kbroker[tls]") from None

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kbroker-test"),
                          x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def builder(subject: str, issuer: x509.Name, key) -> x509.CertificateBuilder:
        return (x509.CertificateBuilder().subject_name(name(subject)).issuer_name(issuer)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(days=1))
                .not_valid_after(now + datetime.timedelta(days=VALID_DAYS)))

    def pem_key(key) -> bytes:
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())

    def pem(cert) -> bytes:
        return cert.public_bytes(serialization.Encoding.PEM)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (builder("kbroker test CA", name("kbroker test CA"), ca_key)
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = (builder("localhost", ca.subject, server_key)
              .add_extension(x509.SubjectAlternativeName(
                  [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                  critical=False)
              .sign(ca_key, hashes.SHA256()))
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = builder(client_cn, ca.subject, client_key).sign(ca_key, hashes.SHA256())

    files = Certificates(
        ca_file=directory / "ca.pem", server_keystore=directory / "server.keystore.pem",
        client_cert_file=directory / "client.cert.pem", client_key_file=directory / "client.key.pem",
        client_keystore=directory / "client.keystore.pem",
        client_principal=f"User:CN={client_cn},O=kbroker-test")
    files.ca_file.write_bytes(pem(ca))
    files.server_keystore.write_bytes(pem_key(server_key) + pem(server) + pem(ca))
    files.client_cert_file.write_bytes(pem(client) + pem(ca))
    files.client_key_file.write_bytes(pem_key(client_key))
    files.client_keystore.write_bytes(pem_key(client_key) + pem(client) + pem(ca))
    for path in (files.server_keystore, files.client_key_file, files.client_keystore):
        path.chmod(0o600)
    return files
