"""What a handler gets besides the decoded request: a small, typed context.

A handler names exactly what it uses through this context and nothing else of the broker:

- ``partitions`` — the replica manager, the only door to partition logs (:mod:`kbroker.replica`);
- ``metadata`` — the current, immutable view of topics and the cluster id (reads);
- ``controller`` — the only writer of topics, partitions and configs;
- ``groups`` — the group coordinator; ``txn`` — the transaction coordinator (both built by the
  first request that reads them, with the share coordinator: kbroker.server.coordinators);
  ``producer_ids`` — producer id blocks;
- ``config`` — the broker configuration; ``cluster`` — this node's id, rack and advertised
  endpoints;
- the request's own facts: api key and version, correlation id, client id, the client's host,
  the listener it came in on and the authenticated principal;
- ``session`` — what handlers keep per client connection (:mod:`kbroker.handlers.session`), None
  for a request that came from no connection;
- ``share`` — the share-partition manager (:mod:`kbroker.share`); ``share_coordinator`` and
  ``share_persister`` — the share-group state's shards and what reaches them;
- ``client_metrics`` — client telemetry (KIP-714, :mod:`kbroker.telemetry`); ``connection`` — the
  client's connection as an opaque object (telemetry keys its client instances by it and reads
  its ``port`` and ``client_software``), None without one.

``BrokerServices`` is built once at start-up; :meth:`RequestContext.for_request` makes a context per
request by copying those references (cheap: a handful of attribute stores).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from kbroker.config import BrokerConfig
    from kbroker.coordinator.group.coordinator import GroupCoordinator
    from kbroker.coordinator.share.coordinator import ShareCoordinator
    from kbroker.coordinator.share.persister import Persister
    from kbroker.coordinator.txn.coordinator import TransactionCoordinator
    from kbroker.handlers.fetch_sessions import FetchSessionCache
    from kbroker.handlers.session import ClientSession
    from kbroker.metadata.controller import Controller
    from kbroker.metadata.producer_ids import ProducerIdManager
    from kbroker.replica.replica_manager import ReplicaManager
    from kbroker.share.manager import SharePartitionManager
    from kbroker.telemetry.manager import ClientMetricsManager

ANONYMOUS = "User:ANONYMOUS"


class CloseConnection(Exception):
    """Raised by a handler when Kafka closes the connection instead of answering (for example a
    failed acks=0 produce, so the client notices). The server closes it and logs nothing more."""


@dataclass(frozen=True, slots=True)
class ClusterView:
    """This node as clients see it: id, rack and the advertised endpoint per listener."""

    node_id: int
    rack: str | None
    advertised_endpoint: Callable[[str | None], tuple[str, int]]


@dataclass(frozen=True, slots=True)
class BrokerServices:
    """The parts of the broker handlers may use; one instance per broker."""

    config: "BrokerConfig"
    partitions: "ReplicaManager"
    controller: "Controller"
    # The group, transaction and share coordinators with the share-partition manager, built on
    # first use (kbroker.server.coordinators.Coordinators: ``ensure()`` builds them, then
    # ``group``, ``txn``, ``share``, ``share_persister``, ``share_partitions``).
    coordinators: object
    producer_ids: "ProducerIdManager"
    cluster: ClusterView
    client_metrics: "ClientMetricsManager | None" = None
    # Replica fetches' incremental fetch sessions (KIP-227).
    fetch_sessions: "FetchSessionCache | None" = None


class RequestContext:
    __slots__ = ("api_key", "api_version", "correlation_id", "client_id", "client_host",
                 "listener", "principal", "config", "partitions", "controller", "_coordinators",
                 "producer_ids", "cluster", "session", "client_metrics", "connection",
                 "fetch_sessions")

    def __init__(self, services: BrokerServices | None, api_key: int, api_version: int,
                 correlation_id: int, client_id: str | None, client_host: str = "?",
                 listener: str | None = None, principal: str = ANONYMOUS,
                 session: "ClientSession | None" = None, connection=None):
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.client_host = client_host
        self.listener = listener
        self.principal = principal
        self.session = session
        self.connection = connection
        if services is not None:
            self.config = services.config
            self.partitions = services.partitions
            self.controller = services.controller
            self._coordinators = services.coordinators
            self.producer_ids = services.producer_ids
            self.cluster = services.cluster
            self.client_metrics = services.client_metrics
            self.fetch_sessions = services.fetch_sessions

    # The coordinators: the first request that reaches one builds them all.
    @property
    def groups(self) -> "GroupCoordinator":
        return self._coordinators.ensure().group

    @property
    def txn(self) -> "TransactionCoordinator":
        return self._coordinators.ensure().txn

    @property
    def share_coordinator(self) -> "ShareCoordinator":
        return self._coordinators.ensure().share

    @property
    def share_persister(self) -> "Persister":
        """What every share partition's state goes through (local shard or the coordinator
        broker)."""
        return self._coordinators.ensure().share_persister

    @property
    def share(self) -> "SharePartitionManager":
        return self._coordinators.ensure().share_partitions

    @property
    def node_id(self) -> int:
        return self.cluster.node_id

    @property
    def metadata(self):
        """The current metadata image (topics, ids, cluster id); immutable, so a handler that
        reads it twice sees one consistent view only if it keeps the first reference."""
        return self.controller.image

    def advertised_endpoint(self) -> tuple[str, int]:
        """The host and port clients should use, for the listener this request came in on."""
        return self.cluster.advertised_endpoint(self.listener)
