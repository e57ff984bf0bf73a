"""GroupShard: the groups and committed offsets of one ``__consumer_offsets`` partition.

Every group, whatever its type, is one object in one map, ``groups`` (group id -> a
:class:`kbroker.coordinator.group.types.Group`). The shard dispatches by the object (listing,
deletion, expiry, OffsetDelete, its durable view: :mod:`kbroker.coordinator.group.types`), replays
each record type into the type that owns it (:mod:`kbroker.coordinator.group.registry`), and owns
the rule that a group id names one group of one type (:meth:`GroupShard.group_of_type`).

Two kinds of state, kept apart:
- durable (``offsets``, ``persisted``, the consumer, streams and share groups of ``groups``,
  pending transactional offsets): what the log says. It changes only in
  :meth:`GroupShard.replay`, which is pure, and lives in timeline maps
  (:mod:`kbroker.coordinator.timeline`), so a write that is not committed is reverted at the cost
  of what it changed: an offset commit's entries, one group.
- classic membership: a classic group's object in ``groups`` (members, parked JoinGroup/SyncGroup
  futures, the rebalance state). Session state, in memory as in Kafka: built from ``persisted``
  (its last GroupMetadata record) when the shard loads, changed by the operations, and where a
  change must follow the log (a new group, the leader's assignment, a deletion) by the
  operation's ``on_committed``, which puts it into the map or takes it out outside the journal
  (a revert of another write does not undo it). A consumer or streams group that replaces a
  classic group of the same id replaces its object in the map through the journal, so a revert
  brings the classic group back as it was.

The rebalance core below (Kafka's ``prepareRebalance`` / ``completeClassicGroupJoin`` / member
removal and session expiry) returns the records it needs written (a GroupMetadata record when a
rebalance leaves a group empty); its callers put them into their CoordinatorResult.
"""

from __future__ import annotations

import logging

from kbroker.coordinator.group import modern
from kbroker.coordinator.group import records as rec
from kbroker.coordinator.group import txn_offsets
from kbroker.coordinator.group.parked import JoinResult, SyncResult, answer_parked
from kbroker.coordinator.group.state import ClassicGroup, GroupState, Member
from kbroker.coordinator.group.registry import BY_NAME, BY_RECORD_TYPE
from kbroker.coordinator.group.types import Group
from kbroker.coordinator.runtime import CoordinatorResult, Shard, now_ms
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.protocol.messages.group_metadata_value import GroupMetadataValue

log = logging.getLogger("kbroker.coordinator.group")
S = GroupState


class TopicChanges:
    """What the shards need to know of metadata changes: a version that grows with every image
    and the version at which topics were last created (regexes are re-resolved after it)."""

    def __init__(self):
        self.version = 0
        self.created_version = 0


class GroupShard(Shard):
    def __init__(self, runtime, partition_index: int, config, topic_changes=None,
                 group_configs=None):
        super().__init__(runtime, partition_index)
        self.config = config
        self.topic_changes = topic_changes if topic_changes is not None else TopicChanges()
        self._group_configs = group_configs  # group id -> {name: value}, or None
        # durable, changed only by replay: group id -> (topic, partition) -> offset (both levels
        # timeline maps), and each classic group's last GroupMetadata record
        self.offsets: dict[str, dict[tuple[str, int], rec.CommittedOffset]] = \
            self.timeline_dict()
        self.persisted: dict[str, GroupMetadataValue] = self.timeline_dict()
        # every group: group id -> Group (the consumer, streams and share groups durable, the
        # classic groups' live objects put in and taken out outside the journal)
        self.groups: dict[str, Group] = self.timeline_dict()
        # session timer key -> (deadline, when its timer fires), monotonic ms; in memory
        self.session_deadlines: dict = {}
        # durable: transactional offsets waiting for their marker (producer id -> group -> tp,
        # timeline maps at every level)
        self.pending_txn_offsets: dict[int, dict[str, dict]] = self.timeline_dict()

    # --- replay (pure) -------------------------------------------------------------------------

    def replay(self, offset: int, key: bytes, value: bytes | None) -> None:
        record_type, k = rec.decode_key(key)
        if record_type == rec.OFFSET_COMMIT_TYPE:
            self._replay_offset_commit(offset, k, value)
            return
        group_type = BY_RECORD_TYPE.get(record_type)
        if group_type is not None:  # other record types are not ours to replay
            group_type.replay().replay(self, record_type, memoryview(key)[2:], value)

    def _replay_offset_commit(self, offset: int, k, value: bytes | None) -> None:
        group_offsets = self.offsets.get(k.group)
        if value is None:
            if group_offsets is not None:
                group_offsets.pop((k.topic, k.partition), None)
                if not group_offsets:
                    del self.offsets[k.group]
            return
        if group_offsets is None:
            group_offsets = self.offsets[k.group] = self.timeline_dict()
        group_offsets[(k.topic, k.partition)] = rec.decode_offset_commit_value(value, offset)

    def durable_state(self):
        # CommittedOffset and GroupMetadataValue objects are never changed once replayed; a
        # group's durable view compares by its fields.
        views = {group_id: (group.group_type, view) for group_id, group in self.groups.items()
                 if (view := group.durable_view()) is not None}
        return ({group: dict(committed) for group, committed in self.offsets.items()},
                dict(self.persisted), txn_offsets.copy_pending(self.pending_txn_offsets), views)

    # transactional offsets (kbroker.coordinator.group.txn_offsets)
    def replay_transactional(self, offset, producer_id, producer_epoch, key, value) -> None:
        txn_offsets.replay_transactional(self, offset, producer_id, key, value)

    def replay_end_txn(self, offset, producer_id, commit) -> None:
        txn_offsets.replay_end_txn(self, producer_id, commit)

    # --- loading -------------------------------------------------------------------------------

    def on_loaded(self) -> None:
        # Classic groups' live objects come from their records; a standalone commit (no group
        # management) makes an Empty group (Kafka).
        for group_id, value in self.persisted.items():
            if group_id not in self.groups:
                self.groups.put_untracked(group_id, ClassicGroup.from_record(group_id, value))
        for group_id in self.offsets:
            if group_id not in self.groups:
                self.groups.put_untracked(group_id, ClassicGroup(group_id, state_timestamp=-1))
        for group in list(self.groups.values()):
            BY_NAME[group.group_type].membership().on_loaded(self, group)

    def on_unloaded(self) -> None:
        for group in list(self.groups.values()):
            BY_NAME[group.group_type].membership().on_unloaded(self, group)
        for group in self.groups_of_type(ClassicGroup.group_type):
            self.groups.pop_untracked(group.group_id)  # live state goes with the shard

    # --- groups --------------------------------------------------------------------------------

    def find_group(self, group_id: str, group_type: str | None = None) -> Group | None:
        """The group of this id (of ``group_type`` only, when given), or None."""
        group = self.groups.get(group_id)
        if group is None or (group_type is not None and group.group_type != group_type):
            return None
        return group  # (a deleted classic group leaves the map as it becomes Dead)

    def group_of_type(self, group_id: str, group_type: str) -> Group | None:
        """The group of this id if it is a ``group_type`` group ("classic", "consumer",
        "streams", "share"); None when no group has the id. When a group of another type has
        it: GROUP_ID_NOT_FOUND "Group X is not a <type> group." (Kafka's message). This is the
        one place the rule "a group id names one group, of one type" is checked."""
        group = self.find_group(group_id)
        if group is None or group.group_type == group_type:
            return group
        raise KafkaError(Errors.GROUP_ID_NOT_FOUND,
                         f"Group {group_id} is not a {group_type} group.")

    def groups_of_type(self, group_type: str) -> list[Group]:
        return [group for group in self.groups.values() if group.group_type == group_type]

    def group(self, group_id: str) -> ClassicGroup | None:
        """The classic group of that id (None for a group of another type)."""
        return self.find_group(group_id, ClassicGroup.group_type)

    def group_record(self, group: ClassicGroup, assignments=None) -> tuple[bytes, bytes]:
        return (rec.group_metadata_key(group.group_id),
                rec.group_metadata_value(group.to_record(assignments)))

    # --- consumer groups and what they read -----------------------------------------------------

    @property
    def image(self):
        """The current metadata image (topics by name and id)."""
        return self.runtime.controller.image

    def broker_racks(self) -> dict:
        """Broker id -> rack (None without one) of every known broker, as the metadata hash of
        the modern groups reads them: a cluster's registered brokers, or this node alone with
        its ``broker.rack`` (a single node's image lists no brokers)."""
        return self.runtime.controller.live_brokers()

    def metadata_hash(self, topic_names) -> int:
        """The group metadata hash (Kafka's, KIP-1101) of the named topics that exist."""
        return modern.group_hash(self.image, topic_names, self.broker_racks())

    def group_configs(self, group_id: str) -> dict:
        """The group's dynamic configs (IncrementalAlterConfigs on the GROUP resource)."""
        if self._group_configs is None:
            return {}
        return self._group_configs(group_id)

    # --- classic groups' live objects ------------------------------------------------------------

    def forget_classic_group(self, group: ClassicGroup) -> None:
        """The classic group became a group of another type (its GroupMetadata tombstone is on
        the log, and the new group replaced it in the map): end its timers."""
        self._cancel_group_timers(group)
        if self.groups.get(group.group_id) is group:
            self.groups.pop_untracked(group.group_id)

    def install_classic_group(self, group: ClassicGroup) -> None:
        """A consumer group became this classic group (its GroupMetadata record is on the log)."""
        self.groups.put_untracked(group.group_id, group)

    def add_group(self, group_id: str) -> ClassicGroup | None:
        """The live group of a group the log now has (created by a join or a commit); none when
        the id is a group of another type."""
        group = self.groups.get(group_id)
        if group is None:
            group = ClassicGroup(group_id, state_timestamp=now_ms())
            self.groups.put_untracked(group_id, group)
        return group if group.group_type == ClassicGroup.group_type else None

    def drop_group(self, group_id: str) -> None:
        """The log deleted the classic group: forget its members and timers."""
        group = self.groups.get(group_id)
        if isinstance(group, ClassicGroup):
            self.groups.pop_untracked(group_id)
            self._cancel_group_timers(group)
            group.state = S.DEAD

    def assignment_committed(self, group: ClassicGroup, generation: int,
                             assignments: dict[str, bytes]) -> None:
        """The leader's assignment is on the log: the group is Stable and every member waiting in
        SyncGroup gets its part."""
        if self.groups.get(group.group_id) is not group or generation != group.generation \
                or not group.is_in(S.COMPLETING_REBALANCE):
            return  # the group moved on while the record was being committed
        for member_id, assignment in assignments.items():
            member = group.members.get(member_id)
            if member is not None:
                member.assignment = assignment
        group.transition(S.STABLE, now_ms())
        self.cancel(("sync", group.group_id))
        for member in group.members.values():
            if member.sync_future is not None:
                self._complete_sync(group, member, Errors.NONE)
        log.info("group %s is Stable at generation %d with %d member(s) (protocol %s)",
                 group.group_id, group.generation, len(group.members), group.protocol_name)

    def _cancel_group_timers(self, group: ClassicGroup) -> None:
        self.cancel(("join", group.group_id))
        self.cancel(("sync", group.group_id))
        for member_id in list(group.members) + list(group.pending_members):
            self.cancel(("session", group.group_id, member_id))

    # --- session expiry ------------------------------------------------------------------------

    def schedule_session_expiry(self, group: ClassicGroup, member: Member) -> None:
        self.schedule_pending_expiry(group, member.member_id, member.session_timeout_ms)

    def schedule_pending_expiry(self, group: ClassicGroup, member_id: str, timeout_ms: int):
        self.schedule(("session", group.group_id, member_id), timeout_ms,
                      _timer(lambda: self._session_expired(group, member_id)))

    def _session_expired(self, group: ClassicGroup, member_id: str) -> list:
        if self.groups.get(group.group_id) is not group:
            member = group.members.get(member_id)
            if member is not None and group.state is not S.DEAD and self.timeline.recording:
                # A write that replaced the group (an upgrade) waits for its commit: look again
                # a session later. Its commit cancels this timer; its failure puts the group back.
                self.schedule_session_expiry(group, member)
            return []
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            log.info("pending member %s of group %s expired", member_id, group.group_id)
            return self.maybe_complete_join(group)
        member = group.members.get(member_id)
        if member is None:
            return []
        if member.awaiting_join or member.awaiting_sync:
            # Parked requests count as heartbeats; the join/sync timers bound them.
            self.schedule_session_expiry(group, member)
            return []
        log.info("member %s of group %s expired after %d ms without a heartbeat", member_id,
                 group.group_id, member.session_timeout_ms)
        return self.remove_member_and_update(group, member, "session timeout expired")

    # --- the rebalance core: each returns the records to write ----------------------------------

    def remove_member_and_update(self, group: ClassicGroup, member: Member, reason: str) -> list:
        group.remove(member.member_id)
        self.cancel(("session", group.group_id, member.member_id))
        answer_parked(member, Errors.UNKNOWN_MEMBER_ID)
        if group.is_in(S.STABLE, S.COMPLETING_REBALANCE):
            return self.prepare_rebalance(group, f"removing member {member.member_id}: {reason}")
        if group.is_in(S.PREPARING_REBALANCE):
            return self.maybe_complete_join(group)
        return []

    def prepare_rebalance(self, group: ClassicGroup, reason: str) -> list:
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
            return []
        self.schedule(("join", group.group_id), rebalance_timeout,
                      _timer(lambda: self.complete_join(group)))
        return self.maybe_complete_join(group)

    def _initial_delay(self, group: ClassicGroup, delay_ms: int, remaining_ms: int) -> None:
        def expired() -> list:
            if group.new_member_added and remaining_ms > 0:
                group.new_member_added = False
                step = self.config.get("group.initial.rebalance.delay.ms")
                self._initial_delay(group, min(step, remaining_ms), max(remaining_ms - step, 0))
                return []
            return self.complete_join(group)

        self.schedule(("join", group.group_id), delay_ms, _timer(expired))

    def maybe_complete_join(self, group: ClassicGroup) -> list:
        """The join phase ends as soon as every known member has rejoined (not for the initial
        rebalance of an empty group, which waits for its delay)."""
        if (group.is_in(S.PREPARING_REBALANCE) and group.has_all_members_joined()
                and group.previous_state is not S.EMPTY):
            return self.complete_join(group)
        return []

    def complete_join(self, group: ClassicGroup) -> list:
        if self.groups.get(group.group_id) is not group or not group.is_in(S.PREPARING_REBALANCE):
            return []
        self.cancel(("join", group.group_id))
        for member in list(group.members.values()):
            if not member.awaiting_join and member.group_instance_id is None:
                log.info("member %s of group %s did not rejoin; removing it", member.member_id,
                         group.group_id)
                group.remove(member.member_id)
                self.cancel(("session", group.group_id, member.member_id))
        if group.members and not self._elect_joined_leader(group):
            # Only static members are left and none rejoined: Kafka does not move to a
            # generation nobody joined; it waits another rebalance timeout, until they rejoin or
            # their sessions expire (their heartbeats keep answering REBALANCE_IN_PROGRESS).
            log.info("group %s could not complete its rebalance because no member rejoined; "
                     "waiting another %d ms", group.group_id, group.max_rebalance_timeout_ms())
            self.schedule(("join", group.group_id), group.max_rebalance_timeout_ms(),
                          _timer(lambda: self.complete_join(group)))
            return []
        group.generation += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.transition(S.EMPTY, now_ms())
            log.info("group %s with generation %d is now empty", group.group_id, group.generation)
            return [self.group_record(group)]
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

        def sync_timeout() -> list:
            if group.is_in(S.COMPLETING_REBALANCE) and group.generation == generation:
                for member in list(group.members.values()):
                    if not member.awaiting_sync:
                        group.remove(member.member_id)
                        self.cancel(("session", group.group_id, member.member_id))
                return self.prepare_rebalance(group, "members did not send SyncGroup in time")
            return []

        self.schedule(("sync", group.group_id), group.max_rebalance_timeout_ms(),
                      _timer(sync_timeout))
        return []

    @staticmethod
    def _elect_joined_leader(group: ClassicGroup) -> bool:
        """Kafka's maybeElectNewJoinedLeader: keep a leader that rejoined, else the first member
        that did; False when no member rejoined."""
        leader = group.members.get(group.leader_id) if group.leader_id is not None else None
        if leader is not None and leader.awaiting_join:
            return True
        joined = next((m for m in group.members.values() if m.awaiting_join), None)
        if joined is None:
            return False
        group.leader_id = joined.member_id
        return True

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


def _timer(work):
    """A timer operation: ``work()`` changes membership and returns the records to write."""
    return lambda _shard: CoordinatorResult(work())
