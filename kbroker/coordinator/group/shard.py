"""GroupShard: the groups and committed offsets of one ``__consumer_offsets`` partition.

Two kinds of state, kept apart:
- durable (``offsets``, ``persisted``, the consumer, streams and share groups, pending
  transactional offsets): what the log says. It changes only in :meth:`GroupShard.replay`, which
  is pure, and lives in timeline maps (:mod:`kbroker.coordinator.timeline`), so a write that is
  not committed is reverted at the cost of what it changed: an offset commit's entries, one
  group.
- membership (``groups``): the live ClassicGroup objects — members, parked JoinGroup/SyncGroup
  futures, the rebalance state. Session state, in memory as in Kafka: built from ``persisted`` when
  the shard loads, changed by the operations, and where a change must follow the log (a new group,
  the leader's assignment, a deletion) by the operation's ``on_committed``.

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


_MODERN_REPLAYS: tuple = ()


def _modern_replays() -> tuple:
    """(replay module, the shard's map) of the consumer, streams and share group types, imported
    on the first record of one: a broker that holds only classic groups and offsets, or none,
    never loads those packages."""
    global _MODERN_REPLAYS
    if not _MODERN_REPLAYS:
        from kbroker.coordinator.group.consumer import replay as consumer_replay
        from kbroker.coordinator.group.share import replay as share_replay
        from kbroker.coordinator.group.streams import replay as streams_replay

        _MODERN_REPLAYS = ((consumer_replay, "consumer_groups"), (streams_replay, "streams_groups"),
                           (share_replay, "share_groups"))
    return _MODERN_REPLAYS


def _fields(obj) -> dict:
    names = getattr(obj, "__slots__", None) or vars(obj)
    return {name: getattr(obj, name) for name in names}


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
        # consumer-protocol groups (KIP-848), wholly durable (kbroker.coordinator.group.consumer)
        self.consumer_groups: dict = self.timeline_dict()
        # streams groups (KIP-1071), durable likewise (kbroker.coordinator.group.streams)
        self.streams_groups: dict = self.timeline_dict()
        # share groups (KIP-932), durable likewise (kbroker.coordinator.group.share)
        self.share_groups: dict = self.timeline_dict()
        # session timer key -> (deadline, when its timer fires), monotonic ms; in memory
        self.session_deadlines: dict = {}
        # durable: transactional offsets waiting for their marker (producer id -> group -> tp,
        # timeline maps at every level)
        self.pending_txn_offsets: dict[int, dict[str, dict]] = self.timeline_dict()
        # membership: in memory
        self.groups: dict[str, ClassicGroup] = {}

    # --- replay (pure) -------------------------------------------------------------------------

    def replay(self, offset: int, key: bytes, value: bytes | None) -> None:
        record_type, k = rec.decode_key(key)
        if k is None:
            # Each group type's replay gets the replay time (share groups stamp their pending
            # initializations with it); none reads a clock.
            for replay, groups in _modern_replays():
                if record_type in replay.TYPES:
                    replay.replay(getattr(self, groups), record_type, memoryview(key)[2:], value,
                                  self.replay_time_ms)
                    break
            return
        if record_type == rec.OFFSET_COMMIT_TYPE:
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
        elif value is None:
            self.persisted.pop(k.group, None)
        else:
            self.persisted[k.group] = rec.decode_group_metadata_value(value)

    def durable_state(self):
        # CommittedOffset and GroupMetadataValue objects are never changed once replayed; a
        # modern group compares by its fields.
        return ({group: dict(committed) for group, committed in self.offsets.items()},
                dict(self.persisted), txn_offsets.copy_pending(self.pending_txn_offsets),
                *({gid: _fields(group.copy()) for gid, group in groups.items()}
                  for groups in (self.consumer_groups, self.streams_groups, self.share_groups)))

    # transactional offsets (kbroker.coordinator.group.txn_offsets)
    def replay_transactional(self, offset, producer_id, producer_epoch, key, value) -> None:
        txn_offsets.replay_transactional(self, offset, producer_id, key, value)

    def replay_end_txn(self, offset, producer_id, commit) -> None:
        txn_offsets.replay_end_txn(self, producer_id, commit)

    # --- loading -------------------------------------------------------------------------------

    def on_loaded(self) -> None:
        for group_id, value in self.persisted.items():
            group = ClassicGroup.from_record(group_id, value)
            self.groups[group_id] = group
            for member in group.members.values():
                self.schedule_session_expiry(group, member)
        for group_id in self.offsets:
            # A standalone commit (no group management) makes an Empty group (Kafka).
            if not self.is_modern_group(group_id):
                self.groups.setdefault(group_id, ClassicGroup(group_id, state_timestamp=-1))
        from kbroker.coordinator.group.consumer import membership
        for group in self.consumer_groups.values():
            membership.on_loaded(self, group)
        from kbroker.coordinator.group.streams import membership as streams_membership
        for group in self.streams_groups.values():
            streams_membership.on_loaded(self, group)
        from kbroker.coordinator.group.share import membership as share_membership
        for group in self.share_groups.values():
            share_membership.on_loaded(self, group)

    def on_unloaded(self) -> None:
        """Members parked in JoinGroup/SyncGroup learn to find the new coordinator."""
        for group in self.groups.values():
            for member in group.members.values():
                answer_parked(member, Errors.NOT_COORDINATOR)
        self.groups.clear()

    # --- groups --------------------------------------------------------------------------------

    def group(self, group_id: str) -> ClassicGroup | None:
        """The classic group of that id (None for a consumer or streams group)."""
        if self.is_modern_group(group_id):
            return None
        group = self.groups.get(group_id)
        return group if group is not None and group.state is not S.DEAD else None

    def group_of_type(self, group_id: str, group_type: str):
        """The group of this id if it is a ``group_type`` group ("classic", "consumer",
        "streams", "share"); None when no group has the id. When a group of another type has
        it: GROUP_ID_NOT_FOUND "Group X is not a <type> group." (Kafka's message). This is the
        one place the rule "a group id names one group, of one type" is checked."""
        for type_name, groups in (("consumer", self.consumer_groups),
                                  ("streams", self.streams_groups),
                                  ("share", self.share_groups)):
            group = groups.get(group_id)
            if group is not None:
                break
        else:
            type_name, group = "classic", self.group(group_id)
        if group is None or type_name == group_type:
            return group
        raise KafkaError(Errors.GROUP_ID_NOT_FOUND,
                         f"Group {group_id} is not a {group_type} group.")

    def is_modern_group(self, group_id: str) -> bool:
        """Whether the id is a consumer, streams or share group (not a classic one)."""
        return group_id in self.consumer_groups or group_id in self.streams_groups or \
            group_id in self.share_groups

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

    def forget_classic_group(self, group_id: str) -> None:
        """The classic group became a consumer group (its GroupMetadata tombstone is on the
        log): drop its live state."""
        group = self.groups.get(group_id)
        if group is not None:
            self._cancel_group_timers(group)
            del self.groups[group_id]

    def install_classic_group(self, group: ClassicGroup) -> None:
        """A consumer group became this classic group (its GroupMetadata record is on the log)."""
        self.groups[group.group_id] = group

    def add_group(self, group_id: str) -> ClassicGroup | None:
        """The live group of a group the log now has (created by a join or a commit); none for
        a consumer or streams group."""
        if self.is_modern_group(group_id):
            return None
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ClassicGroup(group_id, state_timestamp=now_ms())
        return group

    def drop_group(self, group_id: str) -> None:
        """The log deleted the group: forget its members and timers."""
        group = self.groups.pop(group_id, None)
        if group is not None:
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
