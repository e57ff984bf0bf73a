"""Online migration between the classic and the consumer protocol
(``group.consumer.migration.policy``: bidirectional, upgrade, downgrade or disabled).

Upgrade: the first consumer-protocol member (ConsumerGroupHeartbeat, epoch 0) of a non-empty
classic group that uses the consumer embedded protocol turns it into a consumer group, in the same
batch: the classic group's tombstone, then the consumer group written whole (Kafka's
ConsumerGroup.fromClassicGroup): group and assignment epoch = the classic generation, every member
Stable at that epoch with the partitions of its last classic assignment, and its classic session
timeout and protocols kept. Classic members parked in JoinGroup/SyncGroup are told
REBALANCE_IN_PROGRESS and rejoin - into the consumer group.

Classic members inside a consumer group (a rolling upgrade in progress): JoinGroup makes or
updates the member like a heartbeat would (its subscription decoded from its protocol metadata)
and answers at once with its epoch as the generation, never as leader; SyncGroup hands it its
assignment in its own ConsumerProtocol version; Heartbeat answers REBALANCE_IN_PROGRESS when it
has something to revoke, a new epoch to reach, or partitions that became free; LeaveGroup fences.

Downgrade: when the last consumer-protocol member leaves and only classic members remain, the
group becomes a classic group again (Stable at generation = group epoch, each member's target
assignment as its classic assignment), then rebalances.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from kbroker.coordinator.group import records as classic_records
from kbroker.coordinator.group.consumer import membership
from kbroker.coordinator.group.consumer import records as rec
from kbroker.coordinator.group.consumer import settings
from kbroker.coordinator.group.consumer.group import ConsumerGroup
from kbroker.coordinator.group.consumer.member import (ClassicMetadata, ConsumerGroupMember,
                                                       MemberState, with_epoch, without_epochs)
from kbroker.coordinator.group.state import ClassicGroup, GroupState, Member
from kbroker.coordinator.runtime import CoordinatorResult, now_ms
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.protocol.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from kbroker.protocol.messages.consumer_protocol_subscription import \
    ConsumerProtocolSubscription

log = logging.getLogger("kbroker.coordinator.group")
CONSUMER = "consumer"
MAX_PROTOCOL_VERSION = 3


def classic_tombstone(group_id: str) -> tuple[bytes, None]:
    return classic_records.group_metadata_key(group_id), None


# --- the embedded consumer protocol --------------------------------------------------------------

def _version(data: bytes) -> int:
    if len(data) < 2:
        raise ValueError("no version")
    return int.from_bytes(data[:2], "big", signed=True)


def decode_subscription(data: bytes) -> ConsumerProtocolSubscription:
    version = _version(data)
    return ConsumerProtocolSubscription.decode(memoryview(data)[2:],
                                               max(0, min(version, MAX_PROTOCOL_VERSION)))


def decode_assignment(data: bytes) -> ConsumerProtocolAssignment:
    version = _version(data)
    return ConsumerProtocolAssignment.decode(memoryview(data)[2:],
                                             max(0, min(version, MAX_PROTOCOL_VERSION)))


def encode_assignment(partitions: dict, image, version: int) -> bytes:
    """{topic id: partitions} as ConsumerProtocolAssignment bytes of ``version``."""
    version = max(0, min(version, MAX_PROTOCOL_VERSION))
    topics = []
    for topic_id in sorted(partitions, key=lambda t: t.bytes):
        topic = image.topic_by_id(topic_id)
        if topic is not None and partitions[topic_id]:
            topics.append(ConsumerProtocolAssignment.TopicPartition(
                topic=topic.name, partitions=sorted(partitions[topic_id])))
    body = ConsumerProtocolAssignment(assigned_partitions=topics, user_data=None)
    return version.to_bytes(2, "big") + body.to_bytes(version)


def _by_topic_id(topic_partitions, image) -> dict:
    out = {}
    for tp in topic_partitions:
        topic = image.topic(tp.topic)
        if topic is not None and tp.partitions:
            out.setdefault(topic.topic_id, set()).update(tp.partitions)
    return {t: frozenset(p) for t, p in out.items()}


# --- upgrade -------------------------------------------------------------------------------------

def upgrade(shard, classic: ClassicGroup, records: list, committed: list) -> ConsumerGroup:
    """Convert a non-empty classic group for its first consumer-protocol member; raises
    GROUP_ID_NOT_FOUND (Kafka's messages) when it may not."""
    gid = classic.group_id
    if not settings.upgrade_enabled(shard):
        log.info("cannot upgrade classic group %s to a consumer group: online upgrade is "
                 "disabled", gid)
        raise KafkaError(Errors.GROUP_ID_NOT_FOUND,
                         f"Cannot upgrade classic group {gid} to consumer group because online "
                         f"upgrade is disabled.")
    if classic.protocol_type != CONSUMER:
        raise KafkaError(Errors.GROUP_ID_NOT_FOUND,
                         f"Cannot upgrade classic group {gid} to consumer group because the group "
                         f"does not use the consumer embedded protocol.")
    if len(classic.members) > shard.config.get("group.consumer.max.size"):
        raise KafkaError(Errors.GROUP_ID_NOT_FOUND,
                         f"Cannot upgrade classic group {gid} to consumer group because the group "
                         f"size exceeds the consumer group maximum size.")
    group = from_classic(shard, classic)
    records.append(classic_tombstone(gid))
    records += rec.group_records(group)
    # The classic members waiting in JoinGroup/SyncGroup rejoin the consumer group.
    from kbroker.coordinator.group.shard import JoinResult, SyncResult, _answer_join, \
        _answer_sync
    for member in classic.members.values():
        _answer_join(member, JoinResult(Errors.REBALANCE_IN_PROGRESS, member.member_id))
        _answer_sync(member, SyncResult(Errors.REBALANCE_IN_PROGRESS))

    def converted():
        shard.forget_classic_group(gid)
        for m in group.members.values():
            membership.schedule_session(shard, gid, m.member_id, m.classic.session_timeout_ms)
    committed.append(converted)
    log.info("group %s: converted the classic group (generation %d, %d member(s)) to a consumer "
             "group", gid, classic.generation, len(classic.members))
    return group


def from_classic(shard, classic: ClassicGroup) -> ConsumerGroup:
    image = shard.image
    gid = classic.group_id
    group = ConsumerGroup(gid)
    group.group_epoch = classic.generation
    group.assignment_epoch, group.assignment_timestamp = classic.generation, 0
    for m in classic.members.values():
        try:
            subscription = decode_subscription(m.metadata(classic.protocol_name))
            assigned: dict = {}
            if m.assignment:
                assignment = decode_assignment(m.assignment)
                if assignment.user_data:
                    raise KafkaError(Errors.GROUP_ID_NOT_FOUND,
                                     f"Cannot upgrade classic group {gid} to consumer group "
                                     f"because an unsupported custom assignor is in use. Please "
                                     f"refer to the documentation or switch to a default "
                                     f"assignor before re-attempting the upgrade.")
                assigned = _by_topic_id(assignment.assigned_partitions, image)
        except KafkaError:
            raise
        except Exception as exc:
            log.warning("cannot upgrade classic group %s: malformed consumer protocol: %s", gid,
                        exc)
            raise KafkaError(Errors.GROUP_ID_NOT_FOUND,
                             f"Cannot upgrade classic group {gid} to consumer group because the "
                             f"embedded consumer protocol is malformed.") from None
        member = ConsumerGroupMember(
            m.member_id, member_epoch=classic.generation,
            previous_member_epoch=classic.generation, state=MemberState.STABLE,
            instance_id=m.group_instance_id, rack_id=subscription.rack_id,
            rebalance_timeout_ms=m.rebalance_timeout_ms, client_id=m.client_id,
            client_host=m.client_host, subscribed_topic_names=frozenset(subscription.topics),
            assigned=with_epoch(assigned, classic.generation),
            classic=ClassicMetadata(m.session_timeout_ms,
                                    tuple((n, bytes(md)) for n, md in m.protocols)))
        group.update_target(m.member_id, assigned)
        group.update_member(member)
    group.metadata_hash = shard.metadata_hash(group.subscribed)
    return group


# --- classic members inside a consumer group ----------------------------------------------------

def join(shard, group: ConsumerGroup, req):
    """JoinGroup (kbroker.coordinator.group.join.JoinRequest) to a non-empty consumer group."""
    from kbroker.coordinator.group.consumer import heartbeat as hb
    from kbroker.coordinator.group.shard import JoinResult
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
    from kbroker.coordinator.group.consumer import subscription as subs
    change = subs.update(shard, group, member, updated, now, records, is_new)
    owned = [(t, sorted(p)) for t, p in _by_topic_id(subscription.owned_partitions or [],
                                                     shard.image).items()]
    replaced = group.static_member(updated.instance_id)
    if replaced is not None and replaced.member_id != updated.member_id and \
            can_downgrade_replacing(shard, group, replaced):
        if group.assignment_epoch >= change.epoch:
            updated = hb.maybe_reconcile(shard, group, updated, group.assignment_epoch,
                                         hb.target_for(group, updated), change.resolved,
                                         change.bump, owned, records)
            rebalance = False
        else:
            rebalance = True
        result = downgrade(shard, group, [], updated, None, f"Downgrade group {gid} from "
                           f"consumer to classic with stale assignment." if rebalance else None,
                           records, rebalance)
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
        if gid in shard.consumer_groups:
            membership.schedule_session(shard, gid, mid, session_ms)
            membership.schedule_sync(shard, gid, mid, rebalance_ms)
    return CoordinatorResult(records, response, on_committed=joined)


def _classic_member(group: ConsumerGroup, member_id: str, instance_id: str | None):
    if instance_id is None:
        member = membership.member_of(group, member_id)
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
    from kbroker.coordinator.group.shard import SyncResult
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
    version = _version(member.classic.protocols[0][1])
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
                member = membership.member_of(group, member_id)
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


# --- downgrade -----------------------------------------------------------------------------------

def can_downgrade(shard, group: ConsumerGroup, leaving) -> bool:
    if not group.all_classic_except(leaving):
        return False
    if len(group.members) - len(leaving) <= 0:
        return False
    if not settings.downgrade_enabled(shard):
        log.info("cannot downgrade consumer group %s to a classic group: online downgrade is "
                 "disabled", group.group_id)
        return False
    if len(group.members) - len(leaving) > shard.config.get("group.max.size"):
        log.info("cannot downgrade consumer group %s: it is larger than group.max.size",
                 group.group_id)
        return False
    return True


def can_downgrade_replacing(shard, group: ConsumerGroup, replaced) -> bool:
    if not (group.classic_members == len(group.members) - 1 and not
            replaced.uses_classic_protocol):
        return False
    return settings.downgrade_enabled(shard) and len(group.members) <= \
        shard.config.get("group.max.size")


def downgrade(shard, group: ConsumerGroup, leaving, joining, response, reason,
              records: list | None = None, rebalance: bool = True) -> CoordinatorResult:
    """The consumer group's tombstones and its classic group, installed once committed."""
    records = [] if records is None else records
    gid = group.group_id
    replaced = group.static_member(joining.instance_id) if joining is not None else None
    records += rec.group_tombstones(group, (replaced.member_id, joining.member_id)
                                    if replaced is not None else None)
    image = shard.image
    classic = ClassicGroup(gid, state=GroupState.STABLE, protocol_type=CONSUMER,
                           generation=group.group_epoch, state_timestamp=now_ms())
    leaving_ids = {m.member_id for m in leaving}
    members = [m for m in group.members.values() if m.member_id not in leaving_ids and not (
        replaced is not None and m.member_id == replaced.member_id)]
    if joining is not None:
        members.append(joining)
    for m in members:
        classic.add(Member(m.member_id, m.instance_id, m.client_id, m.client_host,
                           m.rebalance_timeout_ms, m.classic.session_timeout_ms, CONSUMER,
                           list(m.classic.protocols)))
    classic.protocol_name = classic.select_protocol()
    for member in classic.members.values():
        source = replaced.member_id if replaced is not None and joining is not None and \
            member.member_id == joining.member_id else member.member_id
        member.assignment = encode_assignment(group.target_of(source), image,
                                              _version(member.metadata(classic.protocol_name)))
    records.append(shard.group_record(classic))
    for m in group.members.values():
        membership.cancel_timers(shard, gid, m.member_id)

    def converted():
        shard.groups[gid] = classic
        for member in classic.members.values():
            shard.schedule_session_expiry(classic, member)
        if rebalance:
            extra = shard.prepare_rebalance(classic, reason or "downgrade")
            if extra:
                shard.runtime.run(shard.partition_index, lambda s: CoordinatorResult(extra))
        log.info("group %s: converted the consumer group to a classic group", gid)
    return CoordinatorResult(records, response, on_committed=converted)


def _kafka_uuid() -> str:
    import base64
    import uuid
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
