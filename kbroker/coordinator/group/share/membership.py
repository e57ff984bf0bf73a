"""Members leaving a share group: a leave heartbeat (epoch -1) or session expiry. Removing a
member writes its tombstones (current assignment, target, metadata) and a new group epoch; the
others get a new target assignment at their next heartbeat. The session timer is
``("share-session", group, member)`` in the runtime.
"""

from __future__ import annotations

import logging

from kbroker.coordinator.group import modern
from kbroker.coordinator.group.share import records as rec
from kbroker.coordinator.group.share import settings
from kbroker.coordinator.runtime import CoordinatorResult
from kbroker.protocol.errors import Errors, KafkaError

log = logging.getLogger("kbroker.coordinator.group")

SESSION = "share-session"


def share_group(shard, group_id: str):
    group = shard.share_groups.get(group_id)
    if group is None:
        if group_id in shard.consumer_groups or group_id in shard.streams_groups or \
                shard.group(group_id) is not None:
            raise KafkaError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        raise KafkaError(Errors.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
    return group


def member_of(group, member_id: str):
    member = group.members.get(member_id)
    if member is None:
        raise KafkaError(Errors.UNKNOWN_MEMBER_ID,
                         f"Member {member_id} is not a member of group {group.group_id}.")
    return member


def leave(shard, group_id: str, member_id: str, response) -> CoordinatorResult:
    group = share_group(shard, group_id)
    member = member_of(group, member_id)
    log.info("group %s: member %s left the share group", group_id, member_id)
    return CoordinatorResult(fence_records(shard, group, member.member_id), response,
                             on_committed=lambda: cancel_session(shard, group_id, member_id))


def fence_records(shard, group, member_id: str) -> list:
    """The member's tombstones and the group's next epoch (with the metadata hash of what the
    remaining members subscribe to)."""
    records = rec.remove_member_records(group.group_id, member_id)
    remaining = set()
    for m in group.members.values():
        if m.member_id != member_id:
            remaining.update(m.subscribed)
    metadata_hash = modern.group_hash(shard.image, remaining)
    records.append(rec.group_epoch(group.group_id, group.group_epoch + 1, metadata_hash))
    return records


def schedule_session(shard, group_id: str, member_id: str) -> None:
    modern.schedule_session(shard, (SESSION, group_id, member_id),
                            settings.session_timeout_ms(shard, group_id),
                            lambda s: _expire(s, group_id, member_id))


def cancel_session(shard, group_id: str, member_id: str) -> None:
    modern.cancel_session(shard, (SESSION, group_id, member_id))


def _expire(shard, group_id: str, member_id: str) -> CoordinatorResult:
    group = shard.share_groups.get(group_id)
    if group is None or member_id not in group.members:
        return CoordinatorResult()
    log.info("group %s: member %s of the share group expired after its session timeout",
             group_id, member_id)
    return CoordinatorResult(fence_records(shard, group, member_id))


def on_loaded(shard, group) -> None:
    """A loaded group's members get their session timeouts, as if they had just heartbeated."""
    log.info("loaded share group %s with %d member(s) at epoch %d", group.group_id,
             len(group.members), group.group_epoch)
    for member in group.members.values():
        schedule_session(shard, group.group_id, member.member_id)
