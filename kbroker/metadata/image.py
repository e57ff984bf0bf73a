"""The metadata image: one immutable, consistent view of the cluster's topics and configs.

The controller publishes a new :class:`MetadataImage` after every persisted change; everyone
else only reads images. A reader that keeps a reference keeps one consistent view: nothing in an
image (or in the :class:`TopicMetadata` it holds) ever changes, and two images share every topic
a change did not touch, so the replica manager finds what changed by identity (``is``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Mapping

# Kafka's rule: up to 249 characters of ASCII alphanumerics, '.', '_' and '-', but not "." or "..".
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
_EMPTY: Mapping = MappingProxyType({})


def topic_name_problem(name: str | None) -> str | None:
    """Why ``name`` is not a legal topic name, or None if it is."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be '{name}'"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"topic name is longer than {MAX_TOPIC_NAME_LENGTH} characters"
    bad = sorted(set(name) - _LEGAL)
    if bad:
        return (f"topic name '{name}' contains illegal characters {''.join(bad)!r}; "
                "use ASCII alphanumerics, '.', '_' and '-'")
    return None


def frozen_mapping(values: Mapping | None) -> Mapping:
    return MappingProxyType(dict(values)) if values else _EMPTY


@dataclass(frozen=True, slots=True)
class PartitionState:
    """Who leads one partition: Kafka's ``/brokers/topics/T/partitions/P/state``.

    ``leader`` is -1 while no replica can lead (offline). ``version`` is the znode version the
    state was read at; an ISR change names it, so a writer with an older view loses (cluster)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    version: int = 0
    controller_epoch: int = 0


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A live broker (``/brokers/ids/N``): its advertised endpoint per listener, and rack."""

    node_id: int
    endpoints: Mapping[str, tuple[str, int]]  # listener name -> (host, port)
    rack: str | None = None


@dataclass(frozen=True, eq=False)
class TopicMetadata:
    """A topic: name, id, the replica list of each partition (its assignment) and its config
    overrides (name -> string value). ``assignments[p]`` is partition p's replicas, leader
    preferred first (Kafka's ``/brokers/topics/T`` "partitions" map)."""

    name: str
    topic_id: uuid.UUID
    assignments: tuple[tuple[int, ...], ...]
    configs: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    # Leader, epoch and ISR per partition (a cluster's partition state znodes). Empty on a single
    # node, where every partition is led by its only replica: see :meth:`state`.
    states: tuple[PartitionState, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "assignments", tuple(tuple(r) for r in self.assignments))
        if not isinstance(self.configs, MappingProxyType):
            object.__setattr__(self, "configs", frozen_mapping(self.configs))
        object.__setattr__(self, "states", tuple(self.states))

    def state(self, index: int) -> PartitionState:
        """Partition ``index``'s state; without stored states, the first replica leads at epoch
        0 with every replica in sync (a single node: itself)."""
        if self.states:
            return self.states[index]
        replicas = self.assignments[index]
        return PartitionState(replicas[0] if replicas else -1, 0, replicas)

    def with_states(self, states) -> "TopicMetadata":
        return replace(self, states=tuple(states))

    @property
    def num_partitions(self) -> int:
        return len(self.assignments)

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    def with_assignments(self, assignments) -> "TopicMetadata":
        return replace(self, assignments=tuple(assignments))

    def with_configs(self, configs: Mapping) -> "TopicMetadata":
        return replace(self, configs=frozen_mapping(configs))

    def __repr__(self) -> str:
        return (f"TopicMetadata({self.name!r}, {self.topic_id}, partitions={self.num_partitions},"
                f" configs={dict(self.configs)})")


@dataclass(frozen=True, eq=False)
class MetadataImage:
    """Everything a broker needs to know about the cluster's metadata, as of one change."""

    cluster_id: str
    topics_by_name: Mapping[str, TopicMetadata] = field(default_factory=lambda: _EMPTY)
    topics_by_id: Mapping[uuid.UUID, TopicMetadata] = field(default_factory=lambda: _EMPTY)
    # Dynamic broker configs: "cluster" (the cluster-wide default) and "broker" (this node).
    dynamic_broker_configs: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: _EMPTY)
    # SCRAM credentials: user -> mechanism -> Kafka's credential string
    # ("salt=...,stored_key=...,server_key=...,iterations=N", as in /config/users/<user>).
    scram_credentials: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: _EMPTY)
    # ACLs: a tuple of kbroker.security.authorizer.Acl tuples (Kafka's wire codes); replaced, never
    # changed, so the authorizer caches its index per tuple.
    acls: tuple = ()
    # Live brokers (a cluster's ``/brokers/ids``) and the active controller. Empty / None on a
    # single node: the broker describes itself.
    brokers: Mapping[int, BrokerInfo] = field(default_factory=lambda: _EMPTY)
    controller_id: int | None = None
    # Client quotas (KIP-546): entity -> quota key -> value. An entity is a tuple of
    # (entity type, name) pairs sorted by type, name None for the <default> entity, e.g.
    # (("client-id", None), ("user", "alice")); types are "user", "client-id" and "ip".
    client_quotas: Mapping[tuple, Mapping[str, float]] = field(default_factory=lambda: _EMPTY)
    # Finalized feature levels set through UpdateFeatures (KIP-584), feature -> level; a feature
    # never set has its default (kbroker.handlers.features). The epoch grows with every change,
    # so a client can tell a newer answer; 1 before any change.
    finalized_features: Mapping[str, int] = field(default_factory=lambda: _EMPTY)
    features_epoch: int = 1

    @classmethod
    def build(cls, cluster_id: str, topics=(), broker_configs: Mapping | None = None,
              scram_credentials: Mapping | None = None, acls=(),
              client_quotas: Mapping | None = None, finalized_features: Mapping | None = None,
              features_epoch: int = 1):
        by_name = {t.name: t for t in topics}
        return cls(cluster_id, MappingProxyType(by_name),
                   MappingProxyType({t.topic_id: t for t in by_name.values()}),
                   MappingProxyType({scope: frozen_mapping((broker_configs or {}).get(scope))
                                     for scope in ("cluster", "broker")}),
                   MappingProxyType({user: frozen_mapping(mechanisms) for user, mechanisms
                                     in (scram_credentials or {}).items() if mechanisms}),
                   tuple(tuple(a) for a in acls),
                   client_quotas=_frozen_quotas(client_quotas or {}),
                   finalized_features=frozen_mapping(finalized_features),
                   features_epoch=features_epoch)

    # --- reads (the names handlers have always used) -------------------------------------------

    def topics(self) -> Mapping[str, TopicMetadata]:
        return self.topics_by_name

    def topic(self, name: str) -> TopicMetadata | None:
        return self.topics_by_name.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        return self.topics_by_id.get(topic_id)

    def broker_configs(self, *, cluster_default: bool) -> dict[str, str]:
        return dict(self.dynamic_broker_configs.get("cluster" if cluster_default else "broker",
                                                    _EMPTY))

    def scram_credential(self, user: str, mechanism: str) -> str | None:
        return self.scram_credentials.get(user, _EMPTY).get(mechanism)

    def partition_count(self) -> int:
        return sum(t.num_partitions for t in self.topics_by_name.values())

    # --- the next image (copies the two small topic maps; topics themselves are shared) --------

    def with_topic(self, topic: TopicMetadata) -> "MetadataImage":
        by_name = dict(self.topics_by_name)
        by_id = dict(self.topics_by_id)
        old = by_name.get(topic.name)
        if old is not None:
            del by_id[old.topic_id]
        by_name[topic.name] = topic
        by_id[topic.topic_id] = topic
        return replace(self, topics_by_name=MappingProxyType(by_name),
                       topics_by_id=MappingProxyType(by_id))

    def without_topic(self, name: str) -> "MetadataImage":
        by_name = dict(self.topics_by_name)
        by_id = dict(self.topics_by_id)
        old = by_name.pop(name)
        del by_id[old.topic_id]
        return replace(self, topics_by_name=MappingProxyType(by_name),
                       topics_by_id=MappingProxyType(by_id))

    def with_scram_credentials(self, credentials: Mapping[str, Mapping[str, str]]
                               ) -> "MetadataImage":
        return replace(self, scram_credentials=MappingProxyType(
            {user: frozen_mapping(m) for user, m in credentials.items() if m}))

    def with_acls(self, acls) -> "MetadataImage":
        return replace(self, acls=tuple(acls))

    def with_brokers(self, brokers, controller_id: int | None) -> "MetadataImage":
        return replace(self, brokers=MappingProxyType({b.node_id: b for b in brokers}),
                       controller_id=controller_id)
    def with_client_quotas(self, quotas: Mapping[tuple, Mapping[str, float]]) -> "MetadataImage":
        return replace(self, client_quotas=_frozen_quotas(quotas))

    def with_finalized_features(self, levels: Mapping[str, int], epoch: int) -> "MetadataImage":
        return replace(self, finalized_features=frozen_mapping(levels), features_epoch=epoch)

    def with_broker_configs(self, configs: Mapping, *, cluster_default: bool) -> "MetadataImage":
        scopes = dict(self.dynamic_broker_configs)
        scopes["cluster" if cluster_default else "broker"] = frozen_mapping(configs)
        return replace(self, dynamic_broker_configs=MappingProxyType(scopes))


def _frozen_quotas(quotas: Mapping) -> Mapping:
    return MappingProxyType({tuple(sorted(entity)): frozen_mapping(values)
                             for entity, values in quotas.items() if values})
