"""The broker's HTTP port: ``/healthz``, ``/readyz``, Prometheus ``/metrics`` and the web console.

Off unless ``http.port`` is set, or in dev mode (``dev.mode=true``), where an unset port means a
free one. It binds ``http.host``, else the first listener's host.

A tiny HTTP/1.1 server on asyncio streams, in the broker's event loop: GET and HEAD only,
keep-alive, no chunked bodies. aiohttp would add a dependency (and its start-up import cost) for
five read-only routes; the server needs nothing it offers. Routes:

- ``/healthz`` 200 while the process serves requests; ``/readyz`` 200 once every listener is
  bound (503 before and while stopping);
- ``/metrics``: ``prometheus_client``'s text format (kbroker.server.metrics for the names);
- ``/`` the console page, ``/api/...`` the JSON it reads (kbroker.server.http_api).
"""

from __future__ import annotations

import asyncio
import json
import logging

log = logging.getLogger("kbroker.http")

_MAX_HEADER_BYTES = 16 * 1024
_IDLE_S = 30  # a connection that sends no complete request header for this long is closed
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            500: "Internal Server Error", 503: "Service Unavailable"}


class HttpServer:
    def __init__(self, broker):
        from kbroker.server.http_api import ConsoleApi
        from kbroker.server.metrics import RequestMetrics

        self.broker = broker
        self.metrics = RequestMetrics()
        self.registry = None  # made on the first scrape: prometheus_client costs ~0.1 s to import
        self.api = ConsoleApi(broker)
        self.server: asyncio.AbstractServer | None = None
        self.address: tuple[str, int] | None = None
        self._clients: set[asyncio.StreamWriter] = set()
        self.ready = False  # the broker's listeners are bound and it is not stopping

    async def start(self, host: str, port: int) -> None:
        self.server = await asyncio.start_server(self._serve, host, port, reuse_address=True)
        bound = self.server.sockets[0].getsockname()
        self.address = (host, bound[1])
        self.api.start()

    async def stop(self) -> None:
        self.ready = False
        self.api.stop()
        if self.server is not None:
            self.server.close()
            for writer in list(self._clients):
                writer.close()
            await self.server.wait_closed()

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://{'127.0.0.1' if host in ('', '0.0.0.0') else host}:{port}/"

    def _registry(self):
        if self.registry is None:
            from prometheus_client import CollectorRegistry

            from kbroker.server.metrics import BrokerCollector

            self.registry = CollectorRegistry(auto_describe=False)
            self.registry.register(BrokerCollector(self.broker, self.metrics))
        return self.registry

    # --- HTTP/1.1 --------------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._clients.add(writer)
        try:
            while True:
                try:
                    async with asyncio.timeout(_IDLE_S):
                        head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError,
                        asyncio.TimeoutError):
                    return  # closed, idle, or not HTTP at all (a Kafka client on the wrong port)
                if len(head) > _MAX_HEADER_BYTES:
                    await self._send(writer, 400, b"request header too large\n", "text/plain", False)
                    return
                lines = head.decode("latin-1").split("\r\n")
                parts = lines[0].split(" ")
                if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
                    await self._send(writer, 400, b"bad request line\n", "text/plain", False)
                    return
                method, target, version = parts
                headers = {}
                for line in lines[1:]:
                    name, sep, value = line.partition(":")
                    if sep:
                        headers[name.strip().lower()] = value.strip()
                keep_alive = headers.get("connection", "").lower() != "close" and \
                    version == "HTTP/1.1"
                if "content-length" in headers or "transfer-encoding" in headers:
                    keep_alive = False  # bodies are not read: do not misparse what follows
                if method not in ("GET", "HEAD"):
                    await self._send(writer, 405, b"only GET and HEAD\n", "text/plain", False)
                    return
                status, body, content_type = self._route(target)
                await self._send(writer, status, body, content_type, keep_alive,
                                 head_only=method == "HEAD")
                if not keep_alive:
                    return
        finally:
            self._clients.discard(writer)
            writer.close()

    async def _send(self, writer, status: int, body: bytes, content_type: str, keep_alive: bool,
                    head_only: bool = False) -> None:
        head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'OK')}\r\n"
                f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
                "Cache-Control: no-store\r\n"
                f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n").encode()
        writer.write(head if head_only else head + body)
        try:
            await writer.drain()
        except ConnectionError:
            pass

    def _route(self, target: str) -> tuple[int, bytes, str]:
        from urllib.parse import parse_qs, unquote, urlsplit  # with the first request: 5 ms

        url = urlsplit(target)
        path = unquote(url.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        try:
            if path == "/healthz":
                return 200, b"ok\n", "text/plain"
            if path == "/readyz":
                ready = self.ready and bool(self.broker.bound)
                return (200, b"ready\n", "text/plain") if ready else \
                    (503, b"not ready\n", "text/plain")
            if path == "/metrics":
                from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
                return 200, generate_latest(self._registry()), CONTENT_TYPE_LATEST
            if path in ("/", "/index.html"):
                from kbroker.server.http_console import PAGE
                return 200, PAGE, "text/html; charset=utf-8"
            if path.startswith("/api/"):
                found = self.api.get(path[len("/api/"):].strip("/").split("/"), query)
                if found is None:
                    return 404, b'{"error": "not found"}', "application/json"
                return 200, json.dumps(found, default=str).encode(), "application/json"
        except ValueError as exc:  # a bad query parameter
            return 400, json.dumps({"error": str(exc)}).encode(), "application/json"
        except Exception:
            log.exception("HTTP GET %s failed", target)
            return 500, b"internal error (see the broker log)\n", "text/plain"
        return 404, b"not found\n", "text/plain"


def http_port(config) -> int | None:
    """The port to serve HTTP on, or None when it is off."""
    port = config.get("http.port")
    if port is None and config.get("dev.mode"):
        return 0
    return port


async def start_http_server(broker) -> HttpServer | None:
    port = http_port(broker.config)
    if port is None:
        return None
    host = broker.config.get("http.host")
    if host is None:
        host = broker.config.listeners[0].bind_host or "0.0.0.0"
    server = HttpServer(broker)
    await server.start(host, port)
    broker.dispatcher.metrics = server.metrics
    broker.dispatcher.reconfigure()
    server.ready = True
    log.info("kbroker HTTP on %s (metrics at /metrics, console at /)", server.url)
    return server
