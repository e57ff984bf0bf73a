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
from kbroker.coordinator.group.share.target import build as build_target
from kbroker.coordinator.runtime import CoordinatorResult, now_ms
from kbroker.protocol.errors import Errors, KafkaError

log = logging.getLogger("kbroker.coordinator.group")

SESSION = "share-session"


def share_group(shard, group_id: str):
    group = shard.group_of_type(group_id, "share")
    if group is None:
        raise KafkaError(Errors.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
    return group


def leave(shard, group_id: str, member_id: str, response) -> CoordinatorResult:
    group = share_group(shard, group_id)
    member = group.member(member_id)
    log.info("group %s: member %s left the share group", group_id, member_id)
    return CoordinatorResult(fence_records(shard, group, member.member_id), response,
                             on_committed=lambda: cancel_session(shard, group_id, member_id))


def fence_records(shard, group, member_id: str) -> list:
    """The member's tombstones, the group's next epoch (with the metadata hash of what the
    remaining members subscribe to) and the target assignment of the remaining members at that
    epoch (Kafka 4.4.0 moves the assignment epoch with a leave too)."""
    records = rec.remove_member_records(group.group_id, member_id)
    remaining = {m.member_id: m for m in group.members.values() if m.member_id != member_id}
    subscribed = set()
    for m in remaining.values():
        subscribed.update(m.subscribed)
    metadata_hash = shard.metadata_hash(subscribed)
    epoch = group.group_epoch + 1
    records.append(rec.group_epoch(group.group_id, epoch, metadata_hash))
    without = group.copy()
    without.target.pop(member_id, None)
    records += build_target(shard, without, remaining, epoch, now_ms())[0]
    return records


def schedule_session(shard, group_id: str, member_id: str) -> None:
    modern.schedule_session(shard, (SESSION, group_id, member_id),
                            settings.session_timeout_ms(shard, group_id),
                            lambda s: _expire(s, group_id, member_id))


def cancel_session(shard, group_id: str, member_id: str) -> None:
    modern.cancel_session(shard, (SESSION, group_id, member_id))


def _expire(shard, group_id: str, member_id: str) -> CoordinatorResult:
    group = shard.find_group(group_id, "share")
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


def on_unloaded(shard, group) -> None:
    """Nothing: its timers die with the shard (the runtime holds them), and no request waits."""
