"""A minimal Kafka client for broker-to-broker requests (a follower's Fetch, ListOffsets and
OffsetForLeaderEpoch to its leader).

One connection, one request at a time (a replica fetcher is sequential by nature, as Kafka's
ReplicaFetcherThread is): size-prefixed frames, request header v1/v2 by api version, the
generated message classes for bodies. ``connect`` sends ApiVersions first and every request then
uses the highest version both sides support (Kafka's NetworkClient does the same). Any failure
(connection lost, timeout, a frame that does not decode) raises :class:`BrokerClientError` and
the connection is closed; the caller backs off and reconnects.

Security (``security``, a :class:`~kbroker.security.inter_broker.InterBrokerSecurity`): TLS
wraps the socket before the first byte; SASL follows ApiVersions as in Kafka's clients
(SaslHandshake v1, then SaslAuthenticate rounds until the mechanism is complete); past 85% of
the session lifetime the other broker grants (KIP-368) the client reports itself disconnected,
so its caller reconnects and authenticates afresh instead of being cut off. A refused
authentication raises :class:`BrokerAuthenticationError` (a BrokerClientError: the caller backs
off the same way) with the other broker's message.

Imports only the protocol layer, the security helpers and asyncio.
"""

from __future__ import annotations

import asyncio
import ssl
import struct
import time

from kbroker.protocol.messages import (API_BY_KEY, API_KEY_BY_NAME, request_class,
                                       request_header_version, response_class,
                                       response_header_version)
from kbroker.protocol.messages.headers import RequestHeader, ResponseHeader
from kbroker.protocol.primitives import DecodeError, EncodeError

_SIZE = struct.Struct(">i")
API_VERSIONS = API_KEY_BY_NAME["ApiVersions"]
API_VERSIONS_REQUEST_VERSION = 3  # flexible; a Kafka 2.4+ broker answers it (KIP-511)


class BrokerClientError(Exception):
    """The request did not get an answer: connection refused or lost, timeout, bad frame."""


class BrokerAuthenticationError(BrokerClientError):
    """The other broker refused our TLS handshake or SASL credentials."""


class BrokerClient:
    def __init__(self, host: str, port: int, *, client_id: str, timeout_s: float,
                 max_response_bytes: int, security=None):
        """``security``: an InterBrokerSecurity; None is PLAINTEXT."""
        self.host = host
        self.port = port
        self.security = security
        self.client_id = client_id
        self.timeout_s = timeout_s
        # A response larger than this is not a Kafka answer to what we asked: refuse it
        # before allocating it.
        self.max_response_bytes = max_response_bytes
        self.versions: dict[int, tuple[int, int]] = {}
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation_id = 0
        self._session_ends: float | None = None

    @property
    def connected(self) -> bool:
        """Open, and (KIP-368) not past the SASL session lifetime the other broker gave: its
        callers then reconnect, which authenticates afresh."""
        if self._session_ends is not None and time.monotonic() >= self._session_ends:
            self.close()
        return self._writer is not None

    async def connect(self) -> None:
        context = self.security.ssl_context if self.security is not None else None
        try:
            async with asyncio.timeout(self.timeout_s):
                self._reader, self._writer = await asyncio.open_connection(
                    self.host, self.port, ssl=context,
                    server_hostname=self.host if context is not None else None)
        except ssl.SSLError as exc:
            raise BrokerAuthenticationError(
                f"TLS handshake with {self.host}:{self.port} (listener "
                f"{self.security.listener}) failed: {exc.reason or exc}") from None
        except (OSError, asyncio.TimeoutError) as exc:
            raise BrokerClientError(f"cannot connect to {self.host}:{self.port}: "
                                    f"{exc or type(exc).__name__}") from None
        cls = request_class(API_VERSIONS)
        response = await self._send(API_VERSIONS, API_VERSIONS_REQUEST_VERSION, cls(
            client_software_name="kbroker", client_software_version="1"))
        if response.error_code:
            self.close()
            raise BrokerClientError(f"{self.host}:{self.port} refused ApiVersions "
                                    f"(error {response.error_code})")
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        sasl = self.security.sasl_client(self.host) if self.security is not None else None
        if sasl is not None:
            try:
                await self._authenticate(sasl)
            except BrokerClientError:
                self.close()
                raise

    async def _authenticate(self, sasl) -> None:
        from kbroker.security.sasl.client import ClientAuthenticationFailed

        who = (f"SASL {sasl.mechanism} authentication as {self.security.username} to "
               f"{self.host}:{self.port} (listener {self.security.listener})")
        handshake = await self.request("SaslHandshake", request_class(
            API_KEY_BY_NAME["SaslHandshake"])(mechanism=sasl.mechanism))
        if handshake.error_code:
            raise BrokerAuthenticationError(f"{who} failed: the broker offers "
                                            f"{', '.join(handshake.mechanisms) or 'no mechanism'} "
                                            f"(error {handshake.error_code})")
        authenticate = request_class(API_KEY_BY_NAME["SaslAuthenticate"])
        try:
            # GSSAPI's first token may need the KDC: not on the event loop.
            token = (await asyncio.to_thread(sasl.first) if getattr(sasl, "blocking_first", False)
                     else sasl.first())
        except ClientAuthenticationFailed as exc:
            raise BrokerAuthenticationError(f"{who} failed: {exc}") from None
        lifetime_ms = 0
        try:
            while token is not None:
                response = await self.request("SaslAuthenticate", authenticate(auth_bytes=token))
                if response.error_code:
                    raise BrokerAuthenticationError(
                        f"{who} failed: {response.error_message or 'refused'} "
                        f"(error {response.error_code}); this broker's username and password are "
                        f"in listener.name.{self.security.listener.lower()}."
                        f"{sasl.mechanism.lower()}.sasl.jaas.config")
                token = sasl.evaluate(response.auth_bytes)
                lifetime_ms = response.session_lifetime_ms
        except ClientAuthenticationFailed as exc:
            raise BrokerAuthenticationError(f"{who} failed: {exc}") from None
        if not sasl.complete:
            raise BrokerAuthenticationError(f"{who} failed: the exchange did not complete")
        if lifetime_ms > 0:
            # Reconnect at 85% of the session, as Kafka's clients re-authenticate between 85%
            # and 95% of it; the other broker closes a connection used past its lifetime.
            self._session_ends = time.monotonic() + lifetime_ms * 0.85 / 1000

    def version_for(self, api_name: str) -> int:
        """The highest version of ``api_name`` both sides speak; BrokerClientError if none."""
        api_key = API_KEY_BY_NAME[api_name]
        ours = API_BY_KEY[api_key].valid_versions
        theirs = self.versions.get(api_key)
        if theirs is None or theirs[0] > ours[1] or theirs[1] < ours[0]:
            raise BrokerClientError(f"{self.host}:{self.port} does not support {api_name} "
                                    f"versions {ours[0]}-{ours[1]} (it offers {theirs})")
        return min(ours[1], theirs[1])

    async def request(self, api_name: str, request, version: int | None = None):
        api_key = API_KEY_BY_NAME[api_name]
        if version is None:
            version = self.version_for(api_name)
        return await self._send(api_key, version, request)

    async def _send(self, api_key: int, version: int, request):
        if self._writer is None:
            raise BrokerClientError(f"not connected to {self.host}:{self.port}")
        self._correlation_id = correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        header = RequestHeader(request_api_key=api_key, request_api_version=version,
                               correlation_id=correlation_id, client_id=self.client_id)
        try:
            parts = header.encode(request_header_version(api_key, version))
            parts += request.encode(version)
        except EncodeError as exc:
            raise BrokerClientError(f"cannot encode {API_BY_KEY[api_key].name} v{version}: "
                                    f"{exc}") from None
        size = sum(len(p) for p in parts)
        try:
            self._writer.writelines([_SIZE.pack(size), *parts])
            async with asyncio.timeout(self.timeout_s):
                frame = await self._read_frame(self._reader, self._writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError) as exc:
            self.close()
            raise BrokerClientError(f"{API_BY_KEY[api_key].name} to {self.host}:{self.port} "
                                    f"failed: {exc or type(exc).__name__}") from None
        try:
            response_header, pos = ResponseHeader.read(
                frame, 0, response_header_version(api_key, version))
            if response_header.correlation_id != correlation_id:
                raise DecodeError(f"correlation id {response_header.correlation_id}, "
                                  f"expected {correlation_id}")
            return response_class(api_key).read(frame, pos, version)[0]
        except DecodeError as exc:
            self.close()
            raise BrokerClientError(f"bad {API_BY_KEY[api_key].name} response from "
                                    f"{self.host}:{self.port}: {exc}") from None

    async def _read_frame(self, reader, writer) -> memoryview:
        # The streams are passed in: close() may drop them while this request is in flight.
        await writer.drain()
        (size,) = _SIZE.unpack(await reader.readexactly(4))
        if size < 0 or size > self.max_response_bytes:
            raise OSError(f"response frame of {size} bytes (limit {self.max_response_bytes})")
        return memoryview(await reader.readexactly(size))

    def close(self) -> None:
        self._session_ends = None
        if self._writer is not None:
            self._writer.close()
            self._writer = None
            self._reader = None
