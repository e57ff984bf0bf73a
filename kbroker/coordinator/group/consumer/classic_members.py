"""Classic members inside a consumer group (a rolling upgrade in progress, KIP-848's online
migration): JoinGroup makes or updates the member like a heartbeat would (its subscription decoded
from its protocol metadata) and answers at once with its epoch as the generation, never as leader;
SyncGroup hands it its assignment in its own ConsumerProtocol version; Heartbeat answers
REBALANCE_IN_PROGRESS when it has something to revoke, a new epoch to reach, or partitions that
became free; LeaveGroup fences (and may downgrade the group: :func:`membership.fence`).

The classic group protocol's modules (``group/join.py``, ``sync.py``, ``heartbeat.py``,
``leave.py``) hand a request here when its group id names a consumer group.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from kbroker.coordinator.group.consumer import heartbeat as hb
from kbroker.coordinator.group.consumer import membership
from kbroker.coordinator.group.consumer import records as rec
from kbroker.coordinator.group.consumer import settings
from kbroker.coordinator.group.consumer import subscription as subs
from kbroker.coordinator.group.consumer.classic_protocol import (CONSUMER, by_topic_id,
                                                                 decode_subscription,
                                                                 encode_assignment,
                                                                 protocol_version)
from kbroker.coordinator.group.consumer.group import ConsumerGroup
from kbroker.coordinator.group.consumer.member import (ClassicMetadata, ConsumerGroupMember,
                                                       MemberState, without_epochs)
from kbroker.coordinator.group.parked import JoinResult, SyncResult
from kbroker.coordinator.runtime import CoordinatorResult, now_ms
from kbroker.protocol.errors import Errors, KafkaError

log = logging.getLogger("kbroker.coordinator.group")


def join(shard, group: ConsumerGroup, req):
    """JoinGroup (kbroker.coordinator.group.join.JoinRequest) to a non-empty consumer group."""
    gid = group.group_id
    if settings.migration_policy(shard) == "disabled":
        log.info("cannot join consumer group %s with the classic protocol: migration is "
                 "disabled", gid)
        raise KafkaError(Errors.INCONSISTENT_GROUP_PROTOCOL,
                         f"Cannot join the consumer group {gid} with the classic protocol "
                         f"because the group migration is disabled.")
    unknown = not req.member_id
    member_id = req.member_id or _kafka_uuid()
    hb.throw_if_full(shard, group, member_id, req.group_instance_id)
    if not group.supports_classic_protocols(req.protocol_type, {n for n, _ in req.protocols}):
        raise KafkaError(Errors.INCONSISTENT_GROUP_PROTOCOL,
                         f"Member {member_id}'s protocols are not supported.")
    if unknown and req.group_instance_id is None and req.version >= 4:
        log.info("group %s: dynamic member with unknown member id joins the consumer group; "
                 "asking it to rejoin as %s", gid, member_id)
        return CoordinatorResult([], JoinResult(Errors.MEMBER_ID_REQUIRED, member_id))
    records: list = []
    if req.group_instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            log.info("group %s: member %s joins the consumer group using the classic protocol",
                     gid, member_id)
            member = ConsumerGroupMember(member_id)
    else:
        existing = group.static_member(req.group_instance_id)
        if unknown or existing is None:
            if existing is None:
                member = group.members.get(member_id) or ConsumerGroupMember(member_id)
            else:
                member = replace(existing, member_id=member_id, member_epoch=0,
                                 previous_member_epoch=0)
                hb.replace_member(group, existing, member, records)
        else:
            member = membership.static_member_of(group, req.group_instance_id, member_id)
    try:
        subscription = decode_subscription(req.protocols[0][1])
    except Exception:
        raise KafkaError(Errors.INCONSISTENT_GROUP_PROTOCOL,
                         f"Member {member_id}'s consumer protocol subscription is malformed.") \
            from None
    now = now_ms()
    updated = replace(
        member, instance_id=req.group_instance_id or member.instance_id,
        rack_id=subscription.rack_id if subscription.rack_id is not None else member.rack_id,
        rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
        else member.rebalance_timeout_ms,
        subscribed_topic_names=frozenset(subscription.topics), subscribed_topic_regex="",
        client_id=req.client_id, client_host=req.client_host,
        classic=ClassicMetadata(req.session_timeout_ms,
                                tuple((n, bytes(md)) for n, md in req.protocols)))
    is_new = updated.member_id not in group.members and \
        group.static_member(updated.instance_id) is None
    if updated != member:
        records.append(rec.member_subscription(gid, updated))
    change = subs.update(shard, group, member, updated, now, records, is_new)
    owned = [(t, sorted(p)) for t, p in by_topic_id(subscription.owned_partitions or [],
                                                     shard.image).items()]
    replaced = group.static_member(updated.instance_id)
    if replaced is not None and replaced.member_id != updated.member_id and \
            membership.can_downgrade_replacing(shard, group, replaced):
        if group.assignment_epoch >= change.epoch:
            updated = hb.maybe_reconcile(shard, group, updated, group.assignment_epoch,
                                         hb.target_for(group, updated), change.resolved,
                                         change.bump, owned, records)
            rebalance = False
        else:
            rebalance = True
        reason = f"Downgrade group {gid} from consumer to classic with stale assignment." \
            if rebalance else None
        result = membership.downgrade(shard, group, [], updated, None, reason, records, rebalance)
        result.response = JoinResult(Errors.NONE, updated.member_id, updated.member_epoch,
                                     CONSUMER, updated.classic.protocols[0][0], "", False, [])
        return result
    target_epoch, member_target = hb.update_target(shard, group, change, member, updated, now,
                                                   records)
    updated = hb.maybe_reconcile(shard, group, updated, target_epoch, member_target,
                                 change.resolved, change.bump, owned, records)
    response = JoinResult(Errors.NONE, updated.member_id, updated.member_epoch, CONSUMER,
                          updated.classic.protocols[0][0], "", False, [])
    session_ms, rebalance_ms = req.session_timeout_ms, req.rebalance_timeout_ms
    mid = updated.member_id

    def joined():
        shard.cancel((membership.JOIN, gid, mid))
        if shard.find_group(gid, "consumer") is not None:
            membership.schedule_session(shard, gid, mid, session_ms)
            membership.schedule_sync(shard, gid, mid, rebalance_ms)
    return CoordinatorResult(records, response, on_committed=joined)


def _classic_member(group: ConsumerGroup, member_id: str, instance_id: str | None):
    if instance_id is None:
        member = group.member(member_id)
    else:
        member = group.static_member(instance_id)
        if member is None:
            raise KafkaError(Errors.UNKNOWN_MEMBER_ID,
                             f"Member with instance id {instance_id} is not a member of group "
                             f"{group.group_id}.")
        membership.static_member_of(group, instance_id, member_id)
    if not member.uses_classic_protocol:
        raise KafkaError(Errors.UNKNOWN_MEMBER_ID,
                         f"Member {member.member_id} does not use the classic protocol.")
    return member


def _check_generation(member, generation: int) -> None:
    if member.member_epoch != generation:
        raise KafkaError(Errors.ILLEGAL_GENERATION,
                         f"The request generation id {generation} is not equal to the member "
                         f"epoch {member.member_epoch} of member {member.member_id}.")


def sync(shard, group: ConsumerGroup, member_id: str, instance_id, generation: int,
         protocol_type, protocol_name):
    """SyncGroup of a classic member: its current assignment in its ConsumerProtocol version."""
    member = _classic_member(group, member_id, instance_id)
    _check_generation(member, generation)
    name = member.classic.protocols[0][0]
    if protocol_type is not None and protocol_type != CONSUMER:
        raise KafkaError(Errors.INCONSISTENT_GROUP_PROTOCOL,
                         f"The protocol type {protocol_type} from member {member_id} request is "
                         f"not equal to the group protocol type {CONSUMER}.")
    if protocol_name is not None and protocol_name != name:
        raise KafkaError(Errors.INCONSISTENT_GROUP_PROTOCOL,
                         f"The protocol name {protocol_name} from member {member_id} request is "
                         f"not equal to the protocol name {name} returned in the join response.")
    _throw_if_rebalancing(shard, group, member)
    version = protocol_version(member.classic.protocols[0][1])
    assignment = encode_assignment(without_epochs(member.assigned), shard.image, version)
    gid, mid = group.group_id, member.member_id
    session = member.classic.session_timeout_ms

    def synced():
        shard.cancel((membership.SYNC, gid, mid))
        membership.schedule_session(shard, gid, mid, session)
    return CoordinatorResult([], SyncResult(Errors.NONE, assignment, protocol_type or CONSUMER,
                                            protocol_name or name), on_committed=synced)


def _throw_if_rebalancing(shard, group: ConsumerGroup, member) -> None:
    if group.assignment_epoch > member.member_epoch and \
            member.state is not MemberState.UNREVOKED_PARTITIONS:
        membership.schedule_join_if_absent(shard, group.group_id, member.member_id,
                                           member.rebalance_timeout_ms)
        raise KafkaError(Errors.REBALANCE_IN_PROGRESS,
                         f"A new rebalance is triggered in group {group.group_id} and member "
                         f"{member.member_id} should rejoin to catch up.")


def heartbeat(shard, group: ConsumerGroup, member_id: str, instance_id, generation: int) -> Errors:
    member = _classic_member(group, member_id, instance_id)
    _check_generation(member, generation)
    membership.schedule_session(shard, group.group_id, member.member_id,
                                member.classic.session_timeout_ms)
    if (member.member_epoch < group.assignment_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (member.state is MemberState.UNRELEASED_PARTITIONS
                and not group.waiting_on_unreleased(member))):
        membership.schedule_join_if_absent(shard, group.group_id, member.member_id,
                                           member.rebalance_timeout_ms)
        return Errors.REBALANCE_IN_PROGRESS
    return Errors.NONE


def leave(shard, group: ConsumerGroup, identities: list) -> CoordinatorResult:
    """LeaveGroup of classic members: ``identities`` [(member id, instance id, reason)]; the
    response is (top error, per-identity errors)."""
    errors, leaving = [], []
    for member_id, instance_id, reason in identities:
        try:
            if instance_id is None:
                member = group.member(member_id)
            else:
                member = group.static_member(instance_id)
                if member is None:
                    raise KafkaError(Errors.UNKNOWN_MEMBER_ID,
                                     f"Instance id {instance_id} is unknown.")
                if member_id:
                    membership.static_member_of(group, instance_id, member_id)
            log.info("group %s: member %s (instance %s) left through LeaveGroup; reason: %s",
                     group.group_id, member.member_id, instance_id, reason or "not provided")
            if member not in leaving:
                leaving.append(member)
            errors.append(Errors.NONE)
        except KafkaError as exc:
            errors.append(exc.error)
    return membership.fence(shard, group, leaving, (Errors.NONE, errors))


def _kafka_uuid() -> str:
    import base64
    import uuid
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
