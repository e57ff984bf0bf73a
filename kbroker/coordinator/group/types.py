"""The group interface: what the shard asks of a group of any type.

Every group of a shard, whatever its type, is one object in one map (``GroupShard.groups``,
group id -> group): a :class:`ClassicGroup`, ``ConsumerGroup``, ``StreamsGroup`` or ``ShareGroup``,
each implementing :class:`Group`. The shard dispatches by the object (listing, deletion, offset
expiry, OffsetDelete, its durable view), never on a type tag, and owns the id-collision rule
(:meth:`GroupShard.group_of_type`). The consumer, streams and share groups are wholly durable:
their records replay into the map. A classic group's durable part is its last GroupMetadata record
(``GroupShard.persisted``); its object in the map is its live membership (members, parked
JoinGroup/SyncGroup requests), in memory as in Kafka, installed once its record is committed.

Each type is a package (classic groups live in the group package itself, ``classic.py``),
registered in :data:`kbroker.coordinator.group.registry.GROUP_TYPES` with the record types it
owns and two of its modules:

- its replay module: ``replay(shard, record_type, key_view, value)`` applies one of its records
  to the shard's durable maps (pure: no clock, timers or futures);
- its membership module: ``on_loaded(shard, group)`` / ``on_unloaded(shard, group)``, what a
  group needs when the shard loads (its members' timers, as if each had just heartbeated) or
  moves to another broker (parked requests told NOT_COORDINATOR).

Adding a group type: write its package (the group class implementing :class:`Group`, its records,
replay, membership and operations), then add one line to ``registry.GROUP_TYPES``. Its modules
are imported on the first record of the type, so a shard holding only classic groups and offsets
never imports the others.

A type's Describe API (DescribeGroups, ConsumerGroupDescribe, StreamsGroupDescribe,
ShareGroupDescribe) reads its own type's object through ``group_of_type``; what it reports is the
type's own, so describing is not part of the shared interface.
"""

from __future__ import annotations

from typing import ClassVar, Protocol

from kbroker.coordinator.group.records import CommittedOffset
from kbroker.protocol.errors import Errors, KafkaError


class Group(Protocol):
    group_type: ClassVar[str]  # as ListGroups names it: "classic", "consumer", "streams", "share"
    group_id: str
    members: dict

    @property
    def state(self):
        """The group's state (an enum whose value is Kafka's name of it)."""

    def list_entry(self) -> tuple[str, str, str, str]:
        """(group id, protocol type, state, group type) as ListGroups answers it."""

    def delete_error(self) -> Errors:
        """Whether DeleteGroups may delete it: NONE, or NON_EMPTY_GROUP."""

    def tombstones(self) -> list:
        """The records that delete the group (its committed offsets aside)."""

    def guarded_topics(self) -> set[str] | None:
        """OffsetDelete: the topics whose offsets it may not delete (GROUP_SUBSCRIBED_TO_TOPIC);
        None when it may delete none (NON_EMPTY_GROUP). Raises KafkaError when the type keeps no
        offsets."""

    def expired_offsets(self, committed: dict[tuple[str, int], CommittedOffset],
                        retention_ms: int, now: int) -> list[tuple[str, int]]:
        """Which of the group's committed offsets are past their retention."""

    def expires_with_offsets(self, expired: int, committed: int) -> bool:
        """Whether the group goes with its offsets when ``expired`` of its ``committed`` offsets
        expire (an empty group left without offsets)."""

    def durable_view(self):
        """What the log says of the group, comparable with ``==`` (None: nothing, as for a
        classic group, whose record is kept apart)."""

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        """OffsetFetch v9+ with a member: raises KafkaError when the member may not fetch."""


class ModernGroup:
    """What the consumer, streams and share groups share: their state follows from their
    records; an empty one may be deleted and expires with its last offsets."""

    group_type: ClassVar[str]
    __slots__ = ()

    @property
    def is_empty(self) -> bool:
        return not self.members

    def list_entry(self) -> tuple[str, str, str, str]:
        return self.group_id, self.group_type, self.state.value, self.group_type

    def member(self, member_id: str):
        """The member; UNKNOWN_MEMBER_ID with Kafka's message when the group has none of that
        id."""
        member = self.members.get(member_id)
        if member is None:
            raise KafkaError(Errors.UNKNOWN_MEMBER_ID,
                             f"Member {member_id} is not a member of group {self.group_id}.")
        return member

    def delete_error(self) -> Errors:
        return Errors.NONE if self.is_empty else Errors.NON_EMPTY_GROUP

    def expired_offsets(self, committed: dict[tuple[str, int], CommittedOffset],
                        retention_ms: int, now: int) -> list[tuple[str, int]]:
        # Offsets of topics the group does not read expire a retention after their commit
        # (Kafka's condition on the commit timestamp); the others never do.
        read = self.guarded_topics()
        return [(topic, partition) for (topic, partition), c in committed.items()
                if topic not in read and (now >= c.expire_timestamp if c.expire_timestamp >= 0
                                          else now - c.commit_timestamp >= retention_ms)]

    def expires_with_offsets(self, expired: int, committed: int) -> bool:
        return self.is_empty and expired == committed and expired > 0

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        pass  # a share group keeps no offsets; the consumer and streams groups check epochs

    def validate_offset_commit(self, member_id: str, instance_id: str | None, epoch: int,
                               transactional: bool, api_version: int):
        """OffsetCommit or TxnOffsetCommit: None (every partition may be committed) or a
        validator ``(topic, topic_id, partition)``; raises KafkaError for the whole request.
        (A classic group's rules need its shard: ``offsets.validate_commit``.)"""
        raise KafkaError(Errors.GROUP_ID_NOT_FOUND,
                         f"Group {self.group_id} is not a consumer group.")

    def durable_view(self):
        copy = self.copy()
        names = getattr(copy, "__slots__", None) or vars(copy)
        return {name: getattr(copy, name) for name in names}
