"""A streams-group member (KIP-1071): who it is (process, endpoint, client tags), its epochs and
the tasks it owns.

Tasks are ``{subtopology id: partitions}``. A member's active tasks carry the epoch at which it
got each of them (its assignment epochs, which fence a commit of a task it no longer owns):
``{subtopology id: {partition: epoch}}``; standby and warm-up tasks have no epochs. Everything is
immutable: an operation computes the next member, writes its records, and the replay installs an
equal object.

Member epochs: 0 joins (or rejoins after a fence), -1 leaves, -2 is a static member's temporary
leave (its instance id stays reserved until it rejoins).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Mapping

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2

_EMPTY_MAP: Mapping = MappingProxyType({})


class MemberState(enum.IntEnum):
    """Where a member is in its reconciliation (persisted as an int8, Kafka's values)."""
    STABLE = 1             # owns its target tasks at the target epoch
    UNREVOKED_TASKS = 2    # must give up tasks before it moves to the next epoch
    UNRELEASED_TASKS = 3   # at the target epoch, waiting for tasks others still hold
    UNKNOWN = 127          # a state a newer broker wrote: the member is fenced and rejoins

    @classmethod
    def of(cls, value: int) -> "MemberState":
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


def tasks(mapping: Mapping) -> Mapping:
    """An immutable {subtopology: frozenset(partitions)} without empty entries."""
    return MappingProxyType({s: frozenset(p) for s, p in mapping.items() if p})


def tasks_with_epochs(mapping: Mapping) -> Mapping:
    """An immutable {subtopology: {partition: epoch}} without empty entries."""
    return MappingProxyType({s: MappingProxyType(dict(p)) for s, p in mapping.items() if p})


@dataclass(frozen=True)
class TaskTuple:
    """Active, standby and warm-up tasks without epochs: a target assignment, or what a member
    reports it owns."""
    active: Mapping = field(default_factory=lambda: _EMPTY_MAP)
    standby: Mapping = field(default_factory=lambda: _EMPTY_MAP)
    warmup: Mapping = field(default_factory=lambda: _EMPTY_MAP)

    @classmethod
    def of(cls, active=None, standby=None, warmup=None) -> "TaskTuple":
        return cls(tasks(active or {}), tasks(standby or {}), tasks(warmup or {}))

    @property
    def is_empty(self) -> bool:
        return not self.active and not self.standby and not self.warmup

    def contains_any(self, other: "AssignedTasks") -> bool:
        """Whether any of ``other``'s tasks is among these (kind by kind)."""
        return (_overlap(self.active, other.active) or _overlap(self.standby, other.standby)
                or _overlap(self.warmup, other.warmup))

    def same_tasks(self, other: "AssignedTasks") -> bool:
        return (self.standby == other.standby and self.warmup == other.warmup
                and self.active == other.active_ids())


@dataclass(frozen=True)
class AssignedTasks:
    """A member's tasks: active ones with their assignment epochs, standby and warm-up ones."""
    active: Mapping = field(default_factory=lambda: _EMPTY_MAP)  # subtopology -> {p: epoch}
    standby: Mapping = field(default_factory=lambda: _EMPTY_MAP)
    warmup: Mapping = field(default_factory=lambda: _EMPTY_MAP)

    @property
    def is_empty(self) -> bool:
        return not self.active and not self.standby and not self.warmup

    def active_ids(self) -> Mapping:
        return tasks({s: p.keys() for s, p in self.active.items()})

    def standby_and_warmup(self) -> dict:
        out = {s: set(p) for s, p in self.standby.items()}
        for s, p in self.warmup.items():
            out.setdefault(s, set()).update(p)
        return out

    def merge(self, other: "AssignedTasks") -> "AssignedTasks":
        active = {s: dict(p) for s, p in self.active.items()}
        for s, p in other.active.items():
            active.setdefault(s, {}).update(p)
        return AssignedTasks(tasks_with_epochs(active), _union(self.standby, other.standby),
                             _union(self.warmup, other.warmup))

    def with_active_epochs_zero(self) -> "AssignedTasks":
        """A static member leaving for a while keeps its tasks at assignment epoch 0, so a
        commit of its old instance is fenced."""
        return replace(self, active=tasks_with_epochs(
            {s: {p: 0 for p in parts} for s, parts in self.active.items()}))


EMPTY_TASKS = TaskTuple()
NO_TASKS = AssignedTasks()


@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class StreamsGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    topology_epoch: int = -1
    process_id: str = ""
    user_endpoint: Endpoint | None = None
    client_tags: Mapping = field(default_factory=lambda: _EMPTY_MAP)
    assigned: AssignedTasks = field(default_factory=lambda: NO_TASKS)
    pending_revocation: AssignedTasks = field(default_factory=lambda: NO_TASKS)

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == epoch

    def with_epoch(self, epoch: int, **changes) -> "StreamsGroupMember":
        """The member moved to ``epoch``; its previous epoch is the one it had."""
        return replace(self, member_epoch=epoch, previous_member_epoch=self.member_epoch,
                       **changes)

    def epoch_relevant_change(self, other: "StreamsGroupMember") -> bool:
        """Whether ``other`` differs in what the assignment depends on (a static member's other
        changes do not start a new assignment)."""
        return (self.topology_epoch != other.topology_epoch or self.rack_id != other.rack_id
                or self.client_tags != other.client_tags or self.process_id != other.process_id)


def _overlap(mine: Mapping, theirs: Mapping) -> bool:
    for subtopology, partitions in mine.items():
        other = theirs.get(subtopology)
        if other and any(p in other for p in partitions):
            return True
    return False


def _union(a: Mapping, b: Mapping) -> Mapping:
    out = {s: set(p) for s, p in a.items()}
    for s, p in b.items():
        out.setdefault(s, set()).update(p)
    return tasks(out)
