"""The schema registry service of one broker: its listeners, the dispatch of a request, and
where the request runs.

Where a request runs: the state is the coordinator shard of ``_schemas`` partition 0, hosted by
the broker that leads that partition (kbroker.coordinator.runtime loads it by replaying the
partition up to the high watermark, so a new leader has every acknowledged write before it
assigns an id). The leader serves every request itself. A broker with a follower replica of the
partition serves reads from it (kbroker.schema_registry.replica_view) and asks the leader for
what its copy does not know yet (a 404 there is forwarded); a broker without a replica forwards
reads too. Writes are always forwarded, as they came, to the leader's registry listener
(Confluent's followers forward to their leader alike); a forwarding failure is 50003. Until the
topic exists (the first write creates it, so a broker whose registry is never written has no
``_schemas`` topic) reads see an empty registry.

Built in two steps: the listeners bind when the broker starts (its ready banner and its cluster
registration carry their URL); the state behind them (the ``_schemas`` runtime, the routes and the
formats, most of the package's import time) is built on the first request, or at start when there
is something to follow: a ``_schemas`` topic in the metadata, or a cluster, where this broker may
come to lead ``_schemas-0`` at any time (kbroker.server.coordinators does the same for the
coordinators).

Dispatch: authenticate (kbroker.schema_registry.security), match the route
(kbroker.schema_registry.api), authorize it, then run it here or forward it; count it in
``/metrics`` by endpoint and status.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from kbroker.protocol.errors import Errors, KafkaError
from kbroker.schema_registry import enabled, errors
from kbroker.schema_registry.errors import RegistryError
from kbroker.schema_registry.http import HttpServer, Request, Response

if TYPE_CHECKING:
    from kbroker.schema_registry.store import RegistryShard

log = logging.getLogger("kbroker.schema_registry")

PARTITION = 0
DEV_PORT = 8081  # Confluent's default port, taken in dev mode when it is free
FORWARDED = "x-kbroker-registry-forwarded"
_LOAD_WAIT_S = 10.0


@dataclass(frozen=True)
class Defaults:
    """What a registry without a global config or mode answers."""
    compatibility: str
    mode: str = "READWRITE"


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
        self._partitions = partitions
        # Built by ensure(): the runtime of the _schemas shard, an empty shard to read before the
        # topic exists, and the view of a follower replica.
        self.runtime = None  # kbroker.coordinator.runtime.CoordinatorRuntime
        self._empty = None
        self.view = None  # kbroker.schema_registry.replica_view.ReplicaView
        self.security = security  # kbroker.schema_registry.security.RegistrySecurity or None
        self.servers: list[tuple[str, HttpServer]] = []  # (url, server)
        self.bound: tuple[str, str, int] | None = None  # the first listener's (scheme, host, port)
        self.metrics: dict[tuple[str, int], int] = {}  # (endpoint, status) -> requests
        self.forward_timeout_s = config.get("schema.registry.forward.timeout.ms") / 1000

    # --- lifecycle -----------------------------------------------------------------------------

    def ensure(self) -> "SchemaRegistry":
        """Build the state behind the listeners if it is not yet (see the module docstring)."""
        if self.runtime is None:
            from kbroker.coordinator.runtime import CoordinatorRuntime
            from kbroker.schema_registry.replica_view import ReplicaView
            from kbroker.schema_registry.store import RegistryShard

            runtime = CoordinatorRuntime(
                self.controller, self._partitions, self.topic, 1,
                {"cleanup.policy": "compact"},
                lambda runtime, index: RegistryShard(runtime, index, self.defaults),
                self.config.get("schema.registry.topic.replication.factor"))
            self._empty = RegistryShard(runtime, PARTITION, self.defaults)
            self._empty.loading = False
            self.view = ReplicaView(runtime, PARTITION, self.defaults)  # on a follower
            self.runtime = runtime
            runtime.start()  # loads _schemas-0 from the current image when this broker leads it
            self.controller.subscribe(runtime)
        return self

    async def start(self, build_now: bool) -> None:
        """Bind the listeners; ``build_now``: build the state too (see the module docstring)."""
        if build_now:
            self.ensure()
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
        if self.runtime is not None:
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
        """The state to read here: the loaded shard (this broker leads _schemas-0), the view of
        a follower replica, an empty one before the topic exists; else NotHere (forward)."""
        self.ensure()
        if not self.runtime.exists:
            return self._empty
        shard = self.runtime.shards.get(PARTITION)
        if shard is not None:
            if shard.loading or shard.load_error:
                raise errors.timeout("The schema registry is loading _schemas; retry shortly")
            return shard
        partition = self.runtime.partitions.get(self.topic, PARTITION)
        if partition is None or self.runtime.leads(PARTITION) or not self._replica_current(
                partition):
            raise NotHere(self.leader())
        try:
            return self.view.current(partition)
        except KafkaError:  # the replica cannot be read now (moving, out of range): forward
            self.view.drop()
            raise NotHere(self.leader()) from None

    def _replica_current(self, partition) -> bool:
        """Whether this follower's replica holds every acknowledged write: it is in the ISR (a
        write is acknowledged once every ISR member has it in its log) and it knows all it holds
        to be committed (log end = high watermark; right after a write the follower learns the
        new high watermark on its next fetch, and reads go to the leader meanwhile). So a read
        on any broker sees every write acknowledged before it."""
        topic = self.controller.image.topic(self.topic)
        if topic is None or self.node_id not in topic.state(PARTITION).isr:
            return False
        return partition.log_end_offset == partition.high_watermark

    def from_replica(self, shard) -> bool:
        return shard is not None and shard is self.view.shard

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
                if not self.runtime.leads(PARTITION):
                    return  # a follower or no replica at all: read the view, or forward
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
        from kbroker.schema_registry import api  # with the state, on the first request

        self.ensure()
        route, params, known = api.match(request.method, request.segments)
        endpoint = route.name if route is not None else "other"
        try:
            response = await self._dispatch(api, request, route, params, known)
        except RegistryError as exc:
            response = Response.json(exc.body(), exc.status)
            if exc.status == 401:
                response.headers["WWW-Authenticate"] = 'Basic realm="SchemaRegistry"'
        except NotHere:
            response = Response.json(errors.unknown_leader().body(), 500)
        key = (endpoint, response.status)
        self.metrics[key] = self.metrics.get(key, 0) + 1
        return response

    async def _dispatch(self, api, request: Request, route, params, known) -> Response:
        """``api``: the routes' module, imported by :meth:`handle`."""
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
        except RegistryError as exc:
            # A follower's copy may trail the leader by a fetch: what it does not know yet is
            # asked of the leader, so a schema registered a moment ago is always found.
            if exc.status == 404 and self.from_replica(call._shard):
                return await self._forward(request, self.leader())
            raise
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
    if not enabled(broker.config):
        return None
    from kbroker.schema_registry.security import build_security
    security = build_security(broker)
    registry = SchemaRegistry(broker.config, broker.controller, broker.replicas, broker.node_id,
                              security)
    topic = broker.config.get("schema.registry.topic")
    await registry.start(build_now=broker.cluster is not None or
                         broker.controller.image.topic(topic) is not None)
    return registry

