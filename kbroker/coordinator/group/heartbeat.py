"""Heartbeat: keeps a member's session alive and tells it when to rejoin.

During PreparingRebalance a heartbeat answers REBALANCE_IN_PROGRESS, so members rejoin at their
next heartbeat instead of waiting for the rebalance timeout.
"""

from __future__ import annotations

from kbroker.coordinator.group.shard import GroupShard
from kbroker.coordinator.group.state import GroupState
from kbroker.coordinator.group.sync import validate_member
from kbroker.coordinator.runtime import CoordinatorResult, respond
from kbroker.protocol.errors import Errors, KafkaError

S = GroupState


def heartbeat(shard: GroupShard, group_id: str, generation_id: int, member_id: str,
              group_instance_id: str | None) -> CoordinatorResult:
    return respond(_heartbeat(shard, group_id, generation_id, member_id, group_instance_id))


def _heartbeat(shard: GroupShard, group_id: str, generation_id: int, member_id: str,
               group_instance_id: str | None) -> Errors:
    consumer_group = shard.find_group(group_id, "consumer")
    if consumer_group is not None:
        from kbroker.coordinator.group.consumer import classic_members
        try:
            return classic_members.heartbeat(shard, consumer_group, member_id, group_instance_id,
                                       generation_id)
        except KafkaError as exc:
            return exc.error
    group = shard.group(group_id)
    if group is None or group.is_in(S.EMPTY):
        return Errors.UNKNOWN_MEMBER_ID
    error = validate_member(group, member_id, group_instance_id)
    if error is not None:
        return error
    if generation_id != group.generation:
        return Errors.ILLEGAL_GENERATION
    shard.schedule_session_expiry(group, group.members[member_id])
    if group.is_in(S.PREPARING_REBALANCE):
        return Errors.REBALANCE_IN_PROGRESS
    return Errors.NONE
