"""What a classic member's parked JoinGroup and SyncGroup requests are answered with, and the
answering itself.

A classic member's JoinGroup and SyncGroup wait (``Member.join_future`` / ``sync_future``) until
the rebalance gets far enough; the shard's rebalance core, the upgrade to a consumer group and an
unload all answer them, each with its own error. Kept apart from the shard so the consumer-group
package can answer them without importing the shard.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kbroker.coordinator.group.state import Member
from kbroker.protocol.errors import Errors


@dataclass
class JoinResult:
    error: Errors
    member_id: str = ""
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: list = field(default_factory=list)  # [(member_id, instance id, metadata)], leader only


@dataclass
class SyncResult:
    error: Errors
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


def answer_join(member: Member, result: JoinResult) -> None:
    """Answer the member's parked JoinGroup, if it has one."""
    future, member.join_future = member.join_future, None
    if future is not None and not future.done():
        future.set_result(result)


def answer_sync(member: Member, result: SyncResult) -> None:
    """Answer the member's parked SyncGroup, if it has one."""
    future, member.sync_future = member.sync_future, None
    if future is not None and not future.done():
        future.set_result(result)


def answer_parked(member: Member, error: Errors) -> None:
    """Both parked requests get ``error`` (the member must find the coordinator, or rejoin)."""
    answer_join(member, JoinResult(error, member.member_id))
    answer_sync(member, SyncResult(error))
