"""A share-group member: its subscription, epochs and assigned partitions
(``{topic id: frozenset(partitions)}``). Immutable: an operation computes the next member, writes
its records, and the replay installs an equal object.

Epochs: 0 joins (or rejoins), -1 leaves. There is no static membership in share groups.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Mapping

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STABLE = 1  # Kafka's MemberState.STABLE, the only state a share member is ever in

_EMPTY: Mapping = MappingProxyType({})


def partitions(mapping: Mapping) -> Mapping:
    """An immutable {topic id: frozenset(partitions)} without empty entries."""
    return MappingProxyType({t: frozenset(p) for t, p in mapping.items() if p})


@dataclass(frozen=True, slots=True)
class ShareGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = STABLE
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed: tuple = ()                       # sorted topic names
    assigned: Mapping = field(default_factory=lambda: _EMPTY)

    def with_assignment(self, epoch: int, assigned: Mapping) -> "ShareGroupMember":
        return replace(self, member_epoch=epoch, previous_member_epoch=self.member_epoch,
                       state=STABLE, assigned=partitions(assigned))

    def same_assignment(self, other: "ShareGroupMember") -> bool:
        return dict(self.assigned) == dict(other.assigned)


def topic_uuid(value) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(bytes=bytes(value))
