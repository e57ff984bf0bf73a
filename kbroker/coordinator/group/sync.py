"""SyncGroup: the leader's assignment becomes a GroupMetadata record; every member gets its part.

The leader's request writes the record; once it is committed (shard.assignment_committed) the
group is Stable and every member waiting in SyncGroup gets its part. Followers that arrive first
wait for that. If the write fails, every waiting member gets the error and the group rebalances
(Kafka's reaction).
"""

from __future__ import annotations

import asyncio
import logging

from kbroker.coordinator.group.parked import SyncResult
from kbroker.coordinator.group.shard import GroupShard
from kbroker.coordinator.group.state import GroupState
from kbroker.coordinator.runtime import CoordinatorResult, respond
from kbroker.protocol.errors import Errors, KafkaError

log = logging.getLogger("kbroker.coordinator.group")
S = GroupState


def sync(shard: GroupShard, group_id: str, generation_id: int, member_id: str,
         group_instance_id: str | None, protocol_type: str | None, protocol_name: str | None,
         assignments: dict[str, bytes]) -> CoordinatorResult:
    """The response is a SyncResult or a future of one."""
    result = _sync(shard, group_id, generation_id, member_id, group_instance_id, protocol_type,
                   protocol_name, assignments)
    return result if isinstance(result, CoordinatorResult) else respond(result)


def _sync(shard: GroupShard, group_id: str, generation_id: int, member_id: str,
          group_instance_id: str | None, protocol_type: str | None, protocol_name: str | None,
          assignments: dict[str, bytes]):
    consumer_group = shard.find_group(group_id, "consumer")
    if consumer_group is not None:
        if consumer_group.is_empty:
            return SyncResult(Errors.UNKNOWN_MEMBER_ID)
        from kbroker.coordinator.group.consumer import classic_members
        try:
            return classic_members.sync(shard, consumer_group, member_id, group_instance_id,
                                  generation_id, protocol_type, protocol_name)
        except KafkaError as exc:
            return SyncResult(exc.error)
    group = shard.group(group_id)
    if group is None:
        return SyncResult(Errors.UNKNOWN_MEMBER_ID)
    error = validate_member(group, member_id, group_instance_id)
    if error is not None:
        return SyncResult(error)
    if generation_id != group.generation:
        return SyncResult(Errors.ILLEGAL_GENERATION)
    # v5 (KIP-559): the client checks what it thinks it joined with.
    if (protocol_type is not None and protocol_type != group.protocol_type) or \
            (protocol_name is not None and protocol_name != group.protocol_name):
        return SyncResult(Errors.INCONSISTENT_GROUP_PROTOCOL)
    member = group.members[member_id]
    if group.is_in(S.PREPARING_REBALANCE):
        return SyncResult(Errors.REBALANCE_IN_PROGRESS)
    if group.is_in(S.STABLE):
        shard.schedule_session_expiry(group, member)
        return SyncResult(Errors.NONE, member.assignment, group.protocol_type,
                          group.protocol_name)
    if not group.is_in(S.COMPLETING_REBALANCE):
        return SyncResult(Errors.UNKNOWN_MEMBER_ID)
    future = asyncio.get_running_loop().create_future()
    if member.sync_future is not None and not member.sync_future.done():
        member.sync_future.set_result(SyncResult(Errors.REBALANCE_IN_PROGRESS))
    member.sync_future = future
    shard.schedule_session_expiry(group, member)
    if member_id == group.leader_id:
        # Members the leader left out get an empty assignment (Kafka).
        full = {mid: bytes(assignments.get(mid, b"")) for mid in group.members}
        generation = group.generation

        def failed(exc: KafkaError) -> SyncResult:
            log.warning("could not persist the assignment of group %s generation %d: %s",
                        group_id, generation, exc)
            if shard.groups.get(group_id) is not group or group.generation != generation \
                    or not group.is_in(S.COMPLETING_REBALANCE):
                return SyncResult(exc.error)
            for m in group.members.values():
                if m.sync_future is not None and not m.sync_future.done():
                    m.sync_future.set_result(SyncResult(exc.error))
                m.sync_future = None
            # No member is waiting in JoinGroup now, so this cannot empty the group: it has no
            # records to write (Kafka drops them here too).
            shard.prepare_rebalance(group, "the assignment could not be written")
            return SyncResult(exc.error)

        return CoordinatorResult([shard.group_record(group, full)], future,
                                 on_committed=lambda: shard.assignment_committed(
                                     group, generation, full),
                                 on_failed=failed)
    return future


def validate_member(group, member_id: str, group_instance_id: str | None) -> Errors | None:
    """Kafka's ClassicGroup.validateMember: FENCED_INSTANCE_ID for a replaced static member,
    UNKNOWN_MEMBER_ID for a member the group does not have or a group.instance.id it does not
    know (even with a valid member id)."""
    if group_instance_id is not None:
        existing = group.static_member_id(group_instance_id)
        if existing is None:
            return Errors.UNKNOWN_MEMBER_ID
        if existing != member_id:
            return Errors.FENCED_INSTANCE_ID
    if member_id not in group.members:
        return Errors.UNKNOWN_MEMBER_ID
    return None
