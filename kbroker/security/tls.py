"""A listener's TLS context from Kafka's ``ssl.*`` keys, through Python's ``ssl``.

Key store (the broker's key and certificate chain):

- ``ssl.keystore.type=PEM`` with ``ssl.keystore.location``: one file holding the PKCS#8 private key
  (encrypted with ``ssl.key.password`` or not) and the certificate chain, as Kafka reads it;
- ``ssl.keystore.type=PEM`` with inline ``ssl.keystore.certificate.chain`` and ``ssl.keystore.key``;
- ``ssl.keystore.type=PKCS12`` (or Kafka's default ``JKS`` naming a PKCS12 file, which Java reads
  too): decoded with the ``cryptography`` package, ``ssl.keystore.password`` opening it and
  ``ssl.key.password`` (else the store password) the key. A real JKS file is refused.

Trust store (the CAs client certificates must chain to): ``ssl.truststore.location`` (PEM or
PKCS12) or inline ``ssl.truststore.certificates``; without one, the system's CAs (Java: the JDK's).

Client side (:func:`client_context`, a broker reaching another broker on the inter-broker
listener, as Kafka's brokers do with the same listener's keys): the key store is the client
certificate (sent when the server asks, i.e. mTLS), the trust store verifies the server, and
``ssl.endpoint.identification.algorithm`` (Kafka's default ``https``) checks the server's host name;
empty turns the check off.

``ssl.client.auth``: ``required`` (handshake fails without a trusted client certificate),
``requested`` (verified if sent), ``none``. ``ssl.enabled.protocols`` bounds the TLS versions;
``ssl.cipher.suites`` restricts TLS 1.2 suites (IANA names as Java uses, or OpenSSL names); TLS 1.3
suites cannot be restricted through Python's ``ssl`` and are refused by name.

Python's ``ssl`` loads keys only from files, so PEM text we assemble (inline keys, PKCS12
contents) goes through a private temporary file that is deleted at once.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from typing import Any, Callable

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_TLS13_SUITES = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
                 "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256"}
_VERIFY = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}


class TlsConfigError(ValueError):
    """A listener's TLS settings cannot be used; ``key`` names the setting."""

    def __init__(self, message: str, key: str):
        super().__init__(message)
        self.key = key


def _secret(value: Any) -> str | None:
    """The text of a password-typed config (wrapped so it never prints) or of a plain one."""
    if value is None:
        return None
    return getattr(value, "value", value)


def server_context(setting: Callable[[str], Any], listener: str) -> ssl.SSLContext:
    """The server-side context of ``listener``; ``setting(key)`` gives the key's value for it."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.options |= ssl.OP_NO_COMPRESSION
    _load_key_store(context, setting, listener)
    client_auth = setting("ssl.client.auth")
    context.verify_mode = _VERIFY[client_auth]
    if client_auth != "none":
        _load_trust_store(context, setting, listener)
    _set_protocols(context, setting("ssl.enabled.protocols"), listener)
    suites = setting("ssl.cipher.suites")
    if suites:
        _set_ciphers(context, suites, listener)
    return context


def client_context(setting: Callable[[str], Any], listener: str) -> ssl.SSLContext:
    """The client-side context for connections to ``listener`` on other brokers."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.options |= ssl.OP_NO_COMPRESSION
    if setting("ssl.keystore.location") is not None \
            or setting("ssl.keystore.certificate.chain") is not None:
        _load_key_store(context, setting, listener)
    _load_trust_store(context, setting, listener, ssl.Purpose.SERVER_AUTH)
    context.check_hostname = setting("ssl.endpoint.identification.algorithm").lower() == "https"
    context.verify_mode = ssl.CERT_REQUIRED
    _set_protocols(context, setting("ssl.enabled.protocols"), listener)
    suites = setting("ssl.cipher.suites")
    if suites:
        _set_ciphers(context, suites, listener)
    return context


# --- key store -----------------------------------------------------------------------------------

def _load_key_store(context, setting, listener) -> None:
    store_type = setting("ssl.keystore.type")
    location = setting("ssl.keystore.location")
    chain = _secret(setting("ssl.keystore.certificate.chain"))
    key_password = _secret(setting("ssl.key.password"))
    if chain is not None:
        if store_type != "PEM":
            raise TlsConfigError(f"listener {listener}: ssl.keystore.certificate.chain needs "
                                 f"ssl.keystore.type=PEM (it is {store_type})", "ssl.keystore.type")
        key = _secret(setting("ssl.keystore.key"))
        if key is None:
            raise TlsConfigError(f"listener {listener}: ssl.keystore.certificate.chain is set "
                                 "but ssl.keystore.key is not", "ssl.keystore.key")
        _load_pem_text(context, key + "\n" + chain, key_password, listener, "ssl.keystore.key")
        return
    data = _read(location, "ssl.keystore.location", listener)
    if store_type == "PEM" or (store_type != "PKCS12" and data.lstrip().startswith(b"-----")):
        if store_type != "PEM":
            raise TlsConfigError(f"listener {listener}: {location} is a PEM file but "
                                 f"ssl.keystore.type is {store_type}; set ssl.keystore.type=PEM",
                                 "ssl.keystore.type")
        try:
            context.load_cert_chain(location, password=key_password or None)
        except (ssl.SSLError, OSError) as exc:
            raise TlsConfigError(f"listener {listener}: cannot load the key and certificate "
                                 f"chain from {location} ({_reason(exc)}); it must hold a PKCS#8 "
                                 "private key (ssl.key.password if encrypted) and the "
                                 "certificate chain", "ssl.keystore.location") from None
        return
    store_password = _secret(setting("ssl.keystore.password"))
    key, cert, extra = _pkcs12(data, store_password, location, store_type, listener,
                               "ssl.keystore.location")
    if key is None or cert is None:
        raise TlsConfigError(f"listener {listener}: {location} holds no private key with a "
                             "certificate", "ssl.keystore.location")
    from cryptography.hazmat.primitives import serialization

    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    pem += "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in [cert, *extra])
    _load_pem_text(context, pem, None, listener, "ssl.keystore.location")


def _load_pem_text(context, pem: str, password: str | None, listener: str, key: str) -> None:
    fd, path = tempfile.mkstemp(prefix="kbroker-key-", suffix=".pem")  # mode 0600
    try:
        with os.fdopen(fd, "w") as f:
            f.write(pem)
        context.load_cert_chain(path, password=password or None)
    except (ssl.SSLError, OSError) as exc:
        raise TlsConfigError(f"listener {listener}: cannot load the PEM key and certificate chain "
                             f"({_reason(exc)})", key) from None
    finally:
        os.unlink(path)


def _pkcs12(data: bytes, password: str | None, location: str, store_type: str, listener: str,
            key: str):
    try:
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError:
        raise TlsConfigError(f"listener {listener}: reading the PKCS12 store {location} needs the "
                             "'cryptography' package (pip install cryptography), or use PEM",
                             key) from None
    try:
        return pkcs12.load_key_and_certificates(data, password.encode() if password else None)
    except ValueError as exc:
        if store_type == "JKS":
            raise TlsConfigError(f"listener {listener}: {location} is not a PKCS12 or PEM file; "
                                 "kbroker cannot read JKS stores (convert it: keytool "
                                 "-importkeystore -deststoretype PKCS12, and set "
                                 f"{key.rsplit('.', 1)[0]}.type=PKCS12)", key) from None
        raise TlsConfigError(f"listener {listener}: cannot open the PKCS12 store {location} "
                             f"({exc}; check its password)", key) from None


def _read(location: str | None, key: str, listener: str) -> bytes:
    if location is None:
        raise TlsConfigError(f"listener {listener}: {key} is not set", key)
    try:
        with open(location, "rb") as f:
            return f.read()
    except OSError as exc:
        raise TlsConfigError(f"listener {listener}: cannot read {key} {location} "
                             f"({exc.strerror})", key) from None


# --- trust store ---------------------------------------------------------------------------------

def _load_trust_store(context, setting, listener, purpose=ssl.Purpose.CLIENT_AUTH) -> None:
    inline = _secret(setting("ssl.truststore.certificates"))
    location = setting("ssl.truststore.location")
    if inline is not None:
        _load_cas(context, inline, listener, "ssl.truststore.certificates")
        return
    if location is None:
        context.load_default_certs(purpose)
        return
    data = _read(location, "ssl.truststore.location", listener)
    store_type = setting("ssl.truststore.type")
    if store_type == "PEM" or data.lstrip().startswith(b"-----"):
        _load_cas(context, data.decode("ascii", "replace"), listener, "ssl.truststore.location")
        return
    from_store = _pkcs12_certificates(data, _secret(setting("ssl.truststore.password")), location,
                                      store_type, listener)
    _load_cas(context, from_store, listener, "ssl.truststore.location")


def _pkcs12_certificates(data, password, location, store_type, listener) -> str:
    key, cert, extra = _pkcs12(data, password, location, store_type, listener,
                               "ssl.truststore.location")
    from cryptography.hazmat.primitives import serialization

    certs = [c for c in [cert, *extra] if c is not None]
    if not certs:
        raise TlsConfigError(f"listener {listener}: {location} holds no certificates",
                             "ssl.truststore.location")
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)


def _load_cas(context, pem: str, listener: str, key: str) -> None:
    try:
        context.load_verify_locations(cadata=pem)
    except (ssl.SSLError, ValueError) as exc:
        raise TlsConfigError(f"listener {listener}: cannot load trusted certificates from {key} "
                             f"({_reason(exc)})", key) from None


# --- protocols and ciphers -----------------------------------------------------------------------

def _set_protocols(context, enabled: list[str], listener: str) -> None:
    versions = sorted(_VERSIONS[v] for v in enabled)
    if not versions:
        raise TlsConfigError(f"listener {listener}: ssl.enabled.protocols is empty",
                             "ssl.enabled.protocols")
    context.minimum_version = versions[0]
    context.maximum_version = versions[-1]


def openssl_cipher_name(name: str) -> str:
    """Java's IANA suite name (``TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384``) in OpenSSL's spelling
    (``ECDHE-RSA-AES256-GCM-SHA384``); other names are returned unchanged."""
    if not name.startswith("TLS_") or "_WITH_" not in name:
        return name
    exchange, _, cipher = name[4:].partition("_WITH_")
    exchange = {"RSA": ""}.get(exchange, exchange.replace("_", "-"))
    cipher = (cipher.replace("AES_128_", "AES128-").replace("AES_256_", "AES256-")
              .replace("CHACHA20_POLY1305_SHA256", "CHACHA20-POLY1305").replace("_", "-"))
    if cipher.startswith(("AES128-CBC-SHA", "AES256-CBC-SHA")):
        cipher = cipher.replace("CBC-", "")
    return f"{exchange}-{cipher}" if exchange else cipher


def _set_ciphers(context, suites: list[str], listener: str) -> None:
    names = []
    for suite in suites:
        if suite in _TLS13_SUITES:
            raise TlsConfigError(f"listener {listener}: ssl.cipher.suites lists the TLS 1.3 suite "
                                 f"{suite}; Python's ssl cannot restrict TLS 1.3 suites (all are "
                                 "offered), so list only TLS 1.2 suites", "ssl.cipher.suites")
        name = openssl_cipher_name(suite)
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).set_ciphers(name)
        except ssl.SSLError:
            raise TlsConfigError(f"listener {listener}: ssl.cipher.suites: unknown or unavailable "
                                 f"cipher suite {suite}", "ssl.cipher.suites") from None
        names.append(name)
    context.set_ciphers(":".join(names))


def _reason(exc: Exception) -> str:
    return getattr(exc, "reason", None) or getattr(exc, "strerror", None) or str(exc)
