"""What an unauthenticated or misbehaving client gets, over raw sockets: Kafka's error codes,
closed connections, a frame cap before authentication, failures delayed and logged once per
address, and a broker that keeps serving everyone else. The SASL checks run on both SASL listener
types (SASL_PLAINTEXT, SASL_SSL), the TLS ones on both TLS types (SSL, SASL_SSL); the ACL denials
per listener type are in test_acls_denials.py."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import socket
import ssl
import struct

import pytest

from kbroker.protocol import messages
from kbroker.protocol.errors import Errors
from kbroker.protocol.messages import ADVERTISED, API_BY_KEY
from tests.integration.clients import Wire, wait_until

SASL_HANDSHAKE, API_VERSIONS, SASL_AUTHENTICATE, METADATA, ALTER_SCRAM = 17, 18, 36, 3, 51
SASL_LISTENERS = ["SASL_PLAINTEXT", "SASL_SSL"]
TLS_LISTENERS = ["SSL", "SASL_SSL"]


@pytest.fixture
def connect(full_broker, ca):
    """``connect(listener)``: a raw Wire to the full broker, through TLS where the listener
    has it."""
    def make(listener: str) -> Wire:
        wire = Wire(full_broker.endpoints[listener])
        if listener in TLS_LISTENERS:
            context = ssl.create_default_context(cafile=str(ca.ca_pem))
            wire.sock = context.wrap_socket(wire.sock, server_hostname="127.0.0.1")
        return wire
    return make


def handshake(wire: Wire, mechanism: str, version: int = 1):
    return wire.call(SASL_HANDSHAKE, version, messages.request_class(SASL_HANDSHAKE)(
        mechanism=mechanism))


def authenticate(wire: Wire, token: bytes, version: int = 2):
    return wire.call(SASL_AUTHENTICATE, version, messages.request_class(SASL_AUTHENTICATE)(
        auth_bytes=token))


def metadata_request():
    return messages.request_class(METADATA)(topics=None, allow_auto_topic_creation=False)


def still_serving(broker):
    for name in ("PLAINTEXT", "SASL_PLAINTEXT"):
        with Wire(broker.endpoints[name]) as wire:
            assert wire.api_versions().error_code == 0
    assert broker.alive()


@pytest.mark.parametrize("listener", SASL_LISTENERS)
def test_only_api_versions_and_sasl_before_authentication(full_broker, connect, listener):
    with connect(listener) as wire:
        assert wire.api_versions().error_code == 0  # allowed
        wire.send(METADATA, 12, metadata_request())
        assert wire.closed_by_broker()
    # The broker's log reaches the file through a pipe: wait for the line, do not race it.
    wait_until(lambda: "Metadata request before authentication" in full_broker.log(),
               message="no log line names the Metadata request before authentication")
    still_serving(full_broker)


@pytest.mark.parametrize("listener", SASL_LISTENERS)
def test_every_other_api_before_authentication_closes(full_broker, connect, listener):
    """Every API but ApiVersions and the SASL ones, unauthenticated: the connection closes at
    its header (Kafka: "Unexpected Kafka request of type ... during SASL handshake"); nothing
    past the header is read."""
    for api_key in sorted(set(ADVERTISED) - {API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE}):
        with connect(listener) as wire:
            header = struct.pack(">hhih", api_key, ADVERTISED[api_key][0], 7, -1)
            wire.send_frame(header + b"\xff" * 16)
            assert wire.closed_by_broker(), API_BY_KEY[api_key].name
    still_serving(full_broker)


@pytest.mark.parametrize("listener", SASL_LISTENERS)
def test_unsupported_mechanism(connect, listener):
    with connect(listener) as wire:
        response = handshake(wire, "GSSAPI")
        assert response.error_code == Errors.UNSUPPORTED_SASL_MECHANISM.code
        assert response.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert wire.closed_by_broker()


@pytest.mark.parametrize("token, words", [
    (b"\0alice\0wrong", "Invalid username or password"),
    (b"\0mallory\0alice-secret", "Invalid username or password"),
    (b"\0alice", "expected 3 tokens"),  # truncated
    (b"", "expected 3 tokens"),
    (b"bob\0alice\0alice-secret", "authorization id"),
])
@pytest.mark.parametrize("listener", SASL_LISTENERS)
def test_bad_plain_tokens(full_broker, connect, listener, token, words):
    with connect(listener) as wire:
        assert handshake(wire, "PLAIN").error_code == 0
        response = authenticate(wire, token)
        assert response.error_code == Errors.SASL_AUTHENTICATION_FAILED.code
        assert words in response.error_message
        assert wire.closed_by_broker()
    still_serving(full_broker)


@pytest.mark.parametrize("listener", SASL_LISTENERS)
def test_sasl_state_errors(connect, listener):
    with connect(listener) as wire:  # authenticate before handshake
        assert authenticate(wire, b"\0alice\0alice-secret").error_code == \
            Errors.ILLEGAL_SASL_STATE.code
        assert wire.closed_by_broker()
    with connect(listener) as wire:  # after authentication (no connections.max.reauth.ms)
        assert handshake(wire, "PLAIN").error_code == 0
        response = authenticate(wire, b"\0alice\0alice-secret")
        assert response.error_code == 0 and response.session_lifetime_ms == 0
        assert wire.call(METADATA, 12, metadata_request()).brokers
        assert handshake(wire, "PLAIN").error_code == Errors.ILLEGAL_SASL_STATE.code
        assert wire.call(METADATA, 12, metadata_request()).brokers  # still open


@pytest.mark.parametrize("listener", ["PLAINTEXT", "SSL"])
def test_sasl_on_a_listener_without_sasl(connect, listener):
    with connect(listener) as wire:
        assert handshake(wire, "PLAIN").error_code == Errors.ILLEGAL_SASL_STATE.code
        assert authenticate(wire, b"\0alice\0alice-secret").error_code == \
            Errors.ILLEGAL_SASL_STATE.code
        assert wire.call(METADATA, 12, metadata_request()).brokers


@pytest.mark.parametrize("listener", SASL_LISTENERS)
def test_v0_raw_token_form(connect, listener):
    """SaslHandshake v0: the token then travels without a Kafka header, as Kafka still accepts."""
    with connect(listener) as wire:
        assert handshake(wire, "PLAIN", version=0).error_code == 0
        wire.send_frame(b"\0bob\0bob-secret")
        assert wire.recv_frame() == b""
        assert wire.call(METADATA, 12, metadata_request()).brokers


@pytest.mark.parametrize("listener", SASL_LISTENERS)
def test_oversized_frame_before_authentication(full_broker, connect, listener):
    """sasl.server.max.receive.size (512 KiB): a larger declared frame closes the connection
    before a buffer of that size exists."""
    with connect(listener) as wire:
        wire.send_raw(struct.pack(">i", 524289) + b"\0" * 1000)
        assert wire.closed_by_broker()
    # The broker's log reaches the file through a pipe: wait for the line, do not race it.
    wait_until(lambda: "sasl.server.max.receive.size" in full_broker.log(),
               message="no log line names sasl.server.max.receive.size")
    with connect(listener) as wire:  # 512 KiB itself is fine
        wire.send_raw(struct.pack(">i", 524288) + b"\0" * 1000)
        assert not wire.closed_by_broker(timeout=0.5)
    still_serving(full_broker)


# --- SCRAM over the raw wire --------------------------------------------------------------------

def _create_scram_user(broker, user: str, password: str, iterations: int = 4096):
    cls = messages.request_class(ALTER_SCRAM)
    salt = os.urandom(16)
    salted = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, iterations)
    with Wire(broker.endpoints["PLAINTEXT"]) as wire:
        response = wire.call(ALTER_SCRAM, 0, cls(deletions=[], upsertions=[
            cls.ScramCredentialUpsertion(name=user, mechanism=2, iterations=iterations, salt=salt,
                                         salted_password=salted)]))
    assert [r.error_code for r in response.results] == [0]


def _scram(wire, user, password, tamper=None):
    """RFC 5802 client; ``tamper(nonce) -> nonce`` changes the final message's nonce."""
    assert handshake(wire, "SCRAM-SHA-512").error_code == 0
    client_nonce = base64.b64encode(os.urandom(18)).decode()
    first_bare = f"n={user},r={client_nonce}"
    response = authenticate(wire, f"n,,{first_bare}".encode())
    assert response.error_code == 0
    server_first = response.auth_bytes.decode()
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    assert fields["r"].startswith(client_nonce)
    nonce = tamper(fields["r"]) if tamper else fields["r"]
    salted = hashlib.pbkdf2_hmac("sha512", password.encode(), base64.b64decode(fields["s"]),
                                 int(fields["i"]))
    client_key = hmac.digest(salted, b"Client Key", "sha512")
    without_proof = f"c=biws,r={nonce}"
    auth_message = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.digest(hashlib.sha512(client_key).digest(), auth_message, "sha512")
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
    return authenticate(wire, f"{without_proof},p={proof}".encode())


@pytest.mark.parametrize("listener", SASL_LISTENERS)
def test_scram_exchange_and_tampering(full_broker, connect, listener):
    _create_scram_user(full_broker, "dave", "dave-secret")
    with connect(listener) as wire:
        response = _scram(wire, "dave", "dave-secret")
        assert response.error_code == 0 and response.auth_bytes.startswith(b"v=")
        assert wire.call(METADATA, 12, metadata_request()).brokers
    # Kafka's generic text for every SCRAM failure (the reason is only in the broker's log).
    generic = "invalid credentials with SASL mechanism SCRAM-SHA-512"
    cases = [("dave", "wrong", None, generic),
             ("dave", "dave-secret", lambda n: n[:-1] + ("A" if n[-1] != "A" else "B"), generic),
             ("dave", "dave-secret", lambda n: n[:len(n) // 2], generic)]
    for user, password, tamper, words in cases:
        with connect(listener) as wire:
            response = _scram(wire, user, password, tamper)
            assert response.error_code == Errors.SASL_AUTHENTICATION_FAILED.code
            assert words in response.error_message
            assert wire.closed_by_broker()
    for first in (b"n,,n=nobody,r=abc",  # unknown user
                  b"\xff\x00garbage",  # garbage first message
                  b"n,,n=dave",  # truncated: no nonce
                  b"n,"):  # truncated gs2 header
        with connect(listener) as wire:
            assert handshake(wire, "SCRAM-SHA-512").error_code == 0
            response = authenticate(wire, first)
            assert response.error_code == Errors.SASL_AUTHENTICATION_FAILED.code, first
            assert wire.closed_by_broker()
    with connect(listener) as wire:  # truncated final message: the proof cut off
        assert handshake(wire, "SCRAM-SHA-512").error_code == 0
        response = authenticate(wire, b"n,,n=dave,r=abcdef")
        nonce = dict(p.split("=", 1) for p in response.auth_bytes.decode().split(","))["r"]
        response = authenticate(wire, f"c=biws,r={nonce},p=".encode()[:-3])
        assert response.error_code == Errors.SASL_AUTHENTICATION_FAILED.code
        assert wire.closed_by_broker()
    still_serving(full_broker)


def test_scram_credential_errors(full_broker):
    cls = messages.request_class(ALTER_SCRAM)
    up = lambda name, mechanism=2, iterations=4096: cls.ScramCredentialUpsertion(  # noqa: E731
        name=name, mechanism=mechanism, iterations=iterations, salt=b"s" * 16,
        salted_password=b"p" * 64)
    with Wire(full_broker.endpoints["PLAINTEXT"]) as wire:
        response = wire.call(ALTER_SCRAM, 0, cls(
            deletions=[cls.ScramCredentialDeletion(name="ghost", mechanism=1)],
            upsertions=[up("few", iterations=100), up("many", iterations=20000),
                        up("odd", mechanism=7), up("twice"), up("twice"), up("")]))
    errors = {r.user: r.error_code for r in response.results}
    assert errors == {"ghost": Errors.RESOURCE_NOT_FOUND.code,
                      "few": Errors.UNACCEPTABLE_CREDENTIAL.code,
                      "many": Errors.UNACCEPTABLE_CREDENTIAL.code,
                      "odd": Errors.UNSUPPORTED_SASL_MECHANISM.code,
                      "twice": Errors.DUPLICATE_RESOURCE.code,
                      "": Errors.UNACCEPTABLE_CREDENTIAL.code}


# --- TLS ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("listener", TLS_LISTENERS)
def test_tls_garbage_and_plaintext_on_a_tls_port(full_broker, ca, listener):
    host, port = full_broker.endpoints[listener].rsplit(":", 1)
    for payload in (os.urandom(4096), b"\x00\x00\x00\x10" + b"\x00" * 16):
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(payload)
            sock.settimeout(5)
            try:
                while sock.recv(65536):
                    pass  # a TLS alert, then EOF
            except ConnectionResetError:
                pass
    context = ssl.create_default_context(cafile=str(ca.ca_pem))
    with socket.create_connection((host, int(port)), timeout=5) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            tls.sendall(struct.pack(">i", 4) + b"\0" * 4)  # too short for a header: closed
            assert tls.recv(100) == b""
    still_serving(full_broker)


def test_failures_are_logged_once_per_address(full_broker):
    for _ in range(3):
        with Wire(full_broker.endpoints["SASL_PLAINTEXT"]) as wire:
            handshake(wire, "PLAIN")
            authenticate(wire, b"\0alice\0nope")
    lines = [l for l in full_broker.log().splitlines() if "failed authentication with" in l]
    assert len(lines) == 1, lines
