"""A metadata change, as one value: what a write (or a ZooKeeper notification) changes.

Kafka's KRaft model (``MetadataDelta`` over ``MetadataImage``): the controller validates a
request against the current image and expresses it as a :class:`MetadataDelta`; the store
commits the delta (a file rewrite, or one conditional ZooKeeper transaction per kind of znode);
the controller publishes ``image.apply(delta)``. A change another broker committed comes back
the same way, as a delta read from the znodes a watch named. So there is one shape of change
for both modes and both directions, and each field maps onto one family of Kafka's znodes:

==================  ===============================================  ==========================
field               meaning                                          ZooKeeper
==================  ===============================================  ==========================
``created``         topics put whole (id, replicas, configs,         ``/brokers/topics/T``,
                    states): a new topic, or one read afresh         ``/config/topics/T``,
                                                                     ``.../partitions/P/state``
``deleted``         topics removed                                   ``/admin/delete_topics/T``
``assignments``     an existing topic's replica lists and            ``/brokers/topics/T``
                    reassignments in progress (CreatePartitions,
                    KIP-455 steps)
``topic_configs``   a topic's whole set of config overrides          ``/config/topics/T``
``states``          partition states (leader, epoch, ISR) at the     ``.../partitions/P/state``
                    version the write is conditional on; a state at  (+ ``/isr_change_
                    ``MISSING_STATE.version`` creates the znode      notification``)
``broker_configs``  "cluster" (the default) or "broker" (this        ``/config/brokers/...``
                    node): the whole new set
``scram``           (user, mechanism) -> credential, None deletes    ``/config/users/U``
``acls_added``,     ACL tuples added and removed                     ``/kafka-acl[-extended]``
``acls_removed``
``client_quotas``   entity -> its whole new quota set ({} removes)   ``/config/users|clients|ips``
``features``        finalized feature levels and their epoch         ``/feature``
``tokens``          delegation token id -> its TokenInfo, None       ``/delegation_token/
                    removes                                          tokens/<id>``
``group_configs``   group id -> its whole new set of group configs   ``/config/groups/G``
                    ({} removes)
``brokers``,        live brokers (None: gone) and the active         ``/brokers/ids/N``,
``controller_id``   controller (read only: never committed)          ``/controller``
==================  ===============================================  ==========================

``isr_only`` marks a partition leader's own ISR change: conditional on the state's version
alone, not fenced by the controller epoch (a leader is not the controller; Kafka's
ZooKeeper-era leaders wrote their ISR the same way).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Mapping

from kbroker.metadata.image import BrokerInfo, PartitionState, TokenInfo, TopicMetadata

_EMPTY: Mapping = MappingProxyType({})
_UNCHANGED = object()


@dataclass(frozen=True, slots=True)
class Assignment:
    """Every partition's replica list, and the reassignments in progress (partition ->
    (adding, removing)), of a topic that exists."""

    replicas: tuple[tuple[int, ...], ...]
    reassigning: Mapping[int, tuple[tuple[int, ...], tuple[int, ...]]] = field(
        default_factory=lambda: _EMPTY)


def deleted_topic_ids(old, new, delta: "MetadataDelta"):
    """The ids of the topics ``delta`` deleted, or replaced by a topic of the same name."""
    for name in delta.deleted | frozenset(delta.created):
        before, after = old.topic(name), new.topic(name)
        if before is not None and (after is None or after.topic_id != before.topic_id):
            yield before.topic_id


def touched_topic_ids(old, new, delta: "MetadataDelta") -> set:
    """The ids, before and after, of every topic ``delta`` touches (a topic deleted, or replaced
    by one of the same name, counts under both): for listeners that keep state by topic id."""
    ids = set()
    for name in delta.topic_names():
        for image in (old, new):
            topic = image.topic(name) if image is not None else None
            if topic is not None:
                ids.add(topic.topic_id)
    return ids


@dataclass(frozen=True)
class MetadataDelta:
    created: Mapping[str, TopicMetadata] = field(default_factory=lambda: _EMPTY)
    deleted: frozenset[str] = frozenset()
    assignments: Mapping[str, Assignment] = field(default_factory=lambda: _EMPTY)
    topic_configs: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: _EMPTY)
    states: Mapping[tuple[str, int], PartitionState] = field(default_factory=lambda: _EMPTY)
    isr_only: bool = False
    broker_configs: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: _EMPTY)
    scram: Mapping[tuple[str, str], str | None] = field(default_factory=lambda: _EMPTY)
    acls_added: tuple = ()
    acls_removed: tuple = ()
    client_quotas: Mapping[tuple, Mapping[str, float]] = field(default_factory=lambda: _EMPTY)
    features: Mapping[str, int] | None = None
    features_epoch: int = 1
    tokens: Mapping[str, TokenInfo | None] = field(default_factory=lambda: _EMPTY)
    group_configs: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: _EMPTY)
    brokers: Mapping[int, BrokerInfo | None] = field(default_factory=lambda: _EMPTY)
    controller_id: object = _UNCHANGED

    @property
    def controller_changed(self) -> bool:
        return self.controller_id is not _UNCHANGED

    def topic_names(self) -> frozenset[str]:
        """Every topic this delta touches: created, deleted, reassigned, reconfigured, or with a
        partition state changed (what an image listener has to look at, and nothing else)."""
        return (frozenset(self.created) | self.deleted | frozenset(self.assignments)
                | frozenset(self.topic_configs) | frozenset(t for t, _ in self.states))

    @property
    def touches_topics(self) -> bool:
        return bool(self.created or self.deleted or self.assignments or self.topic_configs
                    or self.states)

    @property
    def empty(self) -> bool:
        return not (self.touches_topics or self.broker_configs or self.scram or self.acls_added
                    or self.acls_removed or self.client_quotas or self.features is not None
                    or self.tokens or self.group_configs or self.brokers
                    or self.controller_changed)

    def merged(self, other: "MetadataDelta") -> "MetadataDelta":
        """This delta followed by ``other`` (for a notification that needs several reads)."""
        if self.empty:
            return other
        if other.empty:
            return self
        created = {n: t for n, t in self.created.items() if n not in other.deleted}
        created.update(other.created)
        states = {k: s for k, s in self.states.items() if k[0] not in other.deleted}
        states.update(other.states)
        return MetadataDelta(
            created=created,
            deleted=(self.deleted - other.created.keys()) | other.deleted,
            assignments={**self.assignments, **other.assignments},
            topic_configs={**self.topic_configs, **other.topic_configs},
            states=states, isr_only=self.isr_only and other.isr_only,
            broker_configs={**self.broker_configs, **other.broker_configs},
            scram={**self.scram, **other.scram},
            acls_added=tuple(a for a in self.acls_added if a not in set(other.acls_removed))
            + tuple(other.acls_added),
            acls_removed=tuple(a for a in self.acls_removed if a not in set(other.acls_added))
            + tuple(other.acls_removed),
            client_quotas={**self.client_quotas, **other.client_quotas},
            features=other.features if other.features is not None else self.features,
            features_epoch=other.features_epoch if other.features is not None
            else self.features_epoch,
            tokens={**self.tokens, **other.tokens},
            group_configs={**self.group_configs, **other.group_configs},
            brokers={**self.brokers, **other.brokers},
            controller_id=other.controller_id if other.controller_changed
            else self.controller_id)

    def with_states(self, states: Mapping[tuple[str, int], PartitionState]) -> "MetadataDelta":
        return replace(self, states=MappingProxyType(dict(states)))

    def describe(self) -> str:
        """A short account of the delta, for logs."""
        parts = []
        for label, value in (("created", sorted(self.created)), ("deleted", sorted(self.deleted)),
                             ("assignments", sorted(self.assignments)),
                             ("topic configs", sorted(self.topic_configs)),
                             ("broker configs", sorted(self.broker_configs)),
                             ("SCRAM", sorted({u for u, _ in self.scram})),
                             ("client quotas", len(self.client_quotas)),
                             ("delegation tokens", sorted(self.tokens)),
                             ("group configs", sorted(self.group_configs)),
                             ("brokers", sorted(self.brokers))):
            if value:
                parts.append(f"{label} {value}")
        if self.states:
            topics = sorted({t for t, _ in self.states})
            parts.append(f"{len(self.states)} partition state(s) of {topics[:5]}"
                         + ("..." if len(topics) > 5 else ""))
        if self.acls_added or self.acls_removed:
            parts.append(f"ACLs +{len(self.acls_added)} -{len(self.acls_removed)}")
        if self.features is not None:
            parts.append(f"features {dict(self.features)} (epoch {self.features_epoch})")
        if self.controller_changed:
            parts.append(f"controller {self.controller_id}")
        return "; ".join(parts) or "nothing"


NO_CHANGE = MetadataDelta()
