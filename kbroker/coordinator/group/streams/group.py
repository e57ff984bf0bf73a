"""A streams group (KIP-1071): its members, topology, epochs and target assignment, and the
indexes derived from them (which process owns each task now).

Durable state comes only from replay (:mod:`.replay`); the configured topology (the topology
against the current topics) and the endpoint-information epoch are derived and kept in memory,
as Kafka keeps them: after a restart the group is NotReady until a member heartbeats.

The state follows from the epochs (Kafka's StreamsGroup.State): Empty without members, NotReady
while the topology is missing or not configured, Assigning while the group epoch is ahead of
the target assignment, Reconciling while a member is not at the target, else Stable.
"""

from __future__ import annotations

import enum

from kbroker.coordinator.group.streams import offsets, records
from kbroker.coordinator.group.streams.member import StreamsGroupMember, TaskTuple
from kbroker.coordinator.group.types import ModernGroup

EMPTY_TARGET = TaskTuple()
INITIAL_EPOCH = 1  # Kafka 4.4 starts a streams group and its target assignment at epoch 1


class StreamsGroupState(enum.Enum):
    EMPTY = "Empty"
    NOT_READY = "NotReady"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class StreamsGroup(ModernGroup):
    group_type = "streams"

    def __init__(self, group_id: str):
        self.group_id = group_id
        self.group_epoch = INITIAL_EPOCH
        self.metadata_hash = 0
        self.validated_topology_epoch = -1
        self.last_assignment_configs: dict = {}
        self.topology = None                 # StreamsTopology, from its record
        self.members: dict[str, StreamsGroupMember] = {}
        self.target: dict[str, TaskTuple] = {}
        self.assignment_epoch = INITIAL_EPOCH
        self.assignment_timestamp = 0
        # derived, in memory
        self.configured = None               # ConfiguredTopology
        self.endpoint_information_epoch = 0
        self.shutdown_request_member_id: str | None = None
        # member id -> (task offsets, task end offsets), each {subtopology: {partition:
        # offset}}: what members last reported (Kafka 4.4 keeps them in memory too)
        self.task_offsets: dict = {}

    def copy(self) -> "StreamsGroup":
        other = StreamsGroup.__new__(StreamsGroup)
        other.__dict__.update(self.__dict__)
        other.members = dict(self.members)
        other.target = dict(self.target)
        other.last_assignment_configs = dict(self.last_assignment_configs)
        other.task_offsets = dict(self.task_offsets)
        return other

    def offsets_of(self, member_id: str) -> tuple[dict, dict]:
        return self.task_offsets.get(member_id, ({}, {}))

    # --- state -------------------------------------------------------------------------------

    def tombstones(self) -> list:
        return records.group_tombstones(self)

    def guarded_topics(self) -> set[str]:
        """The topics it reads (Kafka's isSubscribedToTopic): its source and repartition source
        topics, none while it is empty."""
        if self.is_empty or self.topology is None:
            return set()
        return set(self.topology.source_topic_subtopologies())

    def validate_offset_commit(self, member_id: str, instance_id: str | None, epoch: int,
                               transactional: bool, api_version: int):
        return offsets.validate_commit(self, member_id, instance_id, epoch, transactional,
                                       api_version)

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        offsets.validate_fetch(self, member_id, member_epoch)  # KIP-1071 members: their epoch

    @property
    def state(self) -> StreamsGroupState:
        if not self.members:
            return StreamsGroupState.EMPTY
        if self.topology is None or self.configured is None or not self.configured.ready:
            return StreamsGroupState.NOT_READY
        if self.group_epoch > self.assignment_epoch:
            return StreamsGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return StreamsGroupState.RECONCILING
        return StreamsGroupState.STABLE

    # --- target ------------------------------------------------------------------------------

    def target_of(self, member_id: str) -> TaskTuple:
        return self.target.get(member_id, EMPTY_TARGET)

    def static_member(self, instance_id: str | None):
        """The member holding ``instance_id`` (a static member), or None."""
        if instance_id is None:
            return None
        return next((m for m in self.members.values() if m.instance_id == instance_id), None)

    # --- who owns what now (for reconciliation) -----------------------------------------------

    def current_active_process(self, subtopology: str, partition: int) -> str | None:
        for m in self.members.values():
            for tasks in (m.assigned.active, m.pending_revocation.active):
                parts = tasks.get(subtopology)
                if parts is not None and partition in parts:
                    return m.process_id
        return None

    def current_processes(self, kind: str, subtopology: str, partition: int) -> set:
        """Processes holding the task as ``kind`` ("standby" or "warmup")."""
        out = set()
        for m in self.members.values():
            for tuple_ in (m.assigned, m.pending_revocation):
                parts = getattr(tuple_, kind).get(subtopology)
                if parts is not None and partition in parts:
                    out.add(m.process_id)
        return out

    def active_task_epoch(self, subtopology: str, partition: int, member_id: str) -> int | None:
        """The assignment epoch of an active task the member owns (None if it does not)."""
        m = self.members.get(member_id)
        if m is None:
            return None
        parts = m.assigned.active.get(subtopology)
        if parts is not None and partition in parts:
            return parts[partition]
        parts = m.pending_revocation.active.get(subtopology)
        if parts is not None and partition in parts:
            return parts[partition]
        return None
