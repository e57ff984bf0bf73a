"""Members leaving a streams group: a leave heartbeat (epoch -1; -2 for a static member's
temporary leave, which keeps its tasks until it rejoins or its session expires) and fencing
(session timeout, or a member that does not revoke its tasks within its rebalance timeout).

Removing a member writes its tombstones (current assignment, target, metadata) and a new group
epoch; the others get a new target assignment at their next heartbeat. Timers live in the
runtime: ``("streams-session", group, member)`` and ``("streams-rebalance", group, member)``.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from kbroker.coordinator.group import modern
from kbroker.coordinator.group.streams import records as rec
from kbroker.coordinator.group.streams import settings
from kbroker.coordinator.group.streams.member import NO_TASKS, STATIC_LEAVE_EPOCH
from kbroker.coordinator.runtime import CoordinatorResult
from kbroker.protocol.errors import Errors, KafkaError

log = logging.getLogger("kbroker.coordinator.group")

SESSION, REBALANCE = "streams-session", "streams-rebalance"


def streams_group(shard, group_id: str):
    group = shard.group_of_type(group_id, "streams")
    if group is None:
        raise KafkaError(Errors.GROUP_ID_NOT_FOUND, f"Streams group {group_id} not found.")
    return group


def static_member_of(group, instance_id: str, member_id: str):
    member = group.static_member(instance_id)
    if member is None:
        raise KafkaError(Errors.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
    if member.member_id != member_id:  # the handler logs the refusal, once
        raise KafkaError(Errors.FENCED_INSTANCE_ID,
                         f"Static member {member_id} with instance id {instance_id} was fenced "
                         f"by member {member.member_id}.")
    return member


def leave(shard, group_id: str, member_id: str, instance_id: str | None, epoch: int,
          response) -> CoordinatorResult:
    group = streams_group(shard, group_id)
    if instance_id is None:
        member = group.member(member_id)
        log.info("group %s: member %s left the streams group", group_id, member_id)
        return fence(shard, group, member, response)
    member = static_member_of(group, instance_id, member_id)
    if epoch == STATIC_LEAVE_EPOCH:
        log.info("group %s: static member %s with instance id %s temporarily left the streams "
                 "group", group_id, member_id, instance_id)
        # It keeps its tasks (active ones at assignment epoch 0: commits of the old instance
        # are fenced) until it rejoins or its session expires.
        leaving = replace(member, member_epoch=STATIC_LEAVE_EPOCH, pending_revocation=NO_TASKS,
                          assigned=member.assigned.with_active_epochs_zero())
        return CoordinatorResult([rec.current_assignment(group_id, leaving)], response)
    log.info("group %s: static member %s with instance id %s left the streams group", group_id,
             member_id, instance_id)
    return fence(shard, group, member, response)


def fence(shard, group, member, response) -> CoordinatorResult:
    gid = group.group_id
    records = rec.remove_member_records(gid, member.member_id)
    epoch = group.group_epoch + 1
    records.append(rec.group_epoch(gid, epoch, group.metadata_hash,
                                   group.validated_topology_epoch,
                                   group.last_assignment_configs))
    log.info("group %s: bumped the streams group epoch to %d (member %s removed)", gid, epoch,
             member.member_id)
    cancel_timers(shard, gid, member.member_id)

    def emptied() -> None:
        # Kafka forgets an application's shutdown request once its last member is gone.
        now = shard.find_group(gid, "streams")
        if now is not None and not now.members:
            now.shutdown_request_member_id = None
    return CoordinatorResult(records, response, on_committed=emptied)


def fence_op(shard, group_id: str, member_id: str, reason: str) -> CoordinatorResult:
    group = shard.find_group(group_id, "streams")
    member = group.members.get(member_id) if group is not None else None
    if member is None:
        return CoordinatorResult()
    log.info("group %s: member %s fenced from the streams group because %s", group_id, member_id,
             reason)
    return fence(shard, group, member, None)


def schedule_session(shard, group_id: str, member_id: str) -> None:
    modern.schedule_session(shard, (SESSION, group_id, member_id),
                            settings.session_timeout_ms(shard, group_id),
                            lambda s: fence_op(s, group_id, member_id,
                                               "the member session expired"))


def schedule_rebalance(shard, group_id: str, member_id: str, epoch: int, timeout_ms: int) -> None:
    def expired(s):
        group = s.find_group(group_id, "streams")
        member = group.members.get(member_id) if group is not None else None
        if member is None or member.member_epoch != epoch:
            return CoordinatorResult()
        log.info("group %s: member %s fenced: it failed to revoke its tasks within %d ms",
                 group_id, member_id, timeout_ms)
        return fence(s, group, member, None)

    shard.schedule((REBALANCE, group_id, member_id), max(timeout_ms, 0), expired)


def cancel_timers(shard, group_id: str, member_id: str) -> None:
    shard.cancel((REBALANCE, group_id, member_id))
    modern.cancel_session(shard, (SESSION, group_id, member_id))


def on_loaded(shard, group) -> None:
    """A loaded group's members get their session timeouts, as if they had just heartbeated."""
    from kbroker.coordinator.group.streams.member import MemberState
    log.info("loaded streams group %s with %d member(s) at epoch %d", group.group_id,
             len(group.members), group.group_epoch)
    for member in group.members.values():
        schedule_session(shard, group.group_id, member.member_id)
        if member.state is MemberState.UNREVOKED_TASKS:
            schedule_rebalance(shard, group.group_id, member.member_id, member.member_epoch,
                               member.rebalance_timeout_ms)


def on_unloaded(shard, group) -> None:
    """Nothing: its timers die with the shard (the runtime holds them), and no request waits."""
