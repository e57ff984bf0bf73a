"""A consumer group (KIP-848): its members, epochs, target assignment and the indexes derived
from them.

Everything here is durable: a ConsumerGroup is rebuilt from its records
(:mod:`kbroker.coordinator.group.consumer.replay`) and changes only through them. Operations
read it and compute the next state; they never write to it.

The group's state is not stored but follows from its epochs, as in Kafka (the one table of the
group's states)::

    Empty        no members
    Assigning    group epoch > target assignment epoch: the target assignment is behind
    Reconciling  some member is not yet Stable at the target assignment epoch
    Stable       every member owns its target assignment at the assignment epoch
    Dead         deleted (no longer in the shard)

The indexes kept up to date by :meth:`update_member` / :meth:`remove_member`: how many members
subscribe to each topic (by name and through regexes), each regex's subscriber count, the owner
epoch of every owned partition (``partition_epochs``: a partition goes to a new owner only once
the old owner has released it), static members by instance id, assignor votes, and the classic
members' protocols (for members still on the classic protocol, online migration).
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass

from kbroker.coordinator.group.consumer import offsets, records
from kbroker.coordinator.group.consumer.member import ConsumerGroupMember, MemberState
from kbroker.coordinator.group.modern import group_hash, topic_hash  # noqa: F401 (re-exported)
from kbroker.coordinator.group.types import ModernGroup

INITIAL_EPOCH = 1  # Kafka starts a group and its target assignment at epoch 1


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class SubscriptionType(enum.Enum):
    HOMOGENEOUS = "homogeneous"      # every member subscribes to the same topics
    HETEROGENEOUS = "heterogeneous"


@dataclass(frozen=True, slots=True)
class ResolvedRegex:
    topics: frozenset
    version: int     # the metadata version it was resolved against
    timestamp: int   # when (ms)


class ConsumerGroup(ModernGroup):
    group_type = "consumer"
    __slots__ = ("group_id", "group_epoch", "metadata_hash", "assignment_epoch",
                 "assignment_timestamp", "members", "target", "inverted", "partition_epochs",
                 "subscribed", "regex_subscribers", "resolved", "static_members",
                 "assignor_votes", "classic_members", "classic_protocols",
                 "has_partition_metadata_record", "metadata_refresh")

    def __init__(self, group_id: str):
        self.group_id = group_id
        self.group_epoch = INITIAL_EPOCH
        self.metadata_hash = 0
        self.assignment_epoch = INITIAL_EPOCH
        self.assignment_timestamp = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.target: dict[str, dict] = {}             # member -> {topic id: frozenset}
        self.inverted: dict[uuid.UUID, dict] = {}     # topic id -> {partition: member}
        self.partition_epochs: dict[uuid.UUID, dict] = {}  # topic id -> {partition: owner epoch}
        self.subscribed: dict[str, list] = {}         # topic -> [by name, by regex]
        self.regex_subscribers: dict[str, int] = {}
        self.resolved: dict[str, ResolvedRegex] = {}
        self.static_members: dict[str, str] = {}      # instance id -> member id
        self.assignor_votes: dict[str, int] = {}
        self.classic_members = 0
        self.classic_protocols: dict[str, int] = {}
        self.has_partition_metadata_record = False
        # Not durable: a heartbeat after this (deadline ms, epoch) re-checks topic metadata.
        self.metadata_refresh = (0, 0)

    def copy(self) -> "ConsumerGroup":
        """An independent copy (members and assignments are immutable, so maps are copied)."""
        other = ConsumerGroup.__new__(ConsumerGroup)
        for name in self.__slots__:
            setattr(other, name, getattr(self, name))
        other.members = dict(self.members)
        other.target = dict(self.target)
        other.inverted = {t: dict(p) for t, p in self.inverted.items()}
        other.partition_epochs = {t: dict(p) for t, p in self.partition_epochs.items()}
        other.subscribed = {t: list(c) for t, c in self.subscribed.items()}
        other.regex_subscribers = dict(self.regex_subscribers)
        other.resolved = dict(self.resolved)
        other.static_members = dict(self.static_members)
        other.assignor_votes = dict(self.assignor_votes)
        other.classic_protocols = dict(self.classic_protocols)
        return other

    # --- state ---------------------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def tombstones(self) -> list:
        return records.group_tombstones(self)

    def guarded_topics(self) -> set[str]:
        return set(self.subscribed)  # by name or by regex

    def validate_offset_commit(self, member_id: str, instance_id: str | None, epoch: int,
                               transactional: bool, api_version: int):
        return offsets.validate_commit(self, member_id, instance_id, epoch, transactional,
                                       api_version)

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        offsets.validate_fetch(self, member_id, member_epoch)  # v9+ with its epoch (KIP-848)

    # --- members -------------------------------------------------------------------------------

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id) if instance_id is not None else None
        return self.members.get(member_id) if member_id is not None else None

    def update_member(self, new: ConsumerGroupMember) -> None:
        old = self.members.get(new.member_id)
        self.members[new.member_id] = new
        self._count_member(old, -1)
        self._count_member(new, +1)
        self._remove_epochs(old)
        self._add_epochs(new.assigned, new.member_epoch)
        self._add_epochs(new.pending_revocation, new.member_epoch)
        if new.instance_id is not None:
            self.static_members[new.instance_id] = new.member_id

    def remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        if old is None:
            return
        self._count_member(old, -1)
        self._remove_epochs(old)
        if old.instance_id is not None and self.static_members.get(old.instance_id) == member_id:
            del self.static_members[old.instance_id]

    def _count_member(self, member: ConsumerGroupMember | None, delta: int) -> None:
        if member is None:
            return
        for topic in member.subscribed_topic_names:
            _count(self.subscribed, topic, 0, delta)
        if member.regex:
            _inc(self.regex_subscribers, member.regex, delta)
        if member.server_assignor:
            _inc(self.assignor_votes, member.server_assignor, delta)
        if member.classic is not None:
            self.classic_members += delta
            for name, _ in member.classic.protocols:
                _inc(self.classic_protocols, name, delta)

    def _remove_epochs(self, member: ConsumerGroupMember | None) -> None:
        if member is None:
            return
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, partitions in assignment.items():
                owners = self.partition_epochs.get(topic_id)
                if owners is None:
                    continue
                for partition in partitions:
                    # Only the epoch this member set: a new owner may already hold it.
                    if owners.get(partition) == member.member_epoch:
                        del owners[partition]
                if not owners:
                    del self.partition_epochs[topic_id]

    def _add_epochs(self, assignment, epoch: int) -> None:
        for topic_id, partitions in assignment.items():
            owners = self.partition_epochs.setdefault(topic_id, {})
            for partition in partitions:
                owners[partition] = epoch

    def current_partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        """The epoch of the partition's current owner, or -1 when nobody owns it."""
        return self.partition_epochs.get(topic_id, {}).get(partition, -1)

    # --- target assignment ---------------------------------------------------------------------

    def target_of(self, member_id: str) -> dict:
        return self.target.get(member_id, {})

    def update_target(self, member_id: str, partitions: dict) -> None:
        old = self.target.get(member_id, {})
        for topic_id in set(old) | set(partitions):
            before, after = old.get(topic_id, frozenset()), partitions.get(topic_id, frozenset())
            owners = self.inverted.setdefault(topic_id, {})
            for partition in before - after:
                # A partition moved to a member updated first keeps that member as its owner.
                if owners.get(partition) == member_id:
                    del owners[partition]
            for partition in after - before:
                owners[partition] = member_id
            if not owners:
                del self.inverted[topic_id]
        if partitions:
            self.target[member_id] = dict(partitions)
        else:
            self.target[member_id] = {}

    def remove_target(self, member_id: str) -> None:
        if member_id in self.target:
            self.update_target(member_id, {})
            del self.target[member_id]

    # --- subscriptions -------------------------------------------------------------------------

    def update_resolved(self, regex: str, resolved: ResolvedRegex | None) -> None:
        old = self.resolved.pop(regex, None)
        if old is not None:
            for topic in old.topics:
                _count(self.subscribed, topic, 1, -1)
        if resolved is not None:
            self.resolved[regex] = resolved
            for topic in resolved.topics:
                _count(self.subscribed, topic, 1, +1)

    def subscribed_topics_of(self, member: ConsumerGroupMember, resolved=None) -> frozenset:
        """The topic names a member subscribes to: its names plus what its regex resolved to
        (an unresolved regex matches nothing yet)."""
        names = member.subscribed_topic_names
        if member.regex:
            found = (resolved if resolved is not None else self.resolved).get(member.regex)
            if found is not None and found.topics:
                return names | found.topics if names else found.topics
        return names

    def subscribed_names_with(self, old: ConsumerGroupMember | None,
                              new: ConsumerGroupMember | None) -> dict:
        """The topic subscription counts if ``old`` became ``new`` (either may be None),
        including a regex that loses its last subscriber."""
        counts = {t: list(c) for t, c in self.subscribed.items()}
        for member, delta in ((old, -1), (new, +1)):
            if member is not None:
                for topic in member.subscribed_topic_names:
                    _count(counts, topic, 0, delta)
        old_regex = old.regex if old is not None else None
        new_regex = new.regex if new is not None else None
        if old_regex and old_regex != new_regex and self.regex_subscribers.get(old_regex) == 1:
            resolved = self.resolved.get(old_regex)
            for topic in (resolved.topics if resolved else ()):
                _count(counts, topic, 1, -1)
        return counts

    def subscribed_names_without(self, members, regexes) -> dict:
        counts = {t: list(c) for t, c in self.subscribed.items()}
        for member in members:
            for topic in member.subscribed_topic_names:
                _count(counts, topic, 0, -1)
        for regex in regexes:
            resolved = self.resolved.get(regex)
            for topic in (resolved.topics if resolved else ()):
                _count(counts, topic, 1, -1)
        return counts

    def regex_subscribers_with(self, old, new) -> dict:
        counts = dict(self.regex_subscribers)
        old_regex = old.regex if old is not None else None
        new_regex = new.regex if new is not None else None
        if old_regex != new_regex:
            if old_regex:
                _inc(counts, old_regex, -1)
            if new_regex:
                _inc(counts, new_regex, +1)
        return counts

    def preferred_assignor(self, old=None, new=None) -> str | None:
        votes = dict(self.assignor_votes)
        for member, delta in ((old, -1), (new, +1)):
            if member is not None and member.server_assignor:
                _inc(votes, member.server_assignor, delta)
        return max(votes, key=lambda name: votes[name]) if votes else None

    def last_regex_refresh(self) -> tuple[int, int]:
        """(timestamp, version) of the last regex resolution; they are resolved together."""
        for resolved in self.resolved.values():
            return resolved.timestamp, resolved.version
        return -(1 << 63), 0

    # --- migration -----------------------------------------------------------------------------

    def supports_classic_protocols(self, protocol_type: str, names: set) -> bool:
        """A classic member may join when one of its protocols is one every classic member
        supports (any non-empty list for an empty group)."""
        if protocol_type != "consumer":
            return False
        if self.is_empty:
            return bool(names)
        return any(self.classic_protocols.get(n, 0) == self.classic_members for n in names)

    def all_classic_except(self, leaving) -> bool:
        """Whether every member left after ``leaving`` leave uses the classic protocol."""
        leaving_classic = sum(1 for m in leaving if m.uses_classic_protocol)
        return self.classic_members - leaving_classic == len(self.members) - len(leaving)

    def waiting_on_unreleased(self, member: ConsumerGroupMember) -> bool:
        if member.state is not MemberState.UNRELEASED_PARTITIONS:
            return False
        for topic_id, partitions in self.target_of(member.member_id).items():
            owned = member.assigned.get(topic_id, {})
            for partition in partitions:
                if partition not in owned and self.current_partition_epoch(topic_id,
                                                                           partition) != -1:
                    return True
        return False


def _inc(counts: dict, key, delta: int) -> None:
    value = counts.get(key, 0) + delta
    if value > 0:
        counts[key] = value
    else:
        counts.pop(key, None)


def _count(counts: dict, topic: str, kind: int, delta: int) -> None:
    """kind 0: subscribed by name, 1: through a regex."""
    pair = counts.get(topic)
    if pair is None:
        if delta <= 0:
            return
        pair = counts[topic] = [0, 0]
    pair[kind] = max(0, pair[kind] + delta)
    if pair == [0, 0]:
        del counts[topic]


def subscription_type(regex_subscribers: dict, subscribed: dict, members: int) -> SubscriptionType:
    """Kafka's rule: homogeneous when every member subscribes to the same names and no regex, or
    every member to the one same regex and nothing else."""
    if not regex_subscribers:
        if all(by_name == members for by_name, _ in subscribed.values()):
            return SubscriptionType.HOMOGENEOUS
        return SubscriptionType.HETEROGENEOUS
    if len(regex_subscribers) == 1 and next(iter(regex_subscribers.values())) == members:
        if all(by_regex == 1 and by_name == 0 for by_name, by_regex in subscribed.values()):
            return SubscriptionType.HOMOGENEOUS
    return SubscriptionType.HETEROGENEOUS
