"""A share group: members, epochs, target assignment, and the share-partition initialization
state (Kafka's ShareGroupStatePartitionMetadata: topics initializing, initialized, deleting).

Durable state comes only from replay (:mod:`.replay`). The state follows from the members
(Kafka's ShareGroup.ShareGroupState): Empty without members, else Stable.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kbroker.coordinator.group.share import records
from kbroker.coordinator.group.state import classic_expired_offsets
from kbroker.coordinator.group.types import ModernGroup
from kbroker.protocol.errors import Errors, KafkaError


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class TopicInit:
    """A topic's partitions in one initialization stage; ``timestamp`` (ms, in memory only) is
    when they entered it, so a stuck initialization is retried."""
    name: str
    partitions: frozenset
    timestamp: int = 0


INITIAL_EPOCH = 1  # Kafka 4.4 starts a share group and its target assignment at epoch 1


class ShareGroup(ModernGroup):
    group_type = "share"

    def __init__(self, group_id: str):
        self.group_id = group_id
        self.group_epoch = INITIAL_EPOCH
        self.metadata_hash = 0
        self.members: dict = {}                  # member id -> ShareGroupMember
        self.target: dict = {}                   # member id -> {topic id: frozenset}
        self.assignment_epoch = INITIAL_EPOCH
        self.assignment_timestamp = 0
        self.initializing: dict = {}             # topic id -> TopicInit
        self.initialized: dict = {}              # topic id -> TopicInit
        self.deleting: dict = {}                 # topic id -> topic name
        self.has_state_metadata = False          # a ShareGroupStatePartitionMetadata record

    def copy(self) -> "ShareGroup":
        other = ShareGroup.__new__(ShareGroup)
        other.__dict__.update(self.__dict__)
        other.members = dict(self.members)
        other.target = dict(self.target)
        other.initializing = dict(self.initializing)
        other.initialized = dict(self.initialized)
        other.deleting = dict(self.deleting)
        return other

    def delete_error(self) -> Errors:
        # Its share partitions' state goes first (the share coordinator): DeleteGroups of a share
        # group takes kbroker.coordinator.group.share.admin's two steps, never this one.
        return Errors.GROUP_ID_NOT_FOUND

    def tombstones(self) -> list:
        return records.group_tombstones(self)

    def guarded_topics(self) -> set[str]:
        # Kafka: a share group keeps no committed offsets (its share partitions do).
        raise KafkaError(Errors.GROUP_ID_NOT_FOUND)

    def expired_offsets(self, committed: dict, retention_ms: int, now: int) -> list:
        # It should have none; any it has expire as offsets without a group.
        return classic_expired_offsets(None, committed, retention_ms, now)

    def expires_with_offsets(self, expired: int, committed: int) -> bool:
        return False

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.EMPTY if not self.members else ShareGroupState.STABLE

    def subscribed_topics(self) -> set:
        out = set()
        for m in self.members.values():
            out.update(m.subscribed)
        return out

    def initialized_partitions(self, topic_id) -> frozenset:
        entry = self.initialized.get(topic_id)
        return entry.partitions if entry is not None else frozenset()
