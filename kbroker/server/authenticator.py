"""Per-connection SASL authentication: the state machine a SASL listener runs before requests.

States (Kafka's ``SaslServerAuthenticator``)::

    HANDSHAKE ──SaslHandshake v1──> AUTHENTICATE ──SaslAuthenticate (done)──> DONE or SESSION
        │   └────SaslHandshake v0──> RAW_TOKENS (size-prefixed tokens, no header) ──┘
        └─ ApiVersions: answered, state unchanged
    SESSION ──SaslHandshake (re-authentication)──> HANDSHAKE (same mechanism required)
    any failure ──> FAILED (the answer is held back, then the connection closes)

Before DONE only ApiVersions, SaslHandshake and SaslAuthenticate are served; anything else closes
the connection with a log line (Kafka: IllegalSaslStateException). Frames are capped at
``sasl.server.max.receive.size`` (512 KiB), enforced by the connection before any buffer is
grown. A second SaslHandshake or an early SaslAuthenticate gets ILLEGAL_SASL_STATE; a mechanism
not enabled on the listener gets UNSUPPORTED_SASL_MECHANISM and the enabled list; bad credentials
get SASL_AUTHENTICATION_FAILED with the mechanism's message. Every failure closes the connection
after ``connection.failed.authentication.delay.ms`` (KIP-306) and is logged once per client
address. On success the connection's principal becomes ``User:<authorization id>``.

Re-authentication (KIP-368). A session has a lifetime when ``connections.max.reauth.ms`` (per
listener and mechanism) is positive or the credential expires (an OAUTHBEARER token's ``exp``):
the smaller of the two, sent as SaslAuthenticate's ``session_lifetime_ms`` (v1+). Without one the
connection goes to DONE and its frames go straight to the dispatcher. With one it is in SESSION
and its frames still pass here first, as in Kafka's SocketServer: a SaslHandshake (at most one a
second) re-runs the exchange on the open connection, which must keep the mechanism and the
principal (Kafka's messages otherwise, then the connection closes); any other request after the
session expired closes the connection. Clients that cannot re-authenticate (SaslHandshake v0 or
SaslAuthenticate v0) get the same expiry without being told, as in Kafka.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from dataclasses import dataclass, field
from typing import Callable

from kbroker.protocol import messages
from kbroker.protocol.errors import Errors
from kbroker.protocol.messages import ADVERTISED, API_BY_KEY
from kbroker.protocol.messages.headers import RequestHeader, ResponseHeader
from kbroker.protocol.primitives import DecodeError
from kbroker.security.sasl import AuthenticationFailed, InvalidCredentials, new_server
from kbroker.server.connection import Closed

log = logging.getLogger("kbroker.auth")

SASL_HANDSHAKE, API_VERSIONS, SASL_AUTHENTICATE = 17, 18, 36
_KEY_VERSION_CORRELATION = struct.Struct(">hhi")
_API_KEY = struct.Struct(">h")
# Kafka's KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS: a connection may start at most one
# re-authentication a second; an earlier SaslHandshake goes to KafkaApis (ILLEGAL_SASL_STATE).
MIN_REAUTH_INTERVAL_S = 1.0
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
    token_lookup: Callable | None = None  # delegation tokens (SCRAM with tokenauth=true)
    oauth_options: object | None = None  # OAUTHBEARER's validator (JAAS options, or JWKS)
    jwks_refresher: object | None = None  # kbroker.server.jwks.JwksRefresher, for a JWKS
    gssapi_acceptor: object | None = None  # GSSAPI's keytab credentials and short-name rules
    max_reauth_ms: dict[str, int] = field(default_factory=dict)  # per mechanism; <= 0: none
    max_receive_size: int = 524288
    failure_delay_ms: int = 100
    failures: FailureLog = field(default_factory=FailureLog)

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")


class SaslAuthenticator:
    def __init__(self, security: ListenerSecurity, dispatch: Callable, wall_clock=time.time):
        self._security = security
        self._dispatch = dispatch  # the broker's handle_frame: ApiVersions, and the session
        self._wall_clock = wall_clock  # for credential expiry (OAUTHBEARER's exp)
        self._state = "HANDSHAKE"
        self._mechanism_server = None
        # The authenticated session; re-authentication must keep its mechanism and principal.
        self._mechanism: str | None = None
        self._principal: str | None = None
        self._session_expiry: float | None = None  # event-loop time; None: never expires
        self._reauthenticating = False
        self._reauth_started: float | None = None
        self._bad_mechanism = ""

    def handle(self, frame: memoryview, connection):
        state = self._state
        if state == "SESSION":
            return self._in_session(frame, connection)
        if state == "FAILED":
            return None  # the connection is closing; nothing more is read into anything
        if state == "RAW_TOKENS":
            return self._raw_token(bytes(frame), connection)
        if state == "REAUTH_BAD_MECHANISM":
            # Kafka answers the handshake, then fails the next message without a response.
            return self._fail(connection, None, self._bad_mechanism)
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
                        "%s (only ApiVersions, SaslHandshake and SaslAuthenticate are allowed)",
                        connection.peer, self._security.name,
                        info.name if info else f"api key {api_key}", self._what)
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

    @property
    def _what(self) -> str:
        return "re-authentication" if self._reauthenticating else "authentication"

    # --- an authenticated session that expires (KIP-368) ---------------------------------------

    def _in_session(self, frame: memoryview, connection):
        """Kafka's SocketServer, before a request reaches KafkaApis: a SaslHandshake starts
        re-authentication (at most once a second; otherwise KafkaApis answers it with
        ILLEGAL_SASL_STATE), and any other request after the session expired closes the
        connection."""
        now = asyncio.get_running_loop().time()
        if len(frame) >= 2 and _API_KEY.unpack_from(frame, 0)[0] == SASL_HANDSHAKE and (
                self._reauth_started is None
                or now - self._reauth_started >= MIN_REAUTH_INTERVAL_S):
            self._reauth_started = now
            self._reauthenticating = True
            self._state = "HANDSHAKE"
            connection.reauthenticating()  # Kafka reads the exchange's frames with the SASL cap
            return self.handle(frame, connection)
        if now > self._session_expiry:
            log.info("closing connection from %s on listener %s: its SASL session (%s) expired "
                     "%.1f s ago without re-authentication", connection.peer,
                     self._security.name, self._principal, now - self._session_expiry)
            raise Closed()
        return self._dispatch(frame, connection)

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
        if self._reauthenticating and request.mechanism != self._mechanism:
            self._bad_mechanism = (f"SASL mechanism '{request.mechanism}' requested by client is "
                                   f"not supported for re-authentication of mechanism "
                                   f"'{self._mechanism}'")
            self._state = "REAUTH_BAD_MECHANISM"
            return reply(response_cls(error_code=Errors.NONE.code, mechanisms=enabled))
        security = self._security
        self._mechanism_server = new_server(request.mechanism, security.plain_users,
                                            security.scram_lookup, security.oauth_options,
                                            security.gssapi_acceptor, security.token_lookup)
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
            lifetime_ms = self._complete(connection, server) if server.complete else 0
        except AuthenticationFailed as exc:
            message, reason = self._failure_text(server, exc)
            return self._fail(connection, reply(response_cls(
                error_code=Errors.SASL_AUTHENTICATION_FAILED.code, error_message=message)),
                reason)
        # (v0 responses cannot carry session_lifetime_ms: such a client is not told, and its
        # connection closes at its first request after the session expires, as in Kafka.)
        return reply(response_cls(error_code=Errors.NONE.code, auth_bytes=challenge,
                                  session_lifetime_ms=lifetime_ms))

    def _raw_token(self, token: bytes, connection):
        """After SaslHandshake v0 the tokens travel bare; a failure can only close."""
        server = self._mechanism_server
        try:
            challenge = server.evaluate(token)
            if server.complete:
                self._complete(connection, server)
        except AuthenticationFailed as exc:
            return self._fail(connection, None, self._failure_text(server, exc)[1])
        return [_SIZE.pack(len(challenge)), challenge]

    def _complete(self, connection, server) -> int:
        """The exchange succeeded: (re)start the session; returns its lifetime in ms (0: none)."""
        principal = f"User:{server.authorization_id}"
        if self._reauthenticating and principal != self._principal:
            raise AuthenticationFailed(
                f"Cannot change principals during re-authentication from "
                f"{self._principal.replace(':', '.', 1)}: {principal.replace(':', '.', 1)}")
        lifetime_ms = self._session_lifetime_ms(server)
        now = asyncio.get_running_loop().time()
        self._session_expiry = now + lifetime_ms / 1000 if lifetime_ms is not None else None
        self._mechanism, self._principal = server.mechanism, principal
        self._reauthenticating = False
        # Kafka's KafkaPrincipal.tokenAuthenticated: such a connection may not ask for tokens.
        connection.token_authenticated = getattr(server, "token_authenticated", False)
        if self._session_expiry is None:
            self._state = "DONE"  # nothing left to watch: frames go straight to the broker
            connection.authenticated(principal)
        else:
            self._state = "SESSION"
            connection.authenticated(principal, self.handle)
        return lifetime_ms or 0

    def _session_lifetime_ms(self, server) -> int | None:
        """Kafka's ReauthInfo: the smaller of connections.max.reauth.ms (for this mechanism) and
        what is left of the credential's lifetime; None when neither applies."""
        max_reauth = self._security.max_reauth_ms.get(server.mechanism, 0)
        credential_expiry_ms = getattr(server, "credential_expiry_ms", None)
        bounds = []
        if max_reauth > 0:
            bounds.append(max_reauth)
        if credential_expiry_ms is not None:
            bounds.append(credential_expiry_ms - int(self._wall_clock() * 1000))
        return max(0, min(bounds)) if bounds else None

    def _failure_text(self, server, exc: AuthenticationFailed) -> tuple[str, str]:
        """(message for the client, reason for the log)."""
        if isinstance(exc, InvalidCredentials):
            message = (f"Authentication failed during {self._what} due to invalid credentials "
                       f"with SASL mechanism {server.mechanism}")
        else:
            message = str(exc)
        return message, f"{server.mechanism} {self._what}: {exc.detail or exc}"

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
