"""Classic groups as a group type of the shard (:mod:`kbroker.coordinator.group.types`): the
replay of their GroupMetadata records, and what a shard's load and unload do for each group.

A classic group's durable part is its last GroupMetadata record (``GroupShard.persisted``); its
live object (members, parked requests, rebalance state) is made from that record when the shard
loads and otherwise by the operations (:mod:`kbroker.coordinator.group.shard`).
"""

from __future__ import annotations

from kbroker.coordinator.group import records as rec
from kbroker.coordinator.group.parked import answer_parked
from kbroker.coordinator.group.state import ClassicGroup
from kbroker.protocol.errors import Errors
from kbroker.protocol.messages.group_metadata_key import GroupMetadataKey


def replay(shard, record_type: int, key_view: memoryview, value: bytes | None) -> None:
    group_id = GroupMetadataKey.decode(key_view, 0).group
    if value is None:
        shard.persisted.pop(group_id, None)
    else:
        shard.persisted[group_id] = rec.decode_group_metadata_value(value)


def on_loaded(shard, group: ClassicGroup) -> None:
    """Its members' sessions run from now, as if each had just heartbeated."""
    for member in group.members.values():
        shard.schedule_session_expiry(group, member)


def on_unloaded(shard, group: ClassicGroup) -> None:
    """Members parked in JoinGroup/SyncGroup learn to find the new coordinator."""
    for member in group.members.values():
        answer_parked(member, Errors.NOT_COORDINATOR)
