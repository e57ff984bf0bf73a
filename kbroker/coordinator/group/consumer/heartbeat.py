"""ConsumerGroupHeartbeat as a coordinator operation (Kafka's consumerGroupHeartbeat).

One heartbeat, in order:
1. find or create the group (a first heartbeat, epoch 0, creates it; an empty classic group of
   that id is deleted, a non-empty one is upgraded when the migration policy allows it) and the
   member (new, rejoining, or a static member replacing its released predecessor), checking its
   epoch: FENCED_MEMBER_EPOCH unless it sends its epoch, 0, or its previous epoch with a subset of
   its partitions (the answer with the new epoch was lost);
2. apply the member's changes (subscription, regex, assignor, rebalance timeout, rack): a changed
   subscription or metadata hash moves the group epoch (:mod:`.subscription`);
3. when the group epoch is ahead of the target assignment and ``consumer.assignment.interval.ms``
   has passed since the last one (KIP-1263), compute a new target assignment (:mod:`.target`);
4. reconcile the member toward its target (:mod:`.reconcile`): revoke first, then assign what is
   free;
5. (re)arm its session timeout; answer its epoch, the heartbeat interval, and its assignment when
   it joined, sent a full request, or its assignment changed.

Everything the heartbeat decides is written as records and applied by replay; the response is
computed here from the same values.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, replace

from kbroker.coordinator.group import records as group_records
from kbroker.coordinator.group.consumer import membership, migration
from kbroker.coordinator.group.consumer import records as rec
from kbroker.coordinator.group.consumer import settings, subscription, target
from kbroker.coordinator.group.consumer.assignors import topic_ids
from kbroker.coordinator.group.consumer.group import ConsumerGroup, subscription_type
from kbroker.coordinator.group.consumer.member import (JOIN_EPOCH, LEAVE_EPOCH,
                                                       STATIC_LEAVE_EPOCH, ConsumerGroupMember,
                                                       MemberState, without_epochs)
from kbroker.coordinator.group.consumer.reconcile import reconcile
from kbroker.coordinator.runtime import CoordinatorResult, now_ms
from kbroker.protocol.errors import Errors, KafkaError

log = logging.getLogger("kbroker.coordinator.group")


@dataclass
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: list | None = None  # [(topic id, [partitions])]
    client_id: str = ""
    client_host: str = ""


@dataclass
class HeartbeatResponse:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int = 0
    assignment: dict | None = None  # {topic id: partitions} when sent


def heartbeat(shard, req: HeartbeatRequest) -> CoordinatorResult:
    if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
        return membership.leave(shard, req.group_id, req.member_id, req.instance_id,
                                req.member_epoch,
                                lambda mid, _: HeartbeatResponse(req.member_id, req.member_epoch))
    now = now_ms()
    records: list = []
    committed: list = []  # in-memory work once the records are committed
    joining = req.member_epoch == JOIN_EPOCH
    group = group_for_heartbeat(shard, req.group_id, joining, records, committed)
    member_id = req.member_id or str(uuid.uuid4())  # v0: the coordinator may name the member
    throw_if_full(shard, group, member_id, req.instance_id)
    if req.instance_id is None:
        member = dynamic_member(group, member_id, req.member_epoch, req.owned, joining)
    else:
        member = static_member(shard, group, member_id, req, joining, records)
    if (req.instance_id is None and req.rack_id is None and req.rebalance_timeout_ms == -1
            and req.server_assignor is None and req.subscribed_topic_names is None
            and req.subscribed_topic_regex is None and member.classic is None
            and member.client_id == req.client_id and member.client_host == req.client_host):
        updated = member  # a plain heartbeat: nothing of the member changes
    else:
        updated = _updated_member(member, req)
    # A new member counts one more; a static member replacing its predecessor does not.
    is_new = updated.member_id not in group.members and \
        group.static_member(updated.instance_id) is None
    if updated is not member and updated != member:
        records.append(rec.member_subscription(req.group_id, updated))
    change = subscription.update(shard, group, member, updated, now, records, is_new)
    target_epoch, member_target = update_target(shard, group, change, member, updated, now,
                                                records)
    updated = maybe_reconcile(shard, group, updated, target_epoch, member_target,
                              change.resolved, change.changed, req.owned, records)
    membership.schedule_session(shard, req.group_id, updated.member_id)
    response = HeartbeatResponse(updated.member_id, updated.member_epoch,
                                 settings.heartbeat_interval_ms(shard, req.group_id))
    full = req.rebalance_timeout_ms != -1 and req.owned is not None and (
        req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None)
    if joining or full or (member.assigned is not updated.assigned
                           and member.assigned != updated.assigned):
        response.assignment = without_epochs(updated.assigned)
    result = CoordinatorResult(records, response)
    if committed:
        result.on_committed = lambda: [fn() for fn in committed]
    return result


def _updated_member(member: ConsumerGroupMember, req: HeartbeatRequest) -> ConsumerGroupMember:
    return replace(
        member,
        instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
        rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
        rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
        else member.rebalance_timeout_ms,
        server_assignor=req.server_assignor if req.server_assignor is not None
        else member.server_assignor,
        subscribed_topic_names=frozenset(req.subscribed_topic_names)
        if req.subscribed_topic_names is not None else member.subscribed_topic_names,
        subscribed_topic_regex=req.subscribed_topic_regex
        if req.subscribed_topic_regex is not None else member.subscribed_topic_regex,
        client_id=req.client_id, client_host=req.client_host, classic=None)


# --- the group and the member --------------------------------------------------------------------

def group_for_heartbeat(shard, group_id: str, create: bool, records: list,
                        committed: list) -> ConsumerGroup:
    classic = shard.group(group_id) if create else None
    if classic is not None and classic.is_empty():
        # An empty classic group (or one that only holds offsets) becomes a consumer group;
        # its offsets stay.
        records.append(group_records.group_metadata_tombstone(group_id))
        committed.append(lambda: shard.forget_classic_group(classic))
        log.info("group %s: converted the empty classic group to a consumer group", group_id)
        return ConsumerGroup(group_id)
    if classic is not None:
        return migration.upgrade(shard, classic, records, committed)
    group = shard.group_of_type(group_id, "consumer")
    if group is not None:
        return group
    if not create:
        raise KafkaError(Errors.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
    return ConsumerGroup(group_id)


def throw_if_full(shard, group: ConsumerGroup, member_id: str, instance_id: str | None) -> None:
    if member_id in group.members:
        return
    limit = shard.config.get("group.consumer.max.size")
    if len(group.members) >= limit and group.static_member(instance_id) is None:
        raise KafkaError(Errors.GROUP_MAX_SIZE_REACHED,
                         f"The consumer group has reached its maximum capacity of {limit} "
                         f"members.")


def check_epoch(member: ConsumerGroupMember, epoch: int, owned: list | None) -> None:
    """Kafka's fencing rule for a heartbeat's epoch."""
    if epoch == JOIN_EPOCH:
        return
    if epoch > member.member_epoch:
        raise KafkaError(Errors.FENCED_MEMBER_EPOCH,
                         f"The consumer group member has a greater member epoch ({epoch}) than "
                         f"the one known by the group coordinator ({member.member_epoch}). The "
                         f"member must abandon all its partitions and rejoin.")
    if epoch < member.member_epoch and (epoch != member.previous_member_epoch
                                        or not owned_subset(owned, member.assigned)):
        raise KafkaError(Errors.FENCED_MEMBER_EPOCH,
                         f"The consumer group member has a smaller member epoch ({epoch}) than "
                         f"the one known by the group coordinator ({member.member_epoch}). The "
                         f"member must abandon all its partitions and rejoin.")


def owned_subset(owned: list | None, assigned) -> bool:
    if owned is None:
        return False
    for topic_id, partitions in owned:
        mine = assigned.get(topic_id)
        if mine is None or any(p not in mine for p in partitions):
            return False
    return True


def dynamic_member(group: ConsumerGroup, member_id: str, epoch: int, owned, joining: bool):
    member = group.members.get(member_id)
    if member is None:
        if not joining:
            raise KafkaError(Errors.UNKNOWN_MEMBER_ID,
                             f"Member {member_id} is not a member of group {group.group_id}.")
        log.info("group %s: member %s joins the consumer group using the consumer protocol",
                 group.group_id, member_id)
        return ConsumerGroupMember(member_id)
    check_epoch(member, epoch, owned)
    return member


def static_member(shard, group: ConsumerGroup, member_id: str, req: HeartbeatRequest,
                  joining: bool, records: list):
    existing = group.static_member(req.instance_id)
    if not joining:
        existing = membership.static_member_of(group, req.instance_id, member_id)
        check_epoch(existing, req.member_epoch, req.owned)
        return existing
    if existing is None:
        log.info("group %s: static member %s with instance id %s joins the consumer group",
                 group.group_id, member_id, req.instance_id)
        return group.members.get(member_id) or ConsumerGroupMember(member_id)
    if not existing.uses_classic_protocol and existing.member_epoch != STATIC_LEAVE_EPOCH:
        log.info("group %s: static member %s with instance id %s cannot join: the instance id "
                 "is owned by member %s", group.group_id, member_id, req.instance_id,
                 existing.member_id)
        raise KafkaError(Errors.UNRELEASED_INSTANCE_ID,
                         f"Static member {member_id} with instance id {req.instance_id} cannot "
                         f"join the group because the instance id is owned by "
                         f"{existing.member_id} member.")
    replacement = replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
    replace_member(group, existing, replacement, records)
    log.info("group %s: static member with instance id %s re-joins the consumer group as %s, "
             "replacing %s", group.group_id, req.instance_id, member_id, existing.member_id)
    return replacement


def replace_member(group: ConsumerGroup, old: ConsumerGroupMember, new: ConsumerGroupMember,
                   records: list) -> None:
    """The records that put ``new`` in ``old``'s place, with its target assignment."""
    gid = group.group_id
    records += membership.remove_member_records(gid, old.member_id)
    records.append(rec.member_subscription(gid, new))
    records.append(rec.target_member(gid, new.member_id, group.target_of(old.member_id)))
    records.append(rec.current_assignment(gid, new))


# --- target and reconciliation -------------------------------------------------------------------

def update_target(shard, group: ConsumerGroup, change, member, updated, now: int,
                  records: list) -> tuple[int, dict]:
    """(target epoch, the member's target) after computing a new target when it is due. When
    ``consumer.assignment.interval.ms`` holds it back (the last one was computed less than the
    interval ago), the member keeps the current target and the first heartbeat after the
    interval computes it: nothing computes it off a heartbeat, as in Kafka's
    GroupMetadataManager (a timer would move the interval's start and hold back the next
    subscription change of every member)."""
    if group.assignment_epoch >= change.epoch:
        return group.assignment_epoch, target_for(group, updated)
    interval = settings.assignment_interval_ms(shard, group.group_id)
    if not target.can_compute(group.assignment_timestamp, interval, now):
        return group.assignment_epoch, target_for(group, updated)
    assignor = group.preferred_assignor(member, updated) or settings.default_assignor(shard)
    kind = change.subscription
    if kind is None:
        kind = subscription_type(group.regex_subscribers, group.subscribed, len(group.members))
    new_records, assignment = target.build(group, change.epoch, assignor, kind, shard.image, now,
                                           updated=updated, resolved=change.resolved)
    records += new_records
    log.info("group %s: computed a new target assignment for epoch %d with the '%s' assignor",
             group.group_id, change.epoch, assignor)
    return change.epoch, assignment.get(updated.member_id, {})


def target_for(group: ConsumerGroup, member: ConsumerGroupMember) -> dict:
    if member.member_id in group.target or member.instance_id is None:
        return group.target_of(member.member_id)
    previous = group.static_members.get(member.instance_id)
    return group.target_of(previous) if previous is not None else {}


def maybe_reconcile(shard, group: ConsumerGroup, member: ConsumerGroupMember, target_epoch: int,
                    target_assignment: dict, resolved: dict, subscription_changed: bool,
                    owned, records: list) -> ConsumerGroupMember:
    if not subscription_changed and member.is_reconciled_to(target_epoch):
        return member
    subscribed = topic_ids(group.subscribed_topics_of(member, resolved), shard.image)
    updated = reconcile(member, target_epoch, target_assignment, subscribed,
                        group.current_partition_epoch, owned, subscription_changed)
    if updated != member:
        records.append(rec.current_assignment(group.group_id, updated))
        if not updated.uses_classic_protocol:
            if updated.state is MemberState.UNREVOKED_PARTITIONS:
                membership.schedule_rebalance(shard, group.group_id, updated.member_id,
                                              updated.member_epoch, updated.rebalance_timeout_ms)
            else:
                shard.cancel((membership.REBALANCE, group.group_id, updated.member_id))
    return updated
