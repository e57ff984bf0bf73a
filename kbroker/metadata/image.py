"""The metadata image: one immutable, consistent view of the cluster's topics and configs.

The controller publishes ``image.apply(delta)`` after every committed change (its own, or one
read from ZooKeeper); everyone else only reads images. A reader that keeps a reference keeps one
consistent view: nothing in an image (or in the :class:`TopicMetadata` it holds) ever changes,
and an image shares with the one before it every part a delta did not touch: the topics, and
within a topic the replica lists and each partition's :class:`PartitionState`. Listeners find
what changed by identity (``is``), so a leader change in a topic of 20,000 partitions costs
them one partition's work.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Mapping

# Kafka's rule: up to 249 characters of ASCII alphanumerics, '.', '_' and '-', but not "." or "..".
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
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
    # The zxid of the znode's last change, as read (0: not read, e.g. written here); what a
    # notification created at or before it names, this state has already.
    zxid: int = field(default=0, compare=False)

    @property
    def missing(self) -> bool:
        """The state znode is not written yet (a creation in progress, or interrupted)."""
        return self.leader_epoch < 0


# A partition whose state znode is not written yet: no leader, and a version below any real
# one, so the first state read or written for it is newer. In a delta, a state at this version
# asks the store to create the znode rather than update it.
MISSING_STATE = PartitionState(-1, -1, (), -1, -1)


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """A delegation token (KIP-48), as Kafka's ``TokenInformation``: its id, owner, the principal
    that asked for it (KIP-373), the principals that may renew it, and its times (epoch ms). The
    HMAC is not kept: every broker computes it from the id and ``delegation.token.secret.key``.
    Principals are strings ``Type:name`` (``User:alice``)."""

    token_id: str
    owner: str
    requester: str
    renewers: tuple[str, ...]
    issue_ms: int
    max_ms: int
    expiry_ms: int

    def owner_or_renewer(self, principal: str) -> bool:
        """Kafka's ``ownerOrRenewer``: who may see the token without an ACL."""
        return principal in (self.owner, self.requester) or principal in self.renewers

    def expired(self, now_ms: int) -> bool:
        return self.max_ms < now_ms or self.expiry_ms < now_ms


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
    # Reassignments in progress (KIP-455): partition -> (adding replicas, removing replicas);
    # ``assignments`` then holds the full replica set, target and original.
    reassigning: Mapping[int, tuple[tuple[int, ...], tuple[int, ...]]] = field(
        default_factory=lambda: _EMPTY)

    def __post_init__(self):
        if not (isinstance(self.assignments, tuple)
                and all(isinstance(r, tuple) for r in self.assignments)):
            object.__setattr__(self, "assignments", tuple(tuple(r) for r in self.assignments))
        if not isinstance(self.configs, MappingProxyType):
            object.__setattr__(self, "configs", frozen_mapping(self.configs))
        if not isinstance(self.states, tuple):
            object.__setattr__(self, "states", tuple(self.states))
        if not isinstance(self.reassigning, MappingProxyType):
            object.__setattr__(self, "reassigning", frozen_mapping(self.reassigning))

    def state(self, index: int) -> PartitionState:
        """Partition ``index``'s state; without stored states, the first replica leads at epoch
        0 with every replica in sync (a single node: itself)."""
        if self.states:
            return self.states[index] if index < len(self.states) else MISSING_STATE
        replicas = self.assignments[index]
        return PartitionState(replicas[0] if replicas else -1, 0, replicas)

    def with_states(self, states) -> "TopicMetadata":
        return replace(self, states=tuple(states))

    def with_states_at(self, changes: Mapping[int, PartitionState]) -> "TopicMetadata":
        """The topic with the states of some partitions replaced; every other partition keeps
        its state object (listeners skip it by identity)."""
        states = list(self.states)
        if len(states) < self.num_partitions:
            states += [MISSING_STATE] * (self.num_partitions - len(states))
        for index, state in changes.items():
            if index < len(states):
                states[index] = state
        return replace(self, states=tuple(states))

    @property
    def num_partitions(self) -> int:
        return len(self.assignments)

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    def with_assignments(self, assignments, reassigning: Mapping | None = None
                         ) -> "TopicMetadata":
        """New replica lists (and reassignments in progress); a partition whose list did not
        change keeps its tuple, and a partition added has no state yet (a cluster's topic)."""
        assignments = tuple(old if old == new else tuple(new) for old, new in
                            zip(self.assignments, assignments)) + \
            tuple(tuple(r) for r in assignments[len(self.assignments):])
        states = self.states
        if states and len(states) < len(assignments):
            states = states + (MISSING_STATE,) * (len(assignments) - len(states))
        return replace(self, assignments=assignments, states=states[:len(assignments)],
                       reassigning=self.reassigning if reassigning is None
                       else frozen_mapping(reassigning))

    def with_configs(self, configs: Mapping) -> "TopicMetadata":
        return replace(self, configs=frozen_mapping(configs))

    def same_as(self, other: "TopicMetadata | None") -> bool:
        """Equal in everything a reader sees (the class compares by identity)."""
        return (other is not None and self.topic_id == other.topic_id
                and self.assignments == other.assignments
                and dict(self.configs) == dict(other.configs) and self.states == other.states
                and dict(self.reassigning) == dict(other.reassigning))

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
    # Delegation tokens (KIP-48): token id -> TokenInfo.
    delegation_tokens: Mapping[str, TokenInfo] = field(default_factory=lambda: _EMPTY)
    # Group configs (KIP-848, the GROUP config resource): group id -> config name -> value (a
    # string, as topic configs); a group without overrides is absent.
    group_configs: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: _EMPTY)

    @classmethod
    def build(cls, cluster_id: str, topics=(), broker_configs: Mapping | None = None,
              scram_credentials: Mapping | None = None, acls=(),
              client_quotas: Mapping | None = None, finalized_features: Mapping | None = None,
              features_epoch: int = 1, delegation_tokens=(),
              group_configs: Mapping | None = None):
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
                   features_epoch=features_epoch,
                   delegation_tokens=MappingProxyType({t.token_id: t
                                                       for t in delegation_tokens}),
                   group_configs=_frozen_group_configs(group_configs or {}))

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

    def group_config(self, group_id: str) -> Mapping[str, str]:
        """The group's config overrides (empty when it has none)."""
        return self.group_configs.get(group_id, _EMPTY)

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

    # --- the next image from a delta ----------------------------------------------------------

    def apply(self, delta) -> "MetadataImage":
        """The image after ``delta`` (a :class:`kbroker.metadata.delta.MetadataDelta`). A delta
        may name a topic this image no longer has (a notification read after the topic went):
        that part is skipped, the rest applies."""
        changes = {}
        if delta.touches_topics:
            changes.update(self._topic_changes(delta))
        if delta.broker_configs:
            scopes = dict(self.dynamic_broker_configs)
            scopes.update({scope: frozen_mapping(c) for scope, c in delta.broker_configs.items()})
            changes["dynamic_broker_configs"] = MappingProxyType(scopes)
        if delta.scram:
            credentials = {user: dict(m) for user, m in self.scram_credentials.items()}
            for (user, mechanism), credential in delta.scram.items():
                if credential is None:
                    credentials.get(user, {}).pop(mechanism, None)
                else:
                    credentials.setdefault(user, {})[mechanism] = credential
            changes["scram_credentials"] = MappingProxyType(
                {user: frozen_mapping(m) for user, m in credentials.items() if m})
        if delta.acls_added or delta.acls_removed:
            removed = set(delta.acls_removed)
            kept = [a for a in self.acls if a not in removed]
            present = set(kept)
            changes["acls"] = tuple(kept) + tuple(a for a in dict.fromkeys(delta.acls_added)
                                                  if a not in present)
        if delta.client_quotas:
            quotas = dict(self.client_quotas)
            quotas.update(delta.client_quotas)
            changes["client_quotas"] = _frozen_quotas(quotas)
        if delta.features is not None:
            changes["finalized_features"] = frozen_mapping(delta.features)
            changes["features_epoch"] = delta.features_epoch
        if delta.tokens:
            tokens = dict(self.delegation_tokens)
            for token_id, info in delta.tokens.items():
                if info is None:
                    tokens.pop(token_id, None)
                else:
                    tokens[token_id] = info
            changes["delegation_tokens"] = MappingProxyType(tokens)
        if delta.group_configs:
            groups = dict(self.group_configs)
            groups.update(delta.group_configs)
            changes["group_configs"] = _frozen_group_configs(groups)
        if delta.brokers:
            brokers = dict(self.brokers)
            for node_id, info in delta.brokers.items():
                if info is None:
                    brokers.pop(node_id, None)
                else:
                    brokers[node_id] = info
            changes["brokers"] = MappingProxyType(dict(sorted(brokers.items())))
        if delta.controller_changed:
            changes["controller_id"] = delta.controller_id
        return replace(self, **changes) if changes else self

    def _topic_changes(self, delta) -> dict:
        by_name = dict(self.topics_by_name)
        for name in delta.deleted:
            by_name.pop(name, None)
        by_name.update(delta.created)
        for name, assignment in delta.assignments.items():
            if name in by_name:
                by_name[name] = by_name[name].with_assignments(assignment.replicas,
                                                               assignment.reassigning)
        for name, configs in delta.topic_configs.items():
            if name in by_name:
                by_name[name] = by_name[name].with_configs(configs)
        states: dict[str, dict[int, PartitionState]] = {}
        for (name, index), state in delta.states.items():
            states.setdefault(name, {})[index] = state
        for name, changed in states.items():
            topic = by_name.get(name)
            if topic is not None and topic.states:
                by_name[name] = topic.with_states_at(changed)
        return {"topics_by_name": MappingProxyType(by_name),
                "topics_by_id": MappingProxyType({t.topic_id: t for t in by_name.values()})}


def _frozen_quotas(quotas: Mapping) -> Mapping:
    return MappingProxyType({tuple(sorted(entity)): frozen_mapping(values)
                             for entity, values in quotas.items() if values})


def _frozen_group_configs(configs: Mapping) -> Mapping:
    return MappingProxyType({group: frozen_mapping({k: str(v) for k, v in values.items()})
                             for group, values in configs.items() if values})
