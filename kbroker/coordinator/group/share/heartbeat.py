"""ShareGroupHeartbeat as a coordinator operation (Kafka 4.4's shareGroupHeartbeat).

One heartbeat, in order:
1. leave (epoch -1): the member's tombstones and a new group epoch (:mod:`.membership`);
2. find or create the group (a join, epoch 0, creates it; a group of another type is
   GROUP_ID_NOT_FOUND "Group X is not a share group."), refuse a new member of a full group
   (GROUP_MAX_SIZE_REACHED), find or create the member (UNKNOWN_MEMBER_ID; FENCED_MEMBER_EPOCH
   for an epoch the coordinator does not know, unless it is the previous one: the response that
   moved it may have been lost);
3. apply the member's changes (rack, subscription, client): a changed subscription, a moved
   metadata hash of the subscribed topics, or initialized partitions that no target covers move
   the group epoch;
4. when the group epoch is ahead of the target and ``share.assignment.interval.ms`` has
   passed, a new target assignment over the *initialized* partitions (:mod:`.target`);
5. the member moves straight to its target (nothing to revoke: partitions may be shared);
6. (re)arm its session; answer epoch, interval and (when joining, on a full request or when it
   changed) the assignment; hand back the partitions to initialize (:mod:`.initialize`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

from kbroker.coordinator.group import modern
from kbroker.coordinator.group.share import initialize, membership
from kbroker.coordinator.group.share import records as rec
from kbroker.coordinator.group.share import settings
from kbroker.coordinator.group.share.group import ShareGroup
from kbroker.coordinator.group.share.member import JOIN_EPOCH, LEAVE_EPOCH, ShareGroupMember
from kbroker.coordinator.group.share.target import build as build_target
from kbroker.coordinator.runtime import CoordinatorResult, now_ms
from kbroker.protocol.errors import Errors, KafkaError

log = logging.getLogger("kbroker.coordinator.group")


@dataclass
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed: list | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass
class HeartbeatResult:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int = 0
    assignment: dict | None = None                 # {topic id: sorted partitions}, when sent
    initialize: initialize.InitializeRequest | None = field(default=None, repr=False)


def heartbeat(shard, req: HeartbeatRequest) -> CoordinatorResult:
    if req.member_epoch == LEAVE_EPOCH:
        return membership.leave(shard, req.group_id, req.member_id,
                                HeartbeatResult(req.member_id, LEAVE_EPOCH))
    now = now_ms()
    gid = req.group_id
    joining = req.member_epoch == JOIN_EPOCH
    group = _group(shard, gid, joining)
    limit = settings.max_size(shard)
    if len(group.members) >= limit and req.member_id not in group.members:
        raise KafkaError(Errors.GROUP_MAX_SIZE_REACHED,
                         f"The share group has reached its maximum capacity of {limit} members.")
    member = _member(group, req, joining)
    records: list = []
    updated = replace(member, client_id=req.client_id, client_host=req.client_host)
    if req.rack_id is not None:
        updated = replace(updated, rack_id=req.rack_id)
    subscription_changed = False
    if req.subscribed is not None:
        subscribed = tuple(sorted(set(req.subscribed)))
        subscription_changed = subscribed != member.subscribed
        updated = replace(updated, subscribed=subscribed)
    if updated != member or req.member_id not in group.members:
        records.append(rec.member_metadata(gid, updated))
    if subscription_changed:
        log.info("group %s (member %s): subscription changed to %s", gid, req.member_id,
                 list(updated.subscribed))
    members = dict(group.members)
    members[updated.member_id] = updated
    subscribed = set()
    for m in members.values():
        subscribed.update(m.subscribed)
    bump = subscription_changed
    epoch = group.group_epoch
    if group.assignment_epoch >= epoch and initialize.assignment_pending(group, subscribed):
        bump = True
    metadata_hash = shard.metadata_hash(subscribed)
    if metadata_hash != group.metadata_hash:
        log.info("group %s (member %s): computed new metadata hash %d", gid, req.member_id,
                 metadata_hash)
        bump = True
    if bump:
        epoch += 1
        records.append(rec.group_epoch(gid, epoch, metadata_hash))
        log.info("group %s (member %s): bumped the share group epoch to %d", gid,
                 req.member_id, epoch)
    # --- target assignment ---
    target_epoch, target = group.assignment_epoch, group.target
    if epoch > group.assignment_epoch and modern.can_compute_assignment(
            group.assignment_timestamp, settings.assignment_interval_ms(shard, gid), now):
        target_records, target = build_target(shard, group, members, epoch, now)
        records += target_records
        target_epoch = epoch
    # --- reconciliation: straight to the target ---
    mine = {t: frozenset(p) for t, p in target.get(updated.member_id, {}).items() if p}
    if updated.member_epoch != target_epoch or dict(updated.assigned) != mine:
        updated = updated.with_assignment(target_epoch, mine)
        records.append(rec.current_assignment(gid, updated))
    membership.schedule_session(shard, gid, updated.member_id)
    result = HeartbeatResult(updated.member_id, updated.member_epoch,
                             settings.heartbeat_interval_ms(shard, gid))
    if joining or req.subscribed is not None or \
            dict(updated.assigned) != dict(member.assigned):
        result.assignment = {t: sorted(p) for t, p in updated.assigned.items()}
    # --- share partitions to initialize ---
    todo = initialize.to_initialize(shard, group, subscribed, now)
    if todo:
        records.append(initialize.mark_initializing(group, todo))
        result.initialize = initialize.InitializeRequest(
            gid, epoch, {t: e.partitions for t, e in todo.items()})
    return CoordinatorResult(records, result)


def _group(shard, gid: str, joining: bool) -> ShareGroup:
    if not joining:
        return membership.share_group(shard, gid)
    group = shard.group_of_type(gid, "share")
    return group if group is not None else ShareGroup(gid)


def _member(group: ShareGroup, req: HeartbeatRequest, joining: bool) -> ShareGroupMember:
    member = group.members.get(req.member_id)
    if member is None:
        if not joining:
            raise KafkaError(Errors.UNKNOWN_MEMBER_ID,
                             f"Member {req.member_id} is not a member of group "
                             f"{group.group_id}.")
        log.info("group %s (member %s): member joins the share group", group.group_id,
                 req.member_id)
        return ShareGroupMember(req.member_id)
    if joining:
        return member
    received = req.member_epoch
    if received > member.member_epoch:
        raise KafkaError(Errors.FENCED_MEMBER_EPOCH,
                         f"The share group member has a greater member epoch ({received}) than "
                         f"the one known by the group coordinator ({member.member_epoch}). The "
                         f"member must abandon all its partitions and rejoin.")
    if received < member.member_epoch and received != member.previous_member_epoch:
        raise KafkaError(Errors.FENCED_MEMBER_EPOCH,
                         f"The share group member has a smaller member epoch ({received}) than "
                         f"the one known by the group coordinator ({member.member_epoch}), and "
                         f"it does not match the previous member epoch "
                         f"({member.previous_member_epoch}). The member must abandon all its "
                         f"partitions and rejoin.")
    return member
