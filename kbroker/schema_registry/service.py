"""The schema registry service of one broker: its listeners, the dispatch of a request, and
where the request runs.

Where a request runs: the state is the coordinator shard of ``_schemas`` partition 0, hosted by
the broker that leads that partition (kbroker.coordinator.runtime loads it by replaying the
partition up to the high watermark, so a new leader has every acknowledged write before it
assigns an id). A broker that leads it serves every request itself; any other broker forwards
the request, as it came, to the leader's registry listener (Confluent's followers forward writes
to their leader alike) and answers 50003 when that fails. Until the topic exists (it is created
by the first write, so a broker whose registry is never written has no ``_schemas`` topic) reads
see an empty registry.

Dispatch: authenticate (kbroker.schema_registry.security), match the route
(kbroker.schema_registry.api), authorize it, then run it here or forward it; count it in
``/metrics`` by endpoint and status.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from kbroker.coordinator.runtime import CoordinatorRuntime
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.schema_registry import api, errors
from kbroker.schema_registry.errors import RegistryError
from kbroker.schema_registry.http import HttpServer, Request, Response
from kbroker.schema_registry.store import RegistryShard

log = logging.getLogger("kbroker.schema_registry")

PARTITION = 0
DEV_PORT = 8081  # Confluent's default port, taken in dev mode when it is free
FORWARDED = "x-kbroker-registry-forwarded"
_LOAD_WAIT_S = 10.0


@dataclass(frozen=True)
class Defaults:
    compatibility: str
    mode: str = "READWRITE"
    normalize: bool = False


class NotHere(Exception):
    """The shard lives on another broker (the leader of _schemas-0): forward."""

    def __init__(self, leader: int | None):
        super().__init__(leader)
        self.leader = leader


class SchemaRegistry:
    def __init__(self, config, controller, partitions, node_id: int, security=None):
        self.config = config
        self.controller = controller
        self.node_id = node_id
        self.topic = config.get("schema.registry.topic")
        self.group_id = "schema-registry"
        self.defaults = Defaults(config.get("schema.registry.compatibility.level"))
        self.runtime = CoordinatorRuntime(
            controller, partitions, self.topic, 1,
            {"cleanup.policy": "compact"},
            lambda runtime, index: RegistryShard(runtime, index, self.defaults),
            config.get("schema.registry.topic.replication.factor"))
        self._empty = RegistryShard(self.runtime, PARTITION, self.defaults)
        self._empty.loading = False
        self.security = security  # kbroker.schema_registry.security.RegistrySecurity or None
        self.servers: list[tuple[str, HttpServer]] = []  # (url, server)
        self.bound: tuple[str, str, int] | None = None  # the first listener's (scheme, host, port)
        self.metrics: dict[tuple[str, int], int] = {}  # (endpoint, status) -> requests
        self.forward_timeout_s = config.get("schema.registry.forward.timeout.ms") / 1000

    # --- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        self.runtime.start()
        self.controller.subscribe(self.runtime)
        max_body = self.config.get("schema.registry.max.request.bytes")
        for url, ssl_context in listener_urls(self.config):
            parts = urlsplit(url)
            server = HttpServer(self.handle, max_body, ssl_context)
            host = parts.hostname or "0.0.0.0"
            port = parts.port
            if port == DEV_PORT and url in _dev_default(self.config):
                try:
                    await server.start(host, port)
                except OSError:
                    await server.start(host, 0)  # 8081 taken: any free port (the log names it)
            else:
                try:
                    await server.start(host, port)
                except OSError as exc:
                    raise OSError(exc.errno, f"cannot listen on {url} for the schema registry "
                                             f"({exc.strerror})") from None
            bound = f"{parts.scheme}://{_display_host(host)}:{server.port}"
            self.servers.append((bound, server))
            if self.bound is None:
                self.bound = (parts.scheme, host, server.port)
            log.info("kbroker schema registry on %s (Confluent's REST API; topic %s)", bound,
                     self.topic)

    async def stop(self) -> None:
        for _, server in self.servers:
            await server.stop()
        await self.runtime.stop()

    @property
    def url(self) -> str | None:
        return self.servers[0][0] if self.servers else None

    def cluster_id(self) -> str:
        return self.controller.image.cluster_id

    # --- where the state is --------------------------------------------------------------------

    def leader(self) -> int | None:
        topic = self.controller.image.topic(self.topic)
        if topic is None:
            return None
        return topic.state(PARTITION).leader

    def local_shard(self) -> RegistryShard:
        """The loaded shard, an empty one before the topic exists, or NotHere."""
        if not self.runtime.exists:
            return self._empty
        shard = self.runtime.shards.get(PARTITION)
        if shard is None:
            raise NotHere(self.leader())
        if shard.loading or shard.load_error:
            raise errors.timeout("The schema registry is loading _schemas; retry shortly")
        return shard

    def _settled(self) -> bool:
        """Nothing to wait for: no topic yet, or the shard here is loaded (the hot path)."""
        if not self.runtime.exists:
            return True
        shard = self.runtime.shards.get(PARTITION)
        return shard is not None and not shard.loading and shard.load_error is None

    async def _wait_loaded(self) -> None:
        """Wait (a little) for the shard to load when this broker leads the partition."""
        if self._settled():
            return
        deadline = time.monotonic() + _LOAD_WAIT_S
        while True:
            if not self.runtime.exists:
                return
            shard = self.runtime.shards.get(PARTITION)
            if shard is None:
                leader = self.leader()
                if leader is not None and leader >= 0 and leader != self.node_id:
                    return
            elif not shard.loading and shard.load_error is None:
                return
            if time.monotonic() > deadline:
                return
            await asyncio.sleep(0.02)

    async def write(self, op):
        if not self.runtime.exists:
            try:
                await self.runtime.create_topic_if_missing()
            except KafkaError as exc:
                raise errors.store_error(f"Cannot create the schema registry's topic "
                                         f"{self.topic}: {exc.message or exc.error.name}")
        await self._wait_loaded()
        if PARTITION not in self.runtime.shards:
            raise NotHere(self.leader())
        try:
            return await self.runtime.write(PARTITION, op)
        except KafkaError as exc:
            if exc.error in (Errors.NOT_COORDINATOR,) and PARTITION not in self.runtime.shards:
                raise NotHere(self.leader()) from None
            if exc.error is Errors.COORDINATOR_LOAD_IN_PROGRESS:
                raise errors.timeout("The schema registry is loading _schemas; retry shortly")
            raise errors.store_error(f"Error while writing to the schema registry's topic "
                                     f"{self.topic}: {exc.message or exc.error.name}") from None

    # --- dispatch ------------------------------------------------------------------------------

    async def handle(self, request: Request) -> Response:
        route, params, known = api.match(request.method, request.segments)
        endpoint = route.name if route is not None else "other"
        try:
            response = await self._dispatch(request, route, params, known)
        except RegistryError as exc:
            response = Response.json(exc.body(), exc.status)
            if exc.status == 401:
                response.headers["WWW-Authenticate"] = 'Basic realm="SchemaRegistry"'
        except NotHere:
            response = Response.json(errors.unknown_leader().body(), 500)
        key = (endpoint, response.status)
        self.metrics[key] = self.metrics.get(key, 0) + 1
        return response

    async def _dispatch(self, request: Request, route, params, known) -> Response:
        principal = None
        if self.security is not None:
            principal = self.security.authenticate(request)
        if route is None:
            raise errors.method_not_allowed() if known else errors.not_found_path()
        call = api.Call(request, params, self)
        call.principal = principal
        if self.security is not None:
            self.security.authorize(call, route)
        if request.method in ("POST", "PUT"):
            call.body()  # 415 / 400 before anything else, wherever the request runs
        try:
            await self._wait_loaded()
            result = await route.run(call)
        except NotHere as here:
            return await self._forward(request, here.leader)
        if isinstance(result, Response):
            return result
        return Response.json(result)

    def may_read(self, call, subject: str) -> bool:
        """Whether the caller may see ``subject`` in a listing (ACLs filter listings)."""
        if self.security is None:
            return True
        return self.security.may(call, subject, "READ")

    # --- forwarding to the leader --------------------------------------------------------------

    async def _forward(self, request: Request, leader: int | None) -> Response:
        if request.headers.get(FORWARDED):
            raise errors.unknown_leader("Leader not known.")  # never forward twice
        target = self.registry_url_of(leader)
        if target is None:
            raise errors.forwarding_failed(
                f"Error while forwarding the request to the leader: no schema registry URL "
                f"known for broker {leader}")
        try:
            async with asyncio.timeout(self.forward_timeout_s):
                return await forward(target, request, self.security)
        except (OSError, asyncio.TimeoutError, ValueError, asyncio.IncompleteReadError) as exc:
            raise errors.forwarding_failed(
                f"Error while forwarding the request to the leader {target}: "
                f"{type(exc).__name__}: {exc}") from None

    def registry_url_of(self, node_id: int | None) -> str | None:
        """The registry URL broker ``node_id`` registered (kbroker.schema_registry.cluster)."""
        if node_id is None or node_id < 0:
            return None
        info = self.controller.image.brokers.get(node_id)
        if info is None:
            return None
        from kbroker.schema_registry.cluster import registry_url
        return registry_url(info, urlsplit(self.url).scheme if self.url else "http")


async def forward(url: str, request: Request, security) -> Response:
    """Send ``request`` to the registry at ``url``; its response."""
    parts = urlsplit(url)
    ssl_context = security.client_context() if (security is not None and
                                                parts.scheme == "https") else None
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port, ssl=ssl_context)
    try:
        headers = {k: v for k, v in request.headers.items()
                   if k not in ("connection", "content-length", "transfer-encoding", "host")}
        headers[FORWARDED] = "1"
        lines = [f"{request.method} {request.target} HTTP/1.1", f"Host: {parts.netloc}",
                 f"Content-Length: {len(request.body)}", "Connection: close"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + request.body)
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        status = int(status_line.split(" ")[1])
        got = {}
        for line in header_lines:
            name, sep, value = line.partition(":")
            if sep:
                got[name.strip().lower()] = value.strip()
        length = int(got.get("content-length", "0"))
        body = await reader.readexactly(length) if length else b""
        return Response(status, body, got.get("content-type", "application/json"))
    finally:
        writer.close()


def listener_urls(config) -> list[tuple[str, object]]:
    """[(url, ssl context or None)] of the registry's listeners (empty: off)."""
    urls = list(config.get("schema.registry.listeners") or []) or _dev_default(config)
    out = []
    for url in urls:
        ssl_context = None
        if url.startswith("https://"):
            from kbroker.schema_registry.security import server_ssl_context
            ssl_context = server_ssl_context(config)
        out.append((url, ssl_context))
    return out


def _dev_default(config) -> list[str]:
    if config.get("schema.registry.listeners") or not config.get("dev.mode"):
        return []
    host = config.get("http.host") or config.listeners[0].bind_host or "127.0.0.1"
    return [f"http://{host}:{DEV_PORT}"]


def _display_host(host: str) -> str:
    if host in ("", "0.0.0.0", "::"):
        return socket.gethostname() if host == "::" else "127.0.0.1"
    return host


async def start_schema_registry(broker) -> SchemaRegistry | None:
    """The broker's registry when ``schema.registry.listeners`` is set (or in dev mode)."""
    if not listener_urls_configured(broker.config):
        return None
    security = None
    from kbroker.schema_registry.security import build_security
    security = build_security(broker)
    registry = SchemaRegistry(broker.config, broker.controller, broker.replicas, broker.node_id,
                              security)
    await registry.start()
    return registry


def listener_urls_configured(config) -> bool:
    return bool(config.get("schema.registry.listeners")) or bool(_dev_default(config))


def metrics_json(registry: SchemaRegistry) -> str:
    return json.dumps({f"{e} {s}": n for (e, s), n in registry.metrics.items()})
