"""The broker process: listeners, storage, metadata and background work, started and stopped.

``Broker`` is usable in-process (tests: ``async with Broker(config) as broker``) and by the CLI
through :func:`run_broker`, which logs one line when ready and shuts down cleanly on SIGTERM or
SIGINT (stop accepting, flush logs, write checkpoints and the clean-shutdown marker).
"""

from __future__ import annotations

import asyncio
import errno
import gc
import json
import logging
import os
import signal
import time

from kbroker import handlers
from kbroker.schema_registry import enabled as schema_registry_enabled
from kbroker.server import listener_security
from kbroker.server.acceptor import listen
from kbroker.server.authenticator import FailureLog, ListenerSecurity, SaslAuthenticator
from kbroker.server.connection import KafkaConnection
from kbroker.server.coordinators import Coordinators
from kbroker.server.limits import ConnectionLimits
from kbroker.startup import EXIT_LISTENER, EXIT_LOG_DIR, EXIT_METADATA, StartupError
from kbroker.server.dispatch import Dispatcher

log = logging.getLogger("kbroker")


class Broker:
    def __init__(self, config):
        self.config = config
        self.node_id: int = config.node_id
        self.max_request_size: int = config.get("socket.request.max.bytes")
        self.connections: set[KafkaConnection] = set()
        self.connection_limits = ConnectionLimits(config)
        self.servers: list[tuple[str, asyncio.AbstractServer]] = []
        self.bound: dict[str, tuple[str, int]] = {}  # listener name -> (host, actual port)
        self.replicas = None
        self.producer_ids = None
        self.controller = None
        self.dispatcher: Dispatcher | None = None
        # the group, transaction and share coordinators, built on first use (the properties
        # below build them; the metrics and the console read ``coordinators.group`` ...)
        self.coordinators = Coordinators(self)
        self.client_metrics = None  # kbroker.telemetry.manager.ClientMetricsManager (KIP-714)
        self.log_cleaner = None
        self.http = None  # kbroker.server.http.HttpServer when the HTTP port is on
        self.schema_registry = None  # kbroker.schema_registry.service.SchemaRegistry when on
        self.cluster = None  # kbroker.metadata.zk.cluster.ZkCluster with zookeeper.connect
        self._tasks: list[asyncio.Task] = []
        self.token_credentials = None  # kbroker.security.token_credentials.TokenCredentials
        self._jwks_tasks: list[asyncio.Task] = []  # JWKS refreshers (OAUTHBEARER, KIP-768)
        self._stopped = asyncio.Event()
        self._state_change_file = None  # the state-change log's own file, when configured

    # --- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        from kbroker.metadata.dynamic_configs import (DynamicConfigFollower,
                                                      restore_dynamic_configs)
        from kbroker.metadata.local_store import LocalMetadataStore
        from kbroker.replica.replica_manager import ReplicaManager
        from kbroker.metadata.controller import Controller
        from kbroker.metadata import state_change
        from kbroker.metadata.producer_ids import ProducerIdManager

        self._state_change_file = state_change.open_file(self.config)  # before any change

        log_dirs = self.config.log_dirs
        # The two modes differ in their store only: a file in the data dir, or ZooKeeper.
        if self.config.get("zookeeper.connect"):
            self.cluster = await _open_cluster(self.config, self.node_id)
            store, image = self.cluster.store, self.cluster.image
        else:
            store = _open_metadata(LocalMetadataStore, log_dirs[0],
                                   self.config.get("cluster.id"), self.node_id)
            image = await store.load()
        self.controller = Controller(store, self.node_id, image, self.config)
        from kbroker.security.token_credentials import TokenCredentials
        self.token_credentials = TokenCredentials(self.config, self.controller)
        restore_dynamic_configs(self.config, image)
        # Recovers the logs and repairs a crash at any step of a metadata change (the stored
        # image is the truth; the log dirs are brought to it); then follows the controller.
        self.replicas = ReplicaManager.open(self.config, image, self.node_id)
        self.controller.subscribe(DynamicConfigFollower(self.config))
        self.controller.subscribe(self.replicas)
        self.producer_ids = ProducerIdManager(self.controller)
        # The group, transaction and share coordinators: now when the image holds state for them
        # (or in a cluster), else on first use (kbroker.server.coordinators).
        if self.coordinators.needed_at_start(image):
            self.coordinators.ensure()
        else:
            self.coordinators.follow_internal_topics(self.controller)
        from kbroker.telemetry.stored import ClientMetricsFollower
        from kbroker.telemetry.manager import ClientMetricsManager
        self.client_metrics = ClientMetricsManager(
            self.config.get("telemetry.max.bytes"), self.config.get("kbroker.telemetry.max.series"),
            self.config.get("kbroker.telemetry.max.series.per.client"))
        follower = ClientMetricsFollower(self.client_metrics)
        follower.apply(None, self.controller.image)  # the subscriptions stored so far
        self.controller.subscribe(follower)
        self.dispatcher = Dispatcher(self._services(), handlers.load())
        self.connection_limits.image = lambda: self.controller.image  # ip quotas (KIP-612)
        failures = FailureLog()
        inter_broker = (listener_security.inter_broker(self.config) if self.cluster is not None
                        else None)
        for endpoint in self.config.listeners:
            name = endpoint.name
            security = listener_security.build(self.config, name, self._scram_credential,
                                               failures, self.token_credentials.credential)
            if security.jwks_refresher is not None:  # OAUTHBEARER with signed tokens
                await self._start_jwks(security.jwks_refresher, name)
            try:
                server = await listen(endpoint.bind_host, endpoint.port,
                                      self._connection_factory(security),
                                      self.connection_limits, ssl_context=security.ssl_context,
                                      on_tls_failure=lambda ip, exc, s=security: s.failures.failed(
                                          ip, s.name, f"TLS handshake failed: {exc}"))
            except OSError as exc:
                raise StartupError(
                    f"cannot listen on {name}://{endpoint.bind_host or '0.0.0.0'}:"
                    f"{endpoint.port} ({exc.strerror})",
                    "stop the process using that port or change listeners" if exc.errno ==
                    errno.EADDRINUSE else "fix the host or port in listeners",
                    EXIT_LISTENER) from None
            sock_port = server.sockets[0].getsockname()[1]
            self.bound[name] = (endpoint.bind_host or "0.0.0.0", sock_port)
            self.servers.append((name, server))
        try:  # off unless schema.registry.listeners is set or in dev mode; before joining the
            # cluster, whose registration carries the registry's URL
            if schema_registry_enabled(self.config):
                from kbroker.schema_registry.service import start_schema_registry
                self.schema_registry = await start_schema_registry(self)
        except OSError as exc:
            raise StartupError(str(exc), "stop the process using that port or change "
                               "schema.registry.listeners", EXIT_LISTENER) from None
        except ValueError as exc:  # its TLS keys
            raise StartupError(str(exc), "fix the schema registry's ssl keys",
                               EXIT_LISTENER) from None
        if self.cluster is not None:
            await self._join_cluster()
            # Followers fetch from their leaders; leaders change ISRs through the controller
            # (conditional on the state znode's version).
            self.replicas.start_replication(self.cluster.isr_writer(self.controller),
                                            security=inter_broker)
        self.replicas.resume_log_dir_moves()
        from kbroker.server.http import start_http_server
        self.http = await start_http_server(self)  # None unless http.port is set or in dev mode
        self._tasks = self._jwks_tasks + [
            asyncio.create_task(self._every(self.config.get("log.retention.check.interval.ms"),
                                            self.replicas.enforce_retention), name="retention"),
            asyncio.create_task(self._every(self.config.get("log.flush.scheduler.interval.ms"),
                                            self.replicas.flush_if_needed), name="flush"),
            asyncio.create_task(self._every(self.config.get(
                "log.flush.offset.checkpoint.interval.ms"), self.replicas.checkpoint),
                name="checkpoint"),
            asyncio.create_task(self._every(self.config.get(
                "delegation.token.expiry.check.interval.ms"),
                self.token_credentials.remove_expired), name="expired-tokens"),
        ]
        if self.config.get("log.cleaner.enable"):
            self.log_cleaner = self.replicas.log_cleaner(self.config.get("log.cleaner.backoff.ms"))
            self._tasks.append(asyncio.create_task(self.log_cleaner.run(), name="log-cleaner"))

    async def _start_jwks(self, refresher, listener: str) -> None:
        """Kafka's broker reads the JWKS before it serves; then it is refreshed in the
        background (kbroker.server.jwks)."""
        from kbroker.server.jwks import JwksReadError

        try:
            count = await refresher.load()
        except JwksReadError as exc:
            raise StartupError(f"listener {listener}: {exc}",
                               "check sasl.oauthbearer.jwks.endpoint.url and the identity "
                               "provider", EXIT_LISTENER) from None
        log.info("listener %s: %d keys from the JWKS at %s", listener, count,
                 refresher.keys.location)
        self._jwks_tasks.append(asyncio.create_task(refresher.run(), name=f"jwks-{listener}"))

    async def stop(self) -> None:
        if self.cluster is not None:  # controlled shutdown while still serving, then leave
            await self.cluster.stop()
        if self.replicas is not None:
            await self.replicas.stop_replication()
        if self.http is not None:
            await self.http.stop()
        if self.schema_registry is not None:
            await self.schema_registry.stop()
        for _, server in self.servers:
            server.close()
        for connection in list(self.connections):
            connection.close()
        self.connection_limits.stop()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
        for _, server in self.servers:
            await server.wait_closed()
        self.coordinators.close_channels()
        await self.coordinators.stop()
        if self.producer_ids is not None:
            await self.producer_ids.close()
        if self.controller is not None:
            await self.controller.close()
        if self.replicas is not None:
            self.replicas.close()
        if self._state_change_file is not None:
            from kbroker.metadata import state_change
            state_change.close_file(self._state_change_file)
            self._state_change_file = None
        self._stopped.set()

    async def _join_cluster(self) -> None:
        """Register this broker's advertised endpoints (known now that listeners are bound)
        and start following ZooKeeper; a broker id another live broker holds stops start-up."""
        from kbroker.metadata.zk.registration import BrokerIdInUse
        from kbroker.metadata.zk.znodes import Endpoint

        protocols = self.config.listener_security_protocols
        endpoints = []
        for name, _host, _port in self.config.advertised_listeners:
            host, port = self.advertised_endpoint(name)
            endpoints.append(Endpoint(name, host, port, protocols.get(name, "PLAINTEXT")))
        if self.schema_registry is not None:  # where the others forward registry requests
            from kbroker.schema_registry.cluster import registration_endpoint
            endpoints.append(registration_endpoint(self.schema_registry.bound, endpoints[0].host,
                                                   Endpoint))
        try:
            await self.cluster.start(self.controller, endpoints,
                                     self.config.get("broker.rack") or None)
        except BrokerIdInUse as exc:
            await self.cluster.stop()
            self.cluster = None
            raise StartupError(str(exc).split("; ")[0], "give each broker its own broker.id",
                               EXIT_METADATA) from None

    # The coordinators, built by the first use (kbroker.server.coordinators).
    @property
    def group_coordinator(self):
        return self.coordinators.ensure().group

    @property
    def txn_coordinator(self):
        return self.coordinators.ensure().txn

    @property
    def share_coordinator(self):
        return self.coordinators.ensure().share

    @property
    def share_persister(self):
        return self.coordinators.ensure().share_persister

    @property
    def share_partitions(self):
        return self.coordinators.ensure().share_partitions

    @property
    def metadata(self):
        """The current metadata image (the CLI's ready banner reads its cluster id)."""
        return self.controller.image

    async def __aenter__(self):
        await self.start()
        return self

    async def __aexit__(self, *exc):
        await self.stop()

    def _services(self):
        from kbroker.handlers.context import BrokerServices, ClusterView
        from kbroker.handlers.fetch_sessions import FetchSessionCache

        rack = self.config.get("broker.rack") or None
        return BrokerServices(
            config=self.config, partitions=self.replicas, controller=self.controller,
            coordinators=self.coordinators, producer_ids=self.producer_ids,
            cluster=ClusterView(self.node_id, rack, self.advertised_endpoint),
            client_metrics=self.client_metrics, fetch_sessions=FetchSessionCache(
                self.config.get("max.incremental.fetch.session.cache.slots")))

    # --- what connections call -----------------------------------------------------------------

    def _connection_factory(self, security: ListenerSecurity):
        name = security.name
        if not security.sasl:
            if security.ssl_context is None:
                return lambda: KafkaConnection(self, name)  # PLAINTEXT: nothing more
            return lambda: KafkaConnection(self, name, security)
        return lambda: KafkaConnection(self, name, security,
                                       SaslAuthenticator(security, self.handle_frame))

    def _scram_credential(self, user: str, mechanism: str):
        """The stored SCRAM credential of ``user`` for ``mechanism``, or None."""
        from kbroker.security.sasl.scram import ScramCredential

        text = self.controller.image.scram_credential(user, mechanism)
        return ScramCredential.from_string(text) if text else None

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
                result = job()
                if asyncio.iscoroutine(result):
                    await result
            except Exception:
                log.exception("background job %s failed", job.__name__)


async def _open_cluster(config, node_id: int):
    """Cluster mode's metadata (ZooKeeper), or a StartupError naming ZooKeeper and the fix."""
    from kbroker.metadata.store import StoreUnavailableError
    from kbroker.metadata.zk.cluster import ZkCluster, ZkUnavailable

    try:
        return await ZkCluster.open(config, node_id)
    except (ZkUnavailable, StoreUnavailableError) as exc:  # the second: finishing a deletion
        raise StartupError(str(exc), "start ZooKeeper or fix zookeeper.connect",
                           EXIT_METADATA) from None
    except ValueError as exc:  # a cluster.id that does not match /cluster/id
        raise StartupError(str(exc), "set cluster.id to the stored one or use another chroot",
                           EXIT_METADATA) from None


def _open_metadata(store_class, log_dir: str, cluster_id: str | None, node_id: int):
    """The metadata store, or a StartupError naming the file and the fix."""
    from kbroker.metadata.local_store import FILE_NAME

    path = os.path.join(log_dir, FILE_NAME)
    try:
        return store_class(log_dir, cluster_id, node_id)
    except PermissionError as exc:
        raise StartupError(f"log dir {log_dir} is not accessible: {exc.strerror} "
                           f"({exc.filename or path})",
                           "give the broker's user read and write access to it, or change "
                           "log.dirs", EXIT_LOG_DIR) from None
    except OSError as exc:
        raise StartupError(f"cannot read or write {exc.filename or path}: {exc.strerror}",
                           "check the disk and the path, or change log.dirs",
                           EXIT_LOG_DIR) from None
    except (ValueError, KeyError, TypeError, AttributeError, json.JSONDecodeError) as exc:
        if "does not match" in str(exc):
            raise StartupError(f"{path}: {exc}", "set cluster.id to the stored one or point "
                               "log.dirs elsewhere", EXIT_METADATA) from None
        raise StartupError(f"{path} is corrupt ({type(exc).__name__}: {exc})",
                           f"restore {FILE_NAME} from a backup; without it the topics of this "
                           f"dir are unknown to the broker", EXIT_METADATA) from None


async def serve(config, on_ready=None) -> None:
    """Run until SIGTERM/SIGINT. ``on_ready(broker)`` runs once every listener is bound (the CLI
    writes its ready file and banner there)."""
    # Start-up builds what lives as long as the broker: modules, the metadata image, every log's
    # objects. No collection runs while it does (each full one would walk all of it so far), and
    # what it built is then frozen out of later collections, which keeps their pauses as short
    # as the garbage they look at.
    gc.disable()
    try:
        broker = Broker(config)
        started = time.monotonic()
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        # Before start: a cluster broker is visible (registered) before start returns, so a
        # SIGTERM may come while it starts; it then stops cleanly right after.
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await broker.start()
    finally:
        gc.freeze()
        gc.enable()
    endpoints = ", ".join(f"{name}://{host}:{port}" for name, (host, port) in broker.bound.items())
    log.info("kbroker ready: node %d of cluster %s listening on %s, data in %s (started in "
             "%.2f s)", broker.node_id, broker.controller.cluster_id, endpoints,
             ", ".join(config.log_dirs), time.monotonic() - started)
    if on_ready is not None:
        on_ready(broker)
    await stop.wait()
    log.info("shutting down: flushing logs and writing checkpoints")
    await broker.stop()
    log.info("kbroker stopped cleanly")


def run_broker(config, on_ready=None) -> None:
    asyncio.run(serve(config, on_ready))
