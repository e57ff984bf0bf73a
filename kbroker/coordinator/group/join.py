"""JoinGroup: new, pending, known and static members (Kafka's ``classicGroupJoin``).

An operation on the shard: returns a CoordinatorResult whose response is a :class:`JoinResult`
(errors, MEMBER_ID_REQUIRED, a member rejoining a stable group unchanged) or a future of one,
resolved when the join phase completes (shard.complete_join). A new group is first written as an
Empty GroupMetadata record (Kafka persists a group before answering its first member); the join
goes on as a follow-up operation once that record is committed.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass

from kbroker.coordinator.group.parked import JoinResult, SyncResult
from kbroker.coordinator.group.shard import GroupShard
from kbroker.coordinator.group.state import ClassicGroup, GroupState, Member
from kbroker.coordinator.runtime import CoordinatorResult, respond
from kbroker.protocol.errors import Errors, KafkaError

log = logging.getLogger("kbroker.coordinator.group")
S = GroupState


@dataclass
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: list  # [(name, metadata bytes)]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str
    client_host: str
    version: int
    reason: str | None = None


def join(shard: GroupShard, req: JoinRequest) -> CoordinatorResult:
    config = shard.config
    if not req.group_id:
        return respond(JoinResult(Errors.INVALID_GROUP_ID, req.member_id))
    if not (config.get("group.min.session.timeout.ms") <= req.session_timeout_ms
            <= config.get("group.max.session.timeout.ms")):
        return respond(JoinResult(Errors.INVALID_SESSION_TIMEOUT, req.member_id))
    existing = shard.find_group(req.group_id)
    if existing is not None and existing.group_type == "share":
        # Kafka: a share group never becomes a classic group.
        log.info("JoinGroup of member %r to share group %s: INCONSISTENT_GROUP_PROTOCOL",
                 req.member_id, req.group_id)
        return respond(JoinResult(Errors.INCONSISTENT_GROUP_PROTOCOL, req.member_id))
    if existing is not None and existing.group_type == "streams" and not existing.is_empty:
        # Kafka: a classic member cannot join a streams group that has members.
        log.info("JoinGroup of member %r to streams group %s: INCONSISTENT_GROUP_PROTOCOL",
                 req.member_id, req.group_id)
        return respond(JoinResult(Errors.INCONSISTENT_GROUP_PROTOCOL, req.member_id))
    if existing is not None and existing.group_type == "consumer" and not existing.is_empty:
        # A classic member joining a consumer group (online migration, KIP-848).
        from kbroker.coordinator.group.consumer import classic_members
        try:
            return classic_members.join(shard, existing, req)
        except KafkaError as exc:
            log.info("JoinGroup of member %r to consumer group %s: %s (%s)", req.member_id,
                     req.group_id, exc.error.name, exc.message)
            return respond(JoinResult(exc.error, req.member_id))
    if existing is None or existing.group_type != ClassicGroup.group_type:
        if req.member_id:
            return respond(JoinResult(Errors.UNKNOWN_MEMBER_ID, req.member_id))
        group_id = req.group_id
        # An empty consumer or streams group of that id is deleted (its offsets stay) for the
        # classic one.
        tombstones = existing.tombstones() if existing is not None else []
        return CoordinatorResult(
            tombstones + [shard.group_record(ClassicGroup(group_id))],
            on_committed=lambda: shard.add_group(group_id),
            then=lambda s: _join(s, s.groups[group_id], req),
            on_failed=lambda exc: JoinResult(exc.error, req.member_id))
    return _join(shard, existing, req)


def _join(shard: GroupShard, group: ClassicGroup, req: JoinRequest) -> CoordinatorResult:
    if not _accepts_joining_member(shard, group, req.member_id):
        log.info("group %s is full (group.max.size %d); member %r refused", req.group_id,
                 shard.config.get("group.max.size"), req.member_id)
        return respond(JoinResult(Errors.GROUP_MAX_SIZE_REACHED, req.member_id))
    if not req.member_id:
        result = _join_new_member(shard, group, req)
    else:
        result = _join_known_member(shard, group, req)
    return result if isinstance(result, CoordinatorResult) else respond(result)


def _accepts_joining_member(shard, group: ClassicGroup, member_id: str) -> bool:
    max_size = shard.config.get("group.max.size")
    member = group.members.get(member_id)
    if group.is_in(S.EMPTY, S.DEAD):
        return True
    if group.is_in(S.PREPARING_REBALANCE):
        awaiting = sum(1 for m in group.members.values() if m.awaiting_join)
        return (member is not None and member.awaiting_join) or awaiting < max_size
    return member is not None or len(group.members) < max_size


def _join_new_member(shard: GroupShard, group: ClassicGroup, req: JoinRequest):
    if not group.supports_protocols(req.protocol_type, req.protocols):
        return JoinResult(Errors.INCONSISTENT_GROUP_PROTOCOL, req.member_id)
    new_id = f"{req.client_id}-{uuid.uuid4()}"
    if req.group_instance_id is not None:
        existing = group.static_member_id(req.group_instance_id)
        if existing is not None:
            return _replace_static_member(shard, group, existing, new_id, req)
        return _add_member_and_rebalance(shard, group, new_id, req)
    if req.version >= 4:
        # KIP-394: hand out the id first; the member joins for real with it.
        group.pending_members.add(new_id)
        shard.schedule_pending_expiry(group, new_id, req.session_timeout_ms)
        return JoinResult(Errors.MEMBER_ID_REQUIRED, new_id)
    return _add_member_and_rebalance(shard, group, new_id, req)


def _join_known_member(shard: GroupShard, group: ClassicGroup, req: JoinRequest):
    member_id = req.member_id
    if req.group_instance_id is not None:
        existing = group.static_member_id(req.group_instance_id)
        if existing is None:
            return JoinResult(Errors.UNKNOWN_MEMBER_ID, member_id)
        if existing != member_id:
            log.info("fenced static member %s (instance %s) of group %s: the instance is now %s",
                     member_id, req.group_instance_id, group.group_id, existing)
            return JoinResult(Errors.FENCED_INSTANCE_ID, member_id)
    if member_id in group.pending_members:
        if not group.supports_protocols(req.protocol_type, req.protocols):
            return JoinResult(Errors.INCONSISTENT_GROUP_PROTOCOL, member_id)
        return _add_member_and_rebalance(shard, group, member_id, req)
    member = group.members.get(member_id)
    if member is None:
        return JoinResult(Errors.UNKNOWN_MEMBER_ID, member_id)
    if not group.supports_protocols(req.protocol_type, req.protocols):
        return JoinResult(Errors.INCONSISTENT_GROUP_PROTOCOL, member_id)
    if group.is_in(S.PREPARING_REBALANCE):
        return _update_member_and_rebalance(shard, group, member, req)
    if group.is_in(S.COMPLETING_REBALANCE):
        if member.same_protocols(req.protocols):
            # A retried JoinGroup whose response got lost: answer it again.
            return _current_join_result(group, member)
        return _update_member_and_rebalance(shard, group, member, req)
    if group.is_in(S.STABLE):
        if member_id == group.leader_id or not member.same_protocols(req.protocols):
            return _update_member_and_rebalance(shard, group, member, req, req.reason)
        shard.schedule_session_expiry(group, member)
        return _current_join_result(group, member)
    return JoinResult(Errors.UNKNOWN_MEMBER_ID, member_id)


def _current_join_result(group: ClassicGroup, member: Member) -> JoinResult:
    members = []
    if member.member_id == group.leader_id:
        members = [(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                   for m in group.members.values()]
    return JoinResult(Errors.NONE, member.member_id, group.generation, group.protocol_type,
                      group.protocol_name, group.leader_id or "", False, members)


def _park(member: Member, req: JoinRequest) -> asyncio.Future:
    future = asyncio.get_running_loop().create_future()
    member.join_future = future
    member.join_version = req.version
    return future


def _add_member_and_rebalance(shard: GroupShard, group: ClassicGroup, member_id: str,
                              req: JoinRequest):
    member = Member(member_id, req.group_instance_id, req.client_id, req.client_host,
                    req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type,
                    list(req.protocols), is_new=True)
    future = _park(member, req)
    group.add(member)
    group.new_member_added = True
    shard.schedule_session_expiry(group, member)
    records = _rebalance_or_complete(shard, group, f"adding new member {member_id} with group "
                                                   f"instance id {req.group_instance_id}; client "
                                                   f"reason: {req.reason}")
    return CoordinatorResult(records, future)


def _update_member_and_rebalance(shard: GroupShard, group: ClassicGroup, member: Member,
                                 req: JoinRequest, reason: str | None = None):
    _update_member(member, req)
    future = _park(member, req)
    shard.schedule_session_expiry(group, member)
    records = _rebalance_or_complete(shard, group, f"updating metadata of member "
                                                   f"{member.member_id}; client reason: "
                                                   f"{reason or req.reason}")
    return CoordinatorResult(records, future)


def _update_member(member: Member, req: JoinRequest) -> None:
    member.protocols = list(req.protocols)
    member.rebalance_timeout_ms = req.rebalance_timeout_ms
    member.session_timeout_ms = req.session_timeout_ms
    member.client_id = req.client_id
    member.client_host = req.client_host


def _rebalance_or_complete(shard: GroupShard, group: ClassicGroup, reason: str) -> list:
    if group.is_in(S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY):
        return shard.prepare_rebalance(group, reason)
    if group.is_in(S.PREPARING_REBALANCE):
        return shard.maybe_complete_join(group)
    return []


def _replace_static_member(shard: GroupShard, group: ClassicGroup, old_id: str, new_id: str,
                           req: JoinRequest):
    """A static member rejoined with a new member id: the old id is fenced. In a stable group
    with unchanged protocols it gets its old assignment back without a rebalance (KIP-345)."""
    member = group.members[old_id]
    old_protocols = list(member.protocols)
    if member.join_future is not None and not member.join_future.done():
        member.join_future.set_result(JoinResult(Errors.FENCED_INSTANCE_ID, old_id))
    member.join_future = None
    if member.sync_future is not None and not member.sync_future.done():
        member.sync_future.set_result(SyncResult(Errors.FENCED_INSTANCE_ID))
    member.sync_future = None
    shard.cancel(("session", group.group_id, old_id))
    group.replace_static_member(req.group_instance_id, old_id, new_id)
    _update_member(member, req)
    shard.schedule_session_expiry(group, member)
    log.info("static member %s of group %s rejoined as %s", req.group_instance_id,
             group.group_id, new_id)
    if group.is_in(S.STABLE):
        selected = group.protocol_name
        if member.metadata(selected) == dict(old_protocols).get(selected) and \
                selected in member.protocol_names():
            def revert(exc: KafkaError) -> JoinResult:
                # Kafka's reaction to the failed write: the old member id stands.
                group.replace_static_member(req.group_instance_id, new_id, old_id)
                member.protocols = old_protocols
                return JoinResult(exc.error, "")

            result = _current_join_result(group, member)
            result.skip_assignment = member.member_id == group.leader_id and req.version >= 9
            return CoordinatorResult([shard.group_record(group)], result, on_failed=revert)
        future = _park(member, req)
        records = shard.prepare_rebalance(group, f"static member {req.group_instance_id} "
                                                 f"rejoined with different protocols")
        return CoordinatorResult(records, future)
    future = _park(member, req)
    records = _rebalance_or_complete(shard, group,
                                     f"static member {req.group_instance_id} rejoined")
    return CoordinatorResult(records, future)
