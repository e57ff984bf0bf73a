"""Members leaving a consumer group: a leave heartbeat (epoch -1, or -2 for a static member's
temporary leave), fencing (session or rebalance timeout), and the timers that fence.

Removing members writes their tombstones (current assignment, target, subscription), the
tombstones of regexes nobody subscribes to any more, and a new group epoch: the remaining members
get a new target assignment at their next heartbeat. When only classic-protocol members remain and
the migration policy allows it, the group goes back to the classic protocol instead
(:func:`downgrade`: Stable at generation = group epoch, each member's target assignment as its
classic assignment, then a rebalance).

Timers live in the runtime, keyed per shard, and die with it: ``("consumer-session", group,
member)``, ``("consumer-rebalance", group, member)`` (a member that does not revoke within its
rebalance timeout), and for classic-protocol members ``("consumer-join", ...)`` /
``("consumer-sync", ...)``.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from kbroker.coordinator.group import modern
from kbroker.coordinator.group.consumer import records as rec
from kbroker.coordinator.group.consumer import settings
from kbroker.coordinator.group.consumer.classic_protocol import (CONSUMER, encode_assignment,
                                                                 protocol_version)
from kbroker.coordinator.group.consumer.group import ConsumerGroup
from kbroker.coordinator.group.consumer.member import (EMPTY, STATIC_LEAVE_EPOCH, freeze)
from kbroker.coordinator.group.state import ClassicGroup, GroupState, Member
from kbroker.coordinator.runtime import CoordinatorResult, now_ms
from kbroker.protocol.errors import Errors, KafkaError

log = logging.getLogger("kbroker.coordinator.group")

SESSION, REBALANCE, JOIN, SYNC = ("consumer-session", "consumer-rebalance", "consumer-join",
                                  "consumer-sync")


def consumer_group(shard, group_id: str) -> ConsumerGroup:
    group = shard.find_group(group_id, "consumer")
    if group is None:
        raise KafkaError(Errors.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
    return group


def static_member_of(group: ConsumerGroup, instance_id: str, member_id: str):
    member = group.static_member(instance_id)
    if member is None:
        raise KafkaError(Errors.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
    if member.member_id != member_id:
        log.info("group %s: static member %s with instance id %s is fenced by existing member "
                 "%s", group.group_id, member_id, instance_id, member.member_id)
        raise KafkaError(Errors.FENCED_INSTANCE_ID,
                         f"Static member {member_id} with instance id {instance_id} was fenced "
                         f"by member {member.member_id}.")
    return member


# --- leaving -------------------------------------------------------------------------------------

def leave(shard, group_id: str, member_id: str, instance_id: str | None, epoch: int, response):
    group = consumer_group(shard, group_id)
    if instance_id is None:
        member = group.member(member_id)
        log.info("group %s: member %s left the consumer group", group_id, member_id)
        return fence(shard, group, [member], response)
    member = static_member_of(group, instance_id, member_id)
    if epoch == STATIC_LEAVE_EPOCH:
        log.info("group %s: static member %s with instance id %s temporarily left the consumer "
                 "group", group_id, member_id, instance_id)
        # It keeps its partitions (at assignment epoch 0: commits of the old instance are
        # fenced) until it rejoins or its session expires.
        leaving = replace(member, member_epoch=STATIC_LEAVE_EPOCH, pending_revocation=EMPTY,
                          assigned=freeze({t: {p: 0 for p in parts}
                                           for t, parts in member.assigned.items()}))
        return CoordinatorResult([rec.current_assignment(group_id, leaving)],
                                 response(member_id, STATIC_LEAVE_EPOCH))
    log.info("group %s: static member %s with instance id %s left the consumer group", group_id,
             member_id, instance_id)
    return fence(shard, group, [member], response)


def fence(shard, group: ConsumerGroup, members: list, response, reason: str = "") -> \
        CoordinatorResult:
    """Remove ``members``; ``response`` is a callable (member id, epoch) -> response, or the
    response itself."""
    if not members:
        return CoordinatorResult([], _answer(response, members))
    if can_downgrade(shard, group, members):
        return downgrade(shard, group, members, None, _answer(response, members),
                                   f"Downgrade group {group.group_id} from consumer to classic "
                                   f"for member leaving.")
    records = fence_records(shard, group, members)
    for member in members:
        cancel_timers(shard, group.group_id, member.member_id)
    return CoordinatorResult(records, _answer(response, members))


def fence_records(shard, group: ConsumerGroup, members: list) -> list:
    gid = group.group_id
    records = []
    for member in members:
        records += remove_member_records(gid, member.member_id)
    leaving_regexes: dict = {}
    for member in members:
        if member.regex:
            leaving_regexes[member.regex] = leaving_regexes.get(member.regex, 0) + 1
    deleted = [r for r, n in leaving_regexes.items() if group.regex_subscribers.get(r) == n]
    records += [rec.regex_tombstone(gid, r) for r in deleted]
    counts = group.subscribed_names_without(members, deleted)
    epoch = group.group_epoch + 1
    records.append(rec.group_epoch(gid, epoch, shard.metadata_hash(counts)))
    if len(members) == len(group.members):
        # The group is left empty: its target is empty at the new epoch, and its timestamp 0
        # lets the next member's target be computed at once (Kafka's consumerGroupFenceMembers).
        records.append(rec.target_metadata(gid, epoch, 0))
    log.info("group %s: bumped the group epoch to %d (%d member(s) removed)", gid, epoch,
             len(members))
    return records


def remove_member_records(group_id: str, member_id: str) -> list:
    return [rec.current_assignment_tombstone(group_id, member_id),
            rec.target_member_tombstone(group_id, member_id),
            rec.member_subscription_tombstone(group_id, member_id)]


def _answer(response, members):
    if callable(response):
        member = members[0] if members else None
        return response(member.member_id if member else "", -1)
    return response


# --- timers --------------------------------------------------------------------------------------

def schedule_session(shard, group_id: str, member_id: str, timeout_ms: int | None = None) -> None:
    """(Re)start a member's session (:func:`kbroker.coordinator.group.modern.schedule_session`);
    it is fenced when the session runs out."""
    if timeout_ms is None:
        timeout_ms = settings.session_timeout_ms(shard, group_id)
    modern.schedule_session(shard, (SESSION, group_id, member_id), timeout_ms,
                            lambda s: fence_op(s, group_id, member_id,
                                               "the member session expired"))


def schedule_rebalance(shard, group_id: str, member_id: str, epoch: int, timeout_ms: int) -> None:
    def expired(s):
        group = s.find_group(group_id, "consumer")
        member = group.members.get(member_id) if group is not None else None
        if member is None or member.member_epoch != epoch:
            return CoordinatorResult()
        log.info("group %s: member %s fenced: it failed to transition from epoch %d within "
                 "%d ms", group_id, member_id, epoch, timeout_ms)
        return fence(s, group, [member], None)

    shard.schedule((REBALANCE, group_id, member_id), max(timeout_ms, 0), expired)


def schedule_join_if_absent(shard, group_id: str, member_id: str, timeout_ms: int) -> None:
    key = (JOIN, group_id, member_id)
    if key not in shard.runtime.timer_keys(shard.partition_index):
        shard.schedule(key, timeout_ms, lambda s: fence_op(
            s, group_id, member_id, "the classic member failed to join within the rebalance "
                                    "timeout"))


def schedule_sync(shard, group_id: str, member_id: str, timeout_ms: int) -> None:
    shard.schedule((SYNC, group_id, member_id), timeout_ms, lambda s: fence_op(
        s, group_id, member_id, "the member failed to sync within timeout"))


def cancel_timers(shard, group_id: str, member_id: str) -> None:
    for kind in (REBALANCE, JOIN, SYNC):
        shard.cancel((kind, group_id, member_id))
    modern.cancel_session(shard, (SESSION, group_id, member_id))


def fence_op(shard, group_id: str, member_id: str, reason: str) -> CoordinatorResult:
    group = shard.find_group(group_id, "consumer")
    member = group.members.get(member_id) if group is not None else None
    if member is None:
        return CoordinatorResult()
    log.info("group %s: member %s fenced from the group because %s", group_id, member_id, reason)
    return fence(shard, group, [member], None)


def on_loaded(shard, group: ConsumerGroup) -> None:
    """A loaded group's members get their session timeouts (and rebalance timeouts when they
    were revoking), as if they had just heartbeated."""
    from kbroker.coordinator.group.consumer.member import MemberState
    log.info("loaded consumer group %s with %d member(s) at epoch %d", group.group_id,
             len(group.members), group.group_epoch)
    for member in group.members.values():
        timeout = member.classic.session_timeout_ms if member.classic is not None else None
        schedule_session(shard, group.group_id, member.member_id, timeout)
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            schedule_rebalance(shard, group.group_id, member.member_id, member.member_epoch,
                               member.rebalance_timeout_ms)


# --- downgrade: only classic members are left -------------------------------------------------

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
        version = protocol_version(member.metadata(classic.protocol_name))
        member.assignment = encode_assignment(group.target_of(source), image, version)
    records.append(shard.group_record(classic))
    for m in group.members.values():
        cancel_timers(shard, gid, m.member_id)

    def converted():
        shard.install_classic_group(classic)
        for member in classic.members.values():
            shard.schedule_session_expiry(classic, member)
        if rebalance:
            extra = shard.prepare_rebalance(classic, reason or "downgrade")
            if extra:
                shard.runtime.run(shard.partition_index, lambda s: CoordinatorResult(extra))
        log.info("group %s: converted the consumer group to a classic group", gid)
    return CoordinatorResult(records, response, on_committed=converted)


def on_unloaded(shard, group) -> None:
    """Nothing: its timers die with the shard (the runtime holds them), and no request waits."""
