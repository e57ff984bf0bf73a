"""The persister: how a share partition's state is read and written (Kafka's ``Persister``).

A share partition (``kbroker/share/``) and the group coordinator's share-group operations never
touch ``__share_group_state`` themselves; they call a :class:`Persister`. The broker's persister
sends each call to the share coordinator that owns the key ``group_id:topic_id:partition`` (the
local shard, or another broker through the inter-broker APIs 83-87 in a cluster).

Every call answers per partition; a failure is an :class:`Errors` code in the result, never an
exception, so that one partition's coordinator being away does not fail its neighbours.

Epochs are never negative: Kafka 4.4 answers a negative leader or state epoch INVALID_REQUEST
(-1 is no "any epoch" wildcard). The broker's persister retries NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS and COORDINATOR_NOT_AVAILABLE itself (up to request.timeout.ms);
a result carrying one of them means the coordinator stayed away that long.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field
from typing import Protocol

from kbroker.protocol.errors import Errors

# A record's delivery state as persisted (ShareSnapshot/ShareUpdate, WriteShareGroupState).
AVAILABLE = 0
ACKNOWLEDGED = 2
ARCHIVING = 3  # KIP-1191: on its way to the group's dead-letter queue (Kafka 4.4)
ARCHIVED = 4

NO_OFFSET = -1  # start_offset when the partition is not initialized yet


@dataclass(frozen=True)
class StateBatch:
    """A run of offsets [first_offset, last_offset] with one delivery state and count."""
    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True)
class SharePartitionKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int

    def coordinator_key(self) -> str:
        """The FindCoordinator key (key type 2, SHARE) that locates its share coordinator:
        ``group:topicId:partition`` with the topic id in Kafka's text form (URL-safe base64,
        as Kafka's ``Uuid.toString``), e.g. ``g1:AAECAwQFBgcICQoLDA0ODw:3``."""
        # Kafka's Uuid text form (URL-safe base64, unpadded), not Python's: the key's hash picks
        # the __share_group_state partition, which must be the one Kafka picks.
        topic = base64.urlsafe_b64encode(self.topic_id.bytes).decode().rstrip("=")
        return f"{self.group_id}:{topic}:{self.partition}"


@dataclass
class ReadResult:
    error: Errors = Errors.NONE
    error_message: str | None = None
    state_epoch: int = 0
    start_offset: int = NO_OFFSET
    batches: list[StateBatch] = field(default_factory=list)


@dataclass
class SummaryResult:
    error: Errors = Errors.NONE
    error_message: str | None = None
    state_epoch: int = 0
    leader_epoch: int = 0
    start_offset: int = NO_OFFSET
    delivery_complete_count: int = -1  # -1: unknown (ReadShareGroupStateSummary v1)


@dataclass
class WriteResult:
    error: Errors = Errors.NONE
    error_message: str | None = None


class Persister(Protocol):
    async def initialize(self, key: SharePartitionKey, state_epoch: int,
                         start_offset: int) -> WriteResult:
        """InitializeShareGroupState: a fresh state (no batches) at ``start_offset``;
        ``state_epoch`` is the group's new epoch for this partition's state."""

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> ReadResult:
        """ReadShareGroupState, as a partition leader loading its share partition; fences older
        leader epochs (FENCED_LEADER_EPOCH)."""

    async def write(self, key: SharePartitionKey, state_epoch: int, leader_epoch: int,
                    start_offset: int, batches: list[StateBatch],
                    delivery_complete_count: int = -1) -> WriteResult:
        """WriteShareGroupState: the batches that changed (and the new start offset) since the
        last write; fences older state epochs (FENCED_STATE_EPOCH) and leader epochs."""

    async def delete(self, key: SharePartitionKey) -> WriteResult:
        """DeleteShareGroupState: forget the partition's state (a tombstone)."""

    async def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> SummaryResult:
        """ReadShareGroupStateSummary: the start offset and epochs, for the admin APIs."""
