"""The target assignment (Kafka's TargetAssignmentBuilder): run the group's assignor over every
member's subscription and write what changed.

Input: the group, the new group epoch, the member being updated (or a static member replacing
another, whose target it inherits) and the metadata image. Output: the records of the members
whose target changed, then the target assignment's epoch and timestamp (always written: it is what
tells the members the target moved), and every member's new target.
"""

from __future__ import annotations

from kbroker.coordinator.group.consumer import records as rec
from kbroker.coordinator.group.consumer.assignors import (ASSIGNORS, AssignorError, MemberSpec,
                                                          topic_ids)
from kbroker.coordinator.group.consumer.group import ConsumerGroup, SubscriptionType
from kbroker.protocol.errors import Errors, KafkaError


def can_compute(assignment_timestamp: int, interval_ms: int, now: int) -> bool:
    """KIP-1263: at most one new target assignment per ``consumer.assignment.interval.ms``
    (always when there is none yet, or the interval is 0)."""
    return assignment_timestamp == 0 or interval_ms == 0 or now >= assignment_timestamp + \
        interval_ms


def build(group: ConsumerGroup, epoch: int, assignor: str, subscription: SubscriptionType,
          image, now: int, updated=None, removed=(), resolved=None) -> tuple[list, dict]:
    """(records, {member id: {topic id: frozenset}}). ``updated``: the new version of one member
    (possibly new, possibly replacing a static member); ``removed``: member ids to leave out."""
    resolved = group.resolved if resolved is None else resolved
    members = dict(group.members)
    targets = dict(group.target)
    for member_id in removed:
        members.pop(member_id, None)
    if updated is not None:
        previous = group.static_members.get(updated.instance_id) \
            if updated.instance_id is not None else None
        if previous is not None and previous != updated.member_id:
            members.pop(previous, None)  # replaced: its target goes to the new member
            targets.setdefault(updated.member_id, group.target_of(previous))
        members[updated.member_id] = updated
    specs, partitions = {}, {}
    for member_id, member in members.items():
        ids = topic_ids(group.subscribed_topics_of(member, resolved), image)
        for topic_id in ids:
            if topic_id not in partitions:
                partitions[topic_id] = image.topic_by_id(topic_id).num_partitions
        specs[member_id] = MemberSpec(ids, member.instance_id, member.rack_id,
                                      targets.get(member_id, {}))
    try:
        assignment = ASSIGNORS[assignor](specs, partitions,
                                         subscription is SubscriptionType.HOMOGENEOUS)
    except AssignorError as exc:
        raise KafkaError(Errors.UNKNOWN_SERVER_ERROR,
                         f"Failed to compute a new target assignment for epoch {epoch}: "
                         f"{exc}") from None
    records = []
    for member_id in specs:
        new = assignment.get(member_id, {})
        old = group.target.get(member_id)
        if old is None or {t: p for t, p in old.items() if p} != {t: p for t, p in new.items()
                                                                   if p}:
            records.append(rec.target_member(group.group_id, member_id, new))
    records.append(rec.target_metadata(group.group_id, epoch, now))
    return records, assignment
