"""A classic group: its members, its state, and the one table of state transitions.

States (Kafka's ``ClassicGroupState``)::

    Empty ──join──> PreparingRebalance ──all joined / timeout──> CompletingRebalance
      ^                 ^   │                                        │ leader's SyncGroup
      │                 │   └──no member left──> Empty                v (record appended)
      │                 └──────────── join / leave / expiry ────── Stable
    Dead: deleted (DeleteGroups, or an Empty group whose offsets all expired).

A ClassicGroup is membership: session state kept in memory as Kafka does (who has rejoined,
pending member ids, parked requests, the next generation). The facts that outlive a broker — a
generation's members and assignment, an emptied group, a deletion — are GroupMetadata records;
the shard keeps the last one of each group (``GroupShard.persisted``), changed only in replay, and
builds ClassicGroups from them when it loads (``from_record``).
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field
from typing import ClassVar

from kbroker.coordinator.group.records import CommittedOffset, group_metadata_tombstone
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.protocol.messages.consumer_protocol_subscription import ConsumerProtocolSubscription
from kbroker.protocol.messages.group_metadata_value import GroupMetadataValue


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


S = GroupState
# target state -> the states it may be entered from (Kafka's validPreviousStates)
TRANSITIONS: dict[GroupState, frozenset] = {
    S.PREPARING_REBALANCE: frozenset({S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY}),
    S.COMPLETING_REBALANCE: frozenset({S.PREPARING_REBALANCE}),
    S.STABLE: frozenset({S.COMPLETING_REBALANCE}),
    S.EMPTY: frozenset({S.PREPARING_REBALANCE}),
    S.DEAD: frozenset({S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.EMPTY, S.DEAD}),
}

CONSUMER_PROTOCOL_TYPE = "consumer"


@dataclass(eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list  # [(name, metadata bytes)], in the member's order of preference
    assignment: bytes = b""
    join_future: asyncio.Future | None = None
    sync_future: asyncio.Future | None = None
    join_version: int = 0  # JoinGroup version of the parked request (v5+ carries instance ids)
    is_new: bool = False

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None

    def metadata(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def same_protocols(self, protocols: list) -> bool:
        return [(n, bytes(m)) for n, m in self.protocols] == [(n, bytes(m)) for n, m in protocols]


@dataclass(eq=False)
class ClassicGroup:
    """A classic group: its live membership and rebalance state (a :class:`Group` of
    :mod:`kbroker.coordinator.group.types`; its durable part is its last GroupMetadata record)."""

    group_type: ClassVar[str] = "classic"
    group_id: str
    state: GroupState = GroupState.EMPTY
    previous_state: GroupState | None = None
    state_timestamp: int = -1  # when the state last changed (ms), persisted as currentStateTimestamp
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation: int = 0
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)  # in join order
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: set[str] = field(default_factory=set)  # v4+: got MEMBER_ID_REQUIRED
    new_member_added: bool = False

    # --- state ---------------------------------------------------------------------------------

    def transition(self, target: GroupState, now_ms: int) -> None:
        if self.state not in TRANSITIONS[target]:
            raise KafkaError(Errors.UNKNOWN_SERVER_ERROR,
                             f"group {self.group_id} cannot go from {self.state.value} to "
                             f"{target.value}")
        self.previous_state, self.state = self.state, target
        self.state_timestamp = now_ms

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def is_empty(self) -> bool:
        return self.state is GroupState.EMPTY

    # --- members -------------------------------------------------------------------------------

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None \
                and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            # Kafka prefers a member that is already waiting in JoinGroup.
            waiting = [m for m in self.members.values() if m.awaiting_join]
            nxt = waiting[0] if waiting else next(iter(self.members.values()), None)
            self.leader_id = nxt.member_id if nxt is not None else None
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        return self.static_members.get(instance_id) if instance_id is not None else None

    def has_all_members_joined(self) -> bool:
        return (all(m.awaiting_join for m in self.members.values())
                and not self.pending_members)

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # --- protocols -----------------------------------------------------------------------------

    def supports_protocols(self, protocol_type: str, protocols: list) -> bool:
        """Kafka's rule: an empty group takes any non-empty type and list; otherwise the type
        must match and one protocol must be supported by every member."""
        names = {name for name, _ in protocols}
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def candidate_protocols(self) -> set[str]:
        candidates = None
        for member in self.members.values():
            names = set(member.protocol_names())
            candidates = names if candidates is None else candidates & names
        return candidates or set()

    def select_protocol(self) -> str:
        """Every member votes for its most preferred candidate; most votes wins (ties: the
        candidate the first member prefers)."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            vote = next(name for name in member.protocol_names() if name in candidates)
            votes[vote] = votes.get(vote, 0) + 1
        first = next(iter(self.members.values())).protocol_names()
        return max(votes, key=lambda name: (votes[name], -first.index(name)))

    def subscribed_topics(self) -> set[str] | None:
        """Topics the consumer-protocol members subscribe to; None when unknown."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            metadata = member.metadata(self.protocol_name)
            try:
                version = int.from_bytes(metadata[:2], "big", signed=True)
                subscription = ConsumerProtocolSubscription.decode(
                    memoryview(metadata)[2:], max(0, min(version, 3)))
            except Exception:
                return None
            topics.update(subscription.topics)
        return topics

    # --- the Group interface (kbroker.coordinator.group.types) -----------------------------------

    def list_entry(self) -> tuple[str, str, str, str]:
        return self.group_id, self.protocol_type or "", self.state.value, self.group_type

    def delete_error(self) -> Errors:
        return Errors.NONE if self.is_in(GroupState.EMPTY) else Errors.NON_EMPTY_GROUP

    def tombstones(self) -> list:
        return [group_metadata_tombstone(self.group_id)]

    def guarded_topics(self) -> set[str] | None:
        return set() if self.is_in(GroupState.EMPTY) else self.subscribed_topics()

    def expired_offsets(self, committed: dict[tuple[str, int], CommittedOffset],
                        retention_ms: int, now: int) -> list[tuple[str, int]]:
        return classic_expired_offsets(self, committed, retention_ms, now)

    def expires_with_offsets(self, expired: int, committed: int) -> bool:
        return self.is_in(GroupState.EMPTY) and expired == committed

    def durable_view(self):
        return None  # its record is GroupShard.persisted's

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        pass  # classic members fetch without an epoch

    # --- persistence ---------------------------------------------------------------------------

    def to_record(self, assignments: dict[str, bytes] | None = None) -> GroupMetadataValue:
        members = []
        for member in self.members.values():
            assignment = member.assignment if assignments is None else \
                assignments.get(member.member_id, b"")
            members.append(GroupMetadataValue.MemberMetadata(
                member_id=member.member_id, group_instance_id=member.group_instance_id,
                client_id=member.client_id, client_host=member.client_host,
                rebalance_timeout=member.rebalance_timeout_ms,
                session_timeout=member.session_timeout_ms,
                subscription=member.metadata(self.protocol_name), assignment=assignment))
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "", generation=self.generation,
            protocol=self.protocol_name if members else None,
            leader=self.leader_id if members else None,
            current_state_timestamp=self.state_timestamp, members=members)

    @classmethod
    def from_record(cls, group_id: str, value: GroupMetadataValue) -> "ClassicGroup":
        group = cls(group_id, protocol_type=value.protocol_type or None,
                    protocol_name=value.protocol, generation=value.generation,
                    state_timestamp=value.current_state_timestamp)
        for m in value.members:
            member = Member(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                            m.rebalance_timeout if m.rebalance_timeout >= 0 else m.session_timeout,
                            m.session_timeout, value.protocol_type,
                            [(value.protocol, bytes(m.subscription))], bytes(m.assignment))
            group.add(member)
        group.leader_id = value.leader if group.members else None
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        return group


def classic_expired_offsets(group: ClassicGroup | None,
                            committed: dict[tuple[str, int], CommittedOffset], retention_ms: int,
                            now: int) -> list[tuple[str, int]]:
    """The expired ones of a classic group's offsets (``group`` None: offsets without a group;
    :func:`_expired` has Kafka's rule)."""
    return [(topic, partition) for (topic, partition), c in committed.items()
            if _expired(group, topic, c, retention_ms, now)]


def _expired(group: ClassicGroup | None, topic: str, c: CommittedOffset, retention_ms: int,
             now: int) -> bool:
    """Kafka's rule for a classic group's offsets. An explicit expire timestamp (OffsetCommit
    v1) wins; an Empty group's offsets expire a retention after it became Empty (after their
    commit when it never had a state); a Stable consumer group's offsets of topics it no longer
    subscribes to, a retention after their commit."""
    if c.expire_timestamp >= 0:
        return now >= c.expire_timestamp
    if group is None or group.is_in(GroupState.EMPTY):
        if group is None or group.protocol_type is None or group.state_timestamp < 0:
            base = c.commit_timestamp
        else:
            base = group.state_timestamp
        return now - base >= retention_ms
    if group.is_in(GroupState.STABLE):
        topics = group.subscribed_topics()
        if topics is not None and topic not in topics:
            return now - c.commit_timestamp >= retention_ms
    return False
