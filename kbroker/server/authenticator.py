"""Per-connection SASL authentication: the state machine a SASL listener runs before requests.

States (Kafka's ``SaslServerAuthenticator``)::

    HANDSHAKE ──SaslHandshake v1──> AUTHENTICATE ──SaslAuthenticate (mechanism done)──> DONE
        │   └────SaslHandshake v0──> RAW_TOKENS (size-prefixed tokens, no Kafka header) ──> DONE
        └─ ApiVersions: answered, state unchanged
    any failure ──> FAILED (the answer is held back, then the connection closes)

Before DONE only ApiVersions, SaslHandshake and SaslAuthenticate are served; anything else closes
the connection with a log line (Kafka: IllegalSaslStateException). Frames are capped at
``sasl.server.max.receive.size`` (512 KiB), enforced by the connection before any buffer is
grown. A second SaslHandshake or an early SaslAuthenticate gets ILLEGAL_SASL_STATE; a mechanism
not enabled on the listener gets UNSUPPORTED_SASL_MECHANISM and the enabled list; bad credentials
get SASL_AUTHENTICATION_FAILED with the mechanism's message. Every failure closes the connection
after ``connection.failed.authentication.delay.ms`` (KIP-306) and is logged once per client
address. On success the connection's principal becomes ``User:<authorization id>`` and its frames
go to the dispatcher from then on. Re-authentication (KIP-368) is not implemented:
``connections.max.reauth.ms`` is refused, and ``session_lifetime_ms`` is 0.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from dataclasses import dataclass, field
from typing import Callable

from kbroker.protocol import messages
from kbroker.protocol.errors import Errors
from kbroker.protocol.messages import ADVERTISED, API_BY_KEY
from kbroker.protocol.messages.headers import RequestHeader, ResponseHeader
from kbroker.protocol.primitives import DecodeError
from kbroker.security.sasl import AuthenticationFailed, new_server
from kbroker.server.connection import Closed

log = logging.getLogger("kbroker.auth")

SASL_HANDSHAKE, API_VERSIONS, SASL_AUTHENTICATE = 17, 18, 36
_KEY_VERSION_CORRELATION = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")
_MAX_LOGGED_ADDRESSES = 10_000


class FailureLog:
    """Logs an authentication failure once per client address (a guessing client would flood
    the log otherwise); later failures from that address are only counted."""

    def __init__(self):
        self.counts: dict[str, int] = {}

    def failed(self, address: str, listener: str, reason: str) -> None:
        if address in self.counts:
            self.counts[address] += 1
            return
        if len(self.counts) >= _MAX_LOGGED_ADDRESSES:
            self.counts.clear()
        self.counts[address] = 1
        log.warning("failed authentication with %s on listener %s (%s); further failures from "
                    "this address are not logged", address, listener, reason)


@dataclass
class ListenerSecurity:
    """What a listener's connections need to secure themselves; built once at start-up."""

    name: str
    protocol: str
    ssl_context: object | None = None
    principal_mapper: object | None = None
    mechanisms: list[str] = field(default_factory=list)
    plain_users: dict[str, str] = field(default_factory=dict)
    scram_lookup: Callable | None = None
    max_receive_size: int = 524288
    failure_delay_ms: int = 100
    failures: FailureLog = field(default_factory=FailureLog)

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")


class SaslAuthenticator:
    def __init__(self, security: ListenerSecurity, dispatch: Callable):
        self._security = security
        self._dispatch = dispatch  # the broker's handle_frame, for ApiVersions
        self._state = "HANDSHAKE"
        self._mechanism_server = None

    def handle(self, frame: memoryview, connection):
        state = self._state
        if state == "FAILED":
            return None  # the connection is closing; nothing more is read into anything
        if state == "RAW_TOKENS":
            return self._raw_token(bytes(frame), connection)
        if len(frame) < 8:
            log.warning("closing connection from %s: %d-byte frame during SASL authentication",
                        connection.peer, len(frame))
            raise Closed()
        api_key, version, correlation_id = _KEY_VERSION_CORRELATION.unpack_from(frame, 0)
        if api_key == API_VERSIONS:
            return self._dispatch(frame, connection)
        if api_key not in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
            info = API_BY_KEY.get(api_key)
            log.warning("closing connection from %s on SASL listener %s: %s request before "
                        "authentication (only ApiVersions, SaslHandshake and SaslAuthenticate "
                        "are allowed)", connection.peer, self._security.name,
                        info.name if info else f"api key {api_key}")
            raise Closed()
        lo, hi = ADVERTISED[api_key]
        if not lo <= version <= hi:
            log.warning("closing connection from %s: %s v%d is not supported (we serve v%d-%d)",
                        connection.peer, API_BY_KEY[api_key].name, version, lo, hi)
            raise Closed()
        try:
            header, pos = RequestHeader.read(frame, 0,
                                             messages.request_header_version(api_key, version))
            request, _ = messages.request_class(api_key).read(frame, pos, version)
        except DecodeError as exc:
            log.warning("closing connection from %s: cannot decode %s v%d: %s", connection.peer,
                        API_BY_KEY[api_key].name, version, exc)
            raise Closed() from None
        reply = lambda response: _encode(api_key, version, correlation_id, response)  # noqa
        if api_key == SASL_HANDSHAKE:
            return self._handshake(request, version, reply, connection)
        return self._authenticate(request, reply, connection)

    # --- the steps -----------------------------------------------------------------------------

    def _handshake(self, request, version, reply, connection):
        response_cls = messages.response_class(SASL_HANDSHAKE)
        enabled = self._security.mechanisms
        if self._state != "HANDSHAKE":
            return self._fail(connection, reply(response_cls(
                error_code=Errors.ILLEGAL_SASL_STATE.code, mechanisms=enabled)),
                "a second SaslHandshake")
        if request.mechanism not in enabled:
            return self._fail(connection, reply(response_cls(
                error_code=Errors.UNSUPPORTED_SASL_MECHANISM.code, mechanisms=enabled)),
                f"unsupported SASL mechanism {request.mechanism!r}")
        self._mechanism_server = new_server(request.mechanism, self._security.plain_users,
                                            self._security.scram_lookup)
        self._state = "AUTHENTICATE" if version >= 1 else "RAW_TOKENS"
        return reply(response_cls(error_code=Errors.NONE.code, mechanisms=enabled))

    def _authenticate(self, request, reply, connection):
        response_cls = messages.response_class(SASL_AUTHENTICATE)
        if self._state != "AUTHENTICATE":
            message = "SaslAuthenticate before SaslHandshake"
            return self._fail(connection, reply(response_cls(
                error_code=Errors.ILLEGAL_SASL_STATE.code, error_message=message)), message)
        server = self._mechanism_server
        try:
            challenge = server.evaluate(request.auth_bytes)
        except AuthenticationFailed as exc:
            return self._fail(connection, reply(response_cls(
                error_code=Errors.SASL_AUTHENTICATION_FAILED.code, error_message=str(exc))),
                f"{server.mechanism}: {exc}")
        if server.complete:
            self._done(connection, server)
        return reply(response_cls(error_code=Errors.NONE.code, auth_bytes=challenge,
                                  session_lifetime_ms=0))

    def _raw_token(self, token: bytes, connection):
        """After SaslHandshake v0 the tokens travel bare; a failure can only close."""
        server = self._mechanism_server
        try:
            challenge = server.evaluate(token)
        except AuthenticationFailed as exc:
            return self._fail(connection, None, f"{server.mechanism}: {exc}")
        if server.complete:
            self._done(connection, server)
        return [_SIZE.pack(len(challenge)), challenge]

    def _done(self, connection, server) -> None:
        self._state = "DONE"
        connection.authenticated(f"User:{server.authorization_id}")

    def _fail(self, connection, parts, reason: str):
        """Hold the answer back for connection.failed.authentication.delay.ms, send it, close."""
        self._state = "FAILED"
        self._security.failures.failed(connection.ip, self._security.name, reason)

        def send_and_close():
            if not connection.closed and parts is not None:
                connection.transport.writelines(parts)
            connection.close()

        asyncio.get_running_loop().call_later(self._security.failure_delay_ms / 1000,
                                              send_and_close)
        return None


def _encode(api_key: int, version: int, correlation_id: int, response) -> list:
    header = ResponseHeader(correlation_id=correlation_id).to_bytes(
        messages.response_header_version(api_key, version))
    body = b"".join(bytes(part) for part in response.encode(version))
    return [_SIZE.pack(len(header) + len(body)) + header, body]
