"""A small HTTP/1.1 server on asyncio streams for the registry's REST API.

Requests with bodies (``Content-Length`` or chunked), keep-alive, pipelined requests answered in
order, TLS when given an ``ssl.SSLContext``. The server knows nothing of the registry: it hands a
:class:`Request` to an async handler and writes the :class:`Response` it returns. A body larger
than ``max_body`` is answered 413 before it is read, and the connection closed (what follows it
on the stream would be unreadable). kbroker.server.http (the broker's GET-only port) stays apart:
it serves the console and probes, with no bodies or authentication.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote

log = logging.getLogger("kbroker.schema_registry")

_MAX_HEADER_BYTES = 16 * 1024
_IDLE_S = 60  # a connection idle this long between requests is closed
_REASONS = {200: "OK", 204: "No Content", 400: "Bad Request", 401: "Unauthorized",
            403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 409: "Conflict",
            413: "Payload Too Large", 415: "Unsupported Media Type",
            422: "Unprocessable Entity", 500: "Internal Server Error",
            503: "Service Unavailable"}
JSON_TYPE = "application/vnd.schemaregistry.v1+json"


@dataclass
class Request:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes = b""
    peer: str = ""
    path: str = ""
    segments: list[str] = field(default_factory=list)
    query: dict[str, str] = field(default_factory=dict)

    def __post_init__(self):
        path, _, query = self.target.partition("?")
        self.path = path
        # Segments are unquoted one by one: a subject may hold an encoded "/".
        self.segments = [unquote(s) if "%" in s else s for s in path.split("/") if s]
        if query:
            self.query = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}


@dataclass
class Response:
    status: int
    body: bytes = b""
    content_type: str = JSON_TYPE
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, value, status: int = 200) -> "Response":
        return cls(status, json.dumps(value, ensure_ascii=False).encode())


class HttpServer:
    def __init__(self, handler, max_body: int, ssl_context=None):
        self.handler = handler
        self.max_body = max_body
        self.ssl_context = ssl_context
        self.server: asyncio.AbstractServer | None = None
        self.port = 0
        self._clients: set[asyncio.StreamWriter] = set()
        # connections waiting for a request -> since when (one sweeper closes idle ones: a
        # timer per request would cost more than the lookup it guards)
        self._idle_since: dict[asyncio.StreamWriter, float] = {}
        self._sweeper: asyncio.Task | None = None

    async def start(self, host: str, port: int) -> None:
        self.server = await asyncio.start_server(self._serve, host, port, reuse_address=True,
                                                 ssl=self.ssl_context)
        self.port = self.server.sockets[0].getsockname()[1]
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep_idle(),
                                                               name="registry idle sweeper")

    async def _sweep_idle(self) -> None:
        while True:
            await asyncio.sleep(_IDLE_S / 4)
            cutoff = time.monotonic() - _IDLE_S
            for writer, since in list(self._idle_since.items()):
                if since < cutoff:
                    writer.close()

    async def stop(self) -> None:
        if self.server is None:
            return
        if self._sweeper is not None:
            self._sweeper.cancel()
        self.server.close()
        for writer in list(self._clients):
            writer.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._clients.add(writer)
        idle = self._idle_since
        peer = writer.get_extra_info("peername")
        peer_text = peer[0] if isinstance(peer, tuple) else str(peer)
        try:
            while True:
                idle[writer] = time.monotonic()  # the sweeper closes it after _IDLE_S
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError,
                        OSError):
                    return
                idle.pop(writer, None)
                request, error = _parse_head(head, peer_text)
                if error is not None:
                    await _send(writer, error, False)
                    return
                keep_alive = request.headers.get("connection", "").lower() != "close" and \
                    head.split(b"\r\n", 1)[0].endswith(b"HTTP/1.1")
                body_error = await self._read_body(reader, request)
                if body_error is not None:
                    await _send(writer, body_error, False)
                    return
                try:
                    response = await self.handler(request)
                except Exception:
                    log.exception("schema registry: %s %s failed", request.method, request.target)
                    response = Response.json({"error_code": 500, "message":
                                              "Internal Server Error"}, 500)
                await _send(writer, response, keep_alive, head_only=request.method == "HEAD")
                if not keep_alive:
                    return
        finally:
            self._clients.discard(writer)
            idle.pop(writer, None)
            writer.close()

    async def _read_body(self, reader, request: Request) -> Response | None:
        headers = request.headers
        try:
            if "chunked" in headers.get("transfer-encoding", "").lower():
                body = bytearray()
                while True:
                    size_line = await reader.readuntil(b"\r\n")
                    size = int(size_line.split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        await reader.readuntil(b"\r\n")  # the trailer's end
                        break
                    if len(body) + size > self.max_body:
                        return _too_large(self.max_body)
                    body += await reader.readexactly(size)
                    await reader.readexactly(2)
                request.body = bytes(body)
                return None
            length = int(headers.get("content-length", "0") or 0)
        except (ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                ConnectionError):
            return Response.json({"error_code": 400, "message": "Malformed request body"}, 400)
        if length < 0:
            return Response.json({"error_code": 400, "message": "Malformed Content-Length"}, 400)
        if length > self.max_body:
            return _too_large(self.max_body)
        if length:
            try:
                request.body = await reader.readexactly(length)
            except (asyncio.IncompleteReadError, ConnectionError):
                return Response.json({"error_code": 400, "message": "Truncated body"}, 400)
        return None


def _too_large(limit: int) -> Response:
    return Response.json({"error_code": 413,
                          "message": f"Request body larger than {limit} bytes"}, 413)


def _parse_head(head: bytes, peer: str) -> tuple[Request | None, Response | None]:
    if len(head) > _MAX_HEADER_BYTES:
        return None, Response.json({"error_code": 400, "message": "Header too large"}, 400)
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        return None, Response.json({"error_code": 400, "message": "Bad request line"}, 400)
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return Request(parts[0].upper(), parts[1], headers, peer=peer), None


async def _send(writer, response: Response, keep_alive: bool, head_only: bool = False) -> None:
    extra = "".join(f"{k}: {v}\r\n" for k, v in response.headers.items())
    head = (f"HTTP/1.1 {response.status} {_REASONS.get(response.status, 'OK')}\r\n"
            f"Content-Type: {response.content_type}\r\n"
            f"Content-Length: {len(response.body)}\r\n{extra}"
            f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n").encode()
    writer.write(head if head_only else head + response.body)
    try:
        await writer.drain()
    except (ConnectionError, OSError):
        pass
