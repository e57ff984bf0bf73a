"""GroupShard: the groups and committed offsets of one ``__consumer_offsets`` partition.

Durable state changes only in :meth:`GroupShard.replay`; the rebalance core below (Kafka's
``prepareRebalance`` / ``completeClassicGroupJoin`` / member removal and session expiry) drives the
in-memory membership and writes GroupMetadata records where Kafka does: when a group is created,
when a rebalance leaves it empty, and (in sync.py) when the leader's assignment arrives.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from kbroker.coordinator.group import records as rec
from kbroker.coordinator.group.state import ClassicGroup, GroupState, Member
from kbroker.coordinator.runtime import Shard, now_ms
from kbroker.protocol.errors import Errors, KafkaError

log = logging.getLogger("kbroker.coordinator.group")
S = GroupState


@dataclass
class JoinResult:
    error: Errors
    member_id: str = ""
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: list = field(default_factory=list)  # [(member_id, instance id, metadata)], leader only


@dataclass
class SyncResult:
    error: Errors
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


class GroupShard(Shard):
    def __init__(self, runtime, partition_index: int, config):
        super().__init__(runtime, partition_index)
        self.config = config
        self.groups: dict[str, ClassicGroup] = {}
        self.offsets: dict[str, dict[tuple[str, int], rec.CommittedOffset]] = {}

    # --- replay --------------------------------------------------------------------------------

    def replay(self, offset: int, key: bytes, value: bytes | None) -> None:
        record_type, k = rec.decode_key(key)
        if k is None:
            return
        if record_type == rec.OFFSET_COMMIT_TYPE:
            group_offsets = self.offsets.setdefault(k.group, {})
            if value is None:
                group_offsets.pop((k.topic, k.partition), None)
                if not group_offsets:
                    del self.offsets[k.group]
                return
            group_offsets[(k.topic, k.partition)] = rec.decode_offset_commit_value(value, offset)
            if k.group not in self.groups:  # a standalone commit creates an Empty group (Kafka)
                self.groups[k.group] = ClassicGroup(k.group, state_timestamp=now_ms())
            return
        if value is None:
            group = self.groups.pop(k.group, None)
            if group is not None:
                self._cancel_group_timers(group)
                group.state = S.DEAD
            return
        metadata = rec.decode_group_metadata_value(value)
        group = self.groups.get(k.group)
        if group is None or self.loading:
            self.groups[k.group] = ClassicGroup.from_record(k.group, metadata)
            return
        # A live group: the record confirms what the operation did in memory; the leader's
        # assignment is the one change applied here, completing the CompletingRebalance phase.
        if (group.state is S.COMPLETING_REBALANCE and metadata.generation == group.generation
                and metadata.members):
            for m in metadata.members:
                member = group.members.get(m.member_id)
                if member is not None:
                    member.assignment = bytes(m.assignment)
            group.transition(S.STABLE, now_ms())
            self.cancel(("sync", group.group_id))
            for member in group.members.values():
                if member.sync_future is not None:
                    self._complete_sync(group, member, Errors.NONE)
            log.info("group %s is Stable at generation %d with %d member(s) (protocol %s)",
                     group.group_id, group.generation, len(group.members), group.protocol_name)

    def on_loaded(self) -> None:
        for group in self.groups.values():
            for member in group.members.values():
                self.schedule_session_expiry(group, member)

    def _cancel_group_timers(self, group: ClassicGroup) -> None:
        self.cancel(("join", group.group_id))
        self.cancel(("sync", group.group_id))
        for member_id in list(group.members) + list(group.pending_members):
            self.cancel(("session", group.group_id, member_id))

    # --- groups --------------------------------------------------------------------------------

    def group(self, group_id: str) -> ClassicGroup | None:
        group = self.groups.get(group_id)
        return group if group is not None and group.state is not S.DEAD else None

    def write_group_record(self, group: ClassicGroup, assignments=None) -> None:
        self.write([(rec.group_metadata_key(group.group_id),
                     rec.group_metadata_value(group.to_record(assignments)))])

    # --- session expiry ------------------------------------------------------------------------

    def schedule_session_expiry(self, group: ClassicGroup, member: Member) -> None:
        self.schedule(("session", group.group_id, member.member_id), member.session_timeout_ms,
                      lambda: self._session_expired(group, member.member_id))

    def schedule_pending_expiry(self, group: ClassicGroup, member_id: str, timeout_ms: int):
        self.schedule(("session", group.group_id, member_id), timeout_ms,
                      lambda: self._session_expired(group, member_id))

    def _session_expired(self, group: ClassicGroup, member_id: str) -> None:
        if self.groups.get(group.group_id) is not group:
            return
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            log.info("pending member %s of group %s expired", member_id, group.group_id)
            self.maybe_complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None:
            return
        if member.awaiting_join or member.awaiting_sync:
            # Parked requests count as heartbeats; the join/sync timers bound them.
            self.schedule_session_expiry(group, member)
            return
        log.info("member %s of group %s expired after %d ms without a heartbeat", member_id,
                 group.group_id, member.session_timeout_ms)
        self.remove_member_and_update(group, member, "session timeout expired")

    # --- the rebalance core --------------------------------------------------------------------

    def remove_member_and_update(self, group: ClassicGroup, member: Member, reason: str) -> None:
        group.remove(member.member_id)
        self.cancel(("session", group.group_id, member.member_id))
        if member.join_future is not None and not member.join_future.done():
            member.join_future.set_result(JoinResult(Errors.UNKNOWN_MEMBER_ID, member.member_id))
        member.join_future = None
        if member.sync_future is not None and not member.sync_future.done():
            member.sync_future.set_result(SyncResult(Errors.UNKNOWN_MEMBER_ID))
        member.sync_future = None
        if group.is_in(S.STABLE, S.COMPLETING_REBALANCE):
            self.prepare_rebalance(group, f"removing member {member.member_id}: {reason}")
        elif group.is_in(S.PREPARING_REBALANCE):
            self.maybe_complete_join(group)

    def prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.is_in(S.COMPLETING_REBALANCE):
            for member in group.members.values():
                member.assignment = b""
                if member.sync_future is not None:
                    self._complete_sync(group, member, Errors.REBALANCE_IN_PROGRESS)
            self.cancel(("sync", group.group_id))
        initial = group.is_in(S.EMPTY)
        group.transition(S.PREPARING_REBALANCE, now_ms())
        log.info("preparing to rebalance group %s in state PreparingRebalance with old "
                 "generation %d (reason: %s)", group.group_id, group.generation, reason)
        rebalance_timeout = group.max_rebalance_timeout_ms()
        if initial:
            # Kafka's InitialDelayedJoin: wait group.initial.rebalance.delay.ms, again while new
            # members keep arriving, never past the rebalance timeout.
            delay = self.config.get("group.initial.rebalance.delay.ms")
            group.new_member_added = False
            self._initial_delay(group, min(delay, rebalance_timeout),
                                max(rebalance_timeout - delay, 0))
        else:
            self.schedule(("join", group.group_id), rebalance_timeout,
                          lambda: self.complete_join(group))
            self.maybe_complete_join(group)

    def _initial_delay(self, group: ClassicGroup, delay_ms: int, remaining_ms: int) -> None:
        def expired():
            if group.new_member_added and remaining_ms > 0:
                group.new_member_added = False
                step = self.config.get("group.initial.rebalance.delay.ms")
                self._initial_delay(group, min(step, remaining_ms), max(remaining_ms - step, 0))
            else:
                self.complete_join(group)

        self.schedule(("join", group.group_id), delay_ms, expired)

    def maybe_complete_join(self, group: ClassicGroup) -> None:
        """The join phase ends as soon as every known member has rejoined (not for the initial
        rebalance of an empty group, which waits for its delay)."""
        if (group.is_in(S.PREPARING_REBALANCE) and group.has_all_members_joined()
                and group.previous_state is not S.EMPTY):
            self.complete_join(group)

    def complete_join(self, group: ClassicGroup) -> None:
        if self.groups.get(group.group_id) is not group or not group.is_in(S.PREPARING_REBALANCE):
            return
        self.cancel(("join", group.group_id))
        for member in list(group.members.values()):
            if not member.awaiting_join and member.group_instance_id is None:
                log.info("member %s of group %s did not rejoin; removing it", member.member_id,
                         group.group_id)
                group.remove(member.member_id)
                self.cancel(("session", group.group_id, member.member_id))
        if group.leader_id is not None and not group.members[group.leader_id].awaiting_join:
            joined = [m for m in group.members.values() if m.awaiting_join]
            if joined:
                group.leader_id = joined[0].member_id
        group.generation += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.transition(S.EMPTY, now_ms())
            log.info("group %s with generation %d is now empty", group.group_id, group.generation)
            try:
                self.write_group_record(group)
            except KafkaError as exc:
                log.warning("could not persist empty group %s: %s", group.group_id, exc)
            return
        group.protocol_name = group.select_protocol()
        group.transition(S.COMPLETING_REBALANCE, now_ms())
        log.info("stabilized group %s generation %d with %d member(s); protocol %s, leader %s",
                 group.group_id, group.generation, len(group.members), group.protocol_name,
                 group.leader_id)
        for member in group.members.values():
            if member.join_future is not None:
                self.complete_join_future(group, member)
            self.schedule_session_expiry(group, member)
        generation = group.generation

        def sync_timeout():
            if group.is_in(S.COMPLETING_REBALANCE) and group.generation == generation:
                for member in list(group.members.values()):
                    if not member.awaiting_sync:
                        group.remove(member.member_id)
                        self.cancel(("session", group.group_id, member.member_id))
                self.prepare_rebalance(group, "members did not send SyncGroup in time")

        self.schedule(("sync", group.group_id), group.max_rebalance_timeout_ms(), sync_timeout)

    def complete_join_future(self, group: ClassicGroup, member: Member,
                             skip_assignment: bool = False) -> None:
        is_leader = member.member_id == group.leader_id
        members = []
        if is_leader:
            members = [(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                       for m in group.members.values()]
        result = JoinResult(Errors.NONE, member.member_id, group.generation, group.protocol_type,
                            group.protocol_name, group.leader_id or "", skip_assignment, members)
        future, member.join_future = member.join_future, None
        member.is_new = False
        if future is not None and not future.done():
            future.set_result(result)

    def _complete_sync(self, group: ClassicGroup, member: Member, error: Errors) -> None:
        future, member.sync_future = member.sync_future, None
        if future is not None and not future.done():
            if error is Errors.NONE:
                future.set_result(SyncResult(error, member.assignment, group.protocol_type,
                                             group.protocol_name))
            else:
                future.set_result(SyncResult(error))
