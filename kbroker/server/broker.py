"""The broker process: listeners, storage, metadata and background work, started and stopped.

``Broker`` is usable in-process (tests: ``async with Broker(config) as broker``) and by the CLI
through :func:`run_broker`, which logs one line when ready and shuts down cleanly on SIGTERM or
SIGINT (stop accepting, flush logs, write checkpoints and the clean-shutdown marker).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time

from kbroker import handlers
from kbroker.server.connection import KafkaConnection
from kbroker.server.dispatch import Dispatcher

log = logging.getLogger("kbroker")


class Broker:
    def __init__(self, config):
        self.config = config
        self.node_id: int = config.node_id
        self.max_request_size: int = config.get("socket.request.max.bytes")
        self.connections: set[KafkaConnection] = set()
        self.servers: list[tuple[str, asyncio.AbstractServer]] = []
        self.bound: dict[str, tuple[str, int]] = {}  # listener name -> (host, actual port)
        self.log_manager = None
        self.replicas = None
        self.producer_ids = None
        self.controller = None
        self.dispatcher: Dispatcher | None = None
        self.group_coordinator = None
        self.log_cleaner = None
        self.http = None  # kbroker.server.http.HttpServer when the HTTP port is on
        self._tasks: list[asyncio.Task] = []
        self._stopped = asyncio.Event()

    # --- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        from kbroker.handlers.configs import restore_dynamic_configs
        from kbroker.log.log_manager import LogManager
        from kbroker.metadata.local_store import LocalMetadataStore
        from kbroker.replica.replica_manager import ReplicaManager
        from kbroker.server.topic_config import log_config_factory
        from kbroker.metadata.controller import Controller
        from kbroker.metadata.producer_ids import ProducerIdManager

        log_dirs = self.config.log_dirs
        store = LocalMetadataStore(log_dirs[0], self.config.get("cluster.id"), self.node_id)
        self.controller = Controller(store, self.node_id)
        image = self.controller.image
        restore_dynamic_configs(self.config, image)
        self.log_manager = LogManager(log_dirs, self.node_id, image.cluster_id)
        topics = image.topics()
        log_config_for = log_config_factory(self.config)
        default_config = log_config_for(None)
        # Recovery validates and indexes with each topic's own settings.
        self.log_manager.open(config_for=lambda name: log_config_for(topics[name])
                              if name in topics else default_config)
        self.replicas = ReplicaManager(self.log_manager, log_config_for)
        # Repairs a crash between a persisted change and its application, then follows changes.
        self.replicas.start(image)
        self.controller.subscribe(self.replicas)
        self.producer_ids = ProducerIdManager(self.controller)
        from kbroker.coordinator.group.coordinator import GroupCoordinator
        # Loads the shards of __consumer_offsets (when it exists) by replaying them.
        self.group_coordinator = GroupCoordinator(self.config, self.controller, self.replicas)
        self.group_coordinator.start()
        self.dispatcher = Dispatcher(self._services(), handlers.load())
        for endpoint in self.config.listeners:
            name = endpoint.name
            server = await asyncio.get_running_loop().create_server(
                lambda name=name: KafkaConnection(self, name), endpoint.bind_host, endpoint.port,
                reuse_address=True, backlog=1024)
            sock_port = server.sockets[0].getsockname()[1]
            self.bound[name] = (endpoint.bind_host or "0.0.0.0", sock_port)
            self.servers.append((name, server))
        from kbroker.server.http import start_http_server
        self.http = await start_http_server(self)  # None unless http.port is set or in dev mode
        self._tasks = [
            asyncio.create_task(self._every(self.config.get("log.retention.check.interval.ms"),
                                            self._retention), name="retention"),
            asyncio.create_task(self._every(self.config.get("log.flush.scheduler.interval.ms"),
                                            self._flush), name="flush"),
            asyncio.create_task(self._every(self.config.get(
                "log.flush.offset.checkpoint.interval.ms"), self._checkpoint), name="checkpoint"),
        ]
        if self.config.get("log.cleaner.enable"):
            from kbroker.log.cleaner import LogCleaner
            self.log_cleaner = LogCleaner(self.log_manager,
                                          backoff_ms=self.config.get("log.cleaner.backoff.ms"))
            self._tasks.append(asyncio.create_task(self.log_cleaner.run(), name="log-cleaner"))

    async def stop(self) -> None:
        if self.http is not None:
            await self.http.stop()
        for _, server in self.servers:
            server.close()
        for connection in list(self.connections):
            connection.close()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
        for _, server in self.servers:
            await server.wait_closed()
        if self.group_coordinator is not None:
            await self.group_coordinator.stop()
        if self.log_manager is not None:
            self.log_manager.close()
        self._stopped.set()

    async def __aenter__(self):
        await self.start()
        return self

    async def __aexit__(self, *exc):
        await self.stop()

    def _services(self):
        from kbroker.handlers.context import BrokerServices, ClusterView

        rack = self.config.get("broker.rack") or None
        return BrokerServices(
            config=self.config, partitions=self.replicas, controller=self.controller,
            groups=self.group_coordinator, producer_ids=self.producer_ids,
            cluster=ClusterView(self.node_id, rack, self.advertised_endpoint))

    # --- what connections call -----------------------------------------------------------------

    def handle_frame(self, frame, connection):
        return self.dispatcher.handle(frame, connection)

    def advertised_endpoint(self, listener_name: str | None) -> tuple[str, int]:
        """The host and port clients should use, for the listener a request came in on."""
        advertised = {name: (host, port) for name, host, port in self.config.advertised_listeners}
        if listener_name in advertised:
            host, port = advertised[listener_name]
        else:
            host, port = next(iter(advertised.values()))
        if port == 0:  # an ephemeral listener port: advertise the one we got
            port = self.bound.get(listener_name or self.servers[0][0], (host, port))[1]
        return host, port

    def port(self, listener_name: str | None = None) -> int:
        name = listener_name or self.servers[0][0]
        return self.bound[name][1]

    # --- background work -----------------------------------------------------------------------

    async def _every(self, interval_ms: int, job) -> None:
        if interval_ms >= 2**31:  # Kafka's "never" (Long.MAX_VALUE and the like)
            return
        interval = max(interval_ms, 10) / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                job()
            except Exception:
                log.exception("background job %s failed", job.__name__)

    def _retention(self) -> None:
        now = int(time.time() * 1000)
        for partition in list(self.replicas.partitions()):
            deleted = partition.log.delete_old_segments(now)
            if deleted:
                log.info("retention deleted %d segment(s) of %s-%d; log start offset is now %d",
                         deleted, partition.topic, partition.index, partition.log_start_offset)

    def _flush(self) -> None:
        now = int(time.time() * 1000)
        for partition in self.replicas.partitions():
            partition.log.flush_if_needed(now)

    def _checkpoint(self) -> None:
        self.log_manager.checkpoint()


async def serve(config) -> None:
    broker = Broker(config)
    started = time.monotonic()
    await broker.start()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    endpoints = ", ".join(f"{name}://{host}:{port}" for name, (host, port) in broker.bound.items())
    log.info("kbroker ready: node %d of cluster %s listening on %s, data in %s (started in "
             "%.2f s)", broker.node_id, broker.controller.cluster_id, endpoints,
             ", ".join(config.log_dirs), time.monotonic() - started)
    await stop.wait()
    log.info("shutting down: flushing logs and writing checkpoints")
    await broker.stop()
    log.info("kbroker stopped cleanly")


def run_broker(config) -> None:
    asyncio.run(serve(config))
