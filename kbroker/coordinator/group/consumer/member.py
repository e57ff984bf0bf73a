"""A consumer-group member (KIP-848): who it is, what it subscribes to, its epochs and what it owns.

A member is immutable: every change makes a new one (``dataclasses.replace``), so an operation can
compute the next member, write its records, and the replay installs an equal object. Assignments
carry the epoch at which each partition was given to the member (KIP-1251's assignment epochs):
``{topic_id: {partition: assignment epoch}}``.

Member epochs: 0 joins (or rejoins after a fence), -1 leaves, -2 is a static member's temporary
leave (its instance id stays reserved until it rejoins, KIP-848).
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Mapping

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2

Assignment = Mapping[uuid.UUID, Mapping[int, int]]  # topic id -> partition -> assignment epoch
TargetAssignment = Mapping[uuid.UUID, frozenset]     # topic id -> partitions
EMPTY: Assignment = MappingProxyType({})


class MemberState(enum.IntEnum):
    """Where a member is in its reconciliation (Kafka's MemberState, persisted as an int8)."""
    STABLE = 0                 # owns exactly its target assignment at the target epoch
    UNREVOKED_PARTITIONS = 1   # must give up partitions before it may move to the next epoch
    UNRELEASED_PARTITIONS = 2  # at the target epoch, waiting for partitions others still own
    UNKNOWN = 127              # a state a newer broker wrote: the member is fenced and rejoins

    @classmethod
    def of(cls, value: int) -> "MemberState":
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class ClassicMetadata:
    """A member that speaks the classic protocol inside a consumer group (online migration)."""
    session_timeout_ms: int
    protocols: tuple  # ((name, metadata bytes), ...) in the member's order of preference


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset = frozenset()
    subscribed_topic_regex: str = ""
    server_assignor: str | None = None
    assigned: Assignment = field(default_factory=lambda: EMPTY)
    pending_revocation: Assignment = field(default_factory=lambda: EMPTY)
    classic: ClassicMetadata | None = field(default=None)

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    @property
    def regex(self) -> str | None:
        return self.subscribed_topic_regex or None

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == epoch

    def with_epoch(self, epoch: int, **changes) -> "ConsumerGroupMember":
        """The member moved to ``epoch``; its previous epoch is the one it had."""
        return replace(self, member_epoch=epoch, previous_member_epoch=self.member_epoch, **changes)

    def assignment_epoch(self, topic_id: uuid.UUID, partition: int) -> int | None:
        """The epoch at which the member got the partition (owned or pending revocation)."""
        epoch = self.assigned.get(topic_id, {}).get(partition)
        if epoch is None:
            epoch = self.pending_revocation.get(topic_id, {}).get(partition)
        return epoch

    def owned_partitions(self) -> dict:
        """{topic_id: set(partitions)} of the assigned partitions (without epochs)."""
        return {t: set(p) for t, p in self.assigned.items()}


def freeze(assignment: Mapping) -> Assignment:
    """An immutable {topic: {partition: epoch}} without empty topics."""
    return MappingProxyType({t: MappingProxyType(dict(p)) for t, p in assignment.items() if p})


def with_epoch(partitions: Mapping, epoch: int) -> Assignment:
    """{topic: partitions} -> {topic: {partition: epoch}}."""
    return freeze({t: {p: epoch for p in parts} for t, parts in partitions.items()})


def without_epochs(assignment: Assignment) -> dict:
    return {t: frozenset(p) for t, p in assignment.items()}
