"""LeaveGroup: members leave now (v3+ a batch, by member id or group instance id), and the group
rebalances at once instead of waiting for their sessions to expire."""

from __future__ import annotations

import logging

from kbroker.coordinator.group.shard import GroupShard
from kbroker.coordinator.group.state import GroupState
from kbroker.coordinator.runtime import CoordinatorResult, respond
from kbroker.protocol.errors import Errors

log = logging.getLogger("kbroker.coordinator.group")
S = GroupState
UNKNOWN_MEMBER_ID = ""


def leave(shard: GroupShard, group_id: str, identities: list) -> CoordinatorResult:
    """``identities``: [(member_id, group_instance_id, reason)]. The response is the top-level
    error and one error per identity, in order."""
    consumer_group = shard.find_group(group_id, "consumer")
    if consumer_group is not None:
        from kbroker.coordinator.group.consumer import classic_members
        return classic_members.leave(shard, consumer_group, identities)
    if shard.find_group(group_id, "share") is not None:  # Kafka: no such member, per member
        return respond((Errors.NONE, [Errors.UNKNOWN_MEMBER_ID] * len(identities)))
    group = shard.group(group_id)
    if group is None:
        return respond((Errors.UNKNOWN_MEMBER_ID, [Errors.UNKNOWN_MEMBER_ID] * len(identities)))
    results, records = [], []
    for member_id, instance_id, reason in identities:
        if instance_id is not None:
            existing = group.static_member_id(instance_id)
            if existing is None:
                results.append(Errors.UNKNOWN_MEMBER_ID)
                continue
            if member_id != UNKNOWN_MEMBER_ID and member_id != existing:
                results.append(Errors.FENCED_INSTANCE_ID)
                continue
            member_id = existing
        elif member_id in group.pending_members:
            group.pending_members.discard(member_id)
            shard.cancel(("session", group_id, member_id))
            records += shard.maybe_complete_join(group)
            results.append(Errors.NONE)
            continue
        member = group.members.get(member_id)
        if member is None:
            results.append(Errors.UNKNOWN_MEMBER_ID)
            continue
        log.info("member %s (instance %s) of group %s left: %s", member_id, instance_id,
                 group_id, reason or "no reason given")
        records += shard.remove_member_and_update(group, member,
                                                  f"leaving the group; reason: {reason}")
        results.append(Errors.NONE)
    return CoordinatorResult(records, (Errors.NONE, results))
