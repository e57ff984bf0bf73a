"""DescribeGroups, ListGroups and DeleteGroups over one shard's groups."""

from __future__ import annotations

import logging

from kbroker.coordinator.group import records as rec
from kbroker.coordinator.group.shard import GroupShard
from kbroker.coordinator.group.state import GroupState
from kbroker.coordinator.runtime import CoordinatorResult, respond
from kbroker.protocol.errors import Errors

log = logging.getLogger("kbroker.coordinator.group")
S = GroupState


def describe(shard: GroupShard, group_id: str):
    """The group, or None when it does not exist. Members carry their protocol metadata and
    assignment only while the group is Stable (Kafka)."""
    return shard.group(group_id)


def list_groups(shard: GroupShard, states: set[str] | None, types: set[str] | None = None
                ) -> list:
    """[(group_id, protocol_type, state name, group type)] of this shard, filtered by lower-cased
    states and types ("classic", "consumer", "share", "streams")."""
    out = []
    if not types or "classic" in types:
        for group in shard.groups.values():
            if group.is_in(S.DEAD) or shard.is_modern_group(group.group_id):
                continue
            if states and group.state.value.lower() not in states:
                continue
            out.append((group.group_id, group.protocol_type or "", group.state.value, "classic"))
    if not types or "consumer" in types:
        for group in shard.consumer_groups.values():
            state = group.state.value
            if states and state.lower() not in states:
                continue
            out.append((group.group_id, "consumer", state, "consumer"))
    if not types or "share" in types:
        for group in shard.share_groups.values():
            state = group.state.value
            if states and state.lower() not in states:
                continue
            out.append((group.group_id, "share", state, "share"))
    if not types or "streams" in types:
        for group in shard.streams_groups.values():
            state = group.state.value
            if states and state.lower() not in states:
                continue
            out.append((group.group_id, "streams", state, "streams"))
    return out


def delete_group(shard: GroupShard, group_id: str) -> CoordinatorResult:
    """The response is the group's error."""
    streams_group = shard.streams_groups.get(group_id)
    if streams_group is not None:
        return _delete_streams_group(shard, streams_group)
    consumer_group = shard.consumer_groups.get(group_id)
    if consumer_group is not None:
        return _delete_consumer_group(shard, consumer_group)
    group = shard.group(group_id)
    if group is None:
        return respond(Errors.GROUP_ID_NOT_FOUND)
    if not group.is_in(S.EMPTY):
        return respond(Errors.NON_EMPTY_GROUP)
    records = [(rec.offset_commit_key(group_id, topic, partition), None)
               for topic, partition in shard.offsets.get(group_id, {})]
    records.append((rec.group_metadata_key(group_id), None))

    def deleted() -> None:
        shard.drop_group(group_id)
        log.info("deleted group %s and %d committed offset(s)", group_id, len(records) - 1)

    return CoordinatorResult(records, Errors.NONE, on_committed=deleted,
                             on_failed=lambda exc: exc.error)


def _delete_consumer_group(shard: GroupShard, group) -> CoordinatorResult:
    """DeleteGroups of a consumer group: only an Empty one (NON_EMPTY_GROUP otherwise); its
    offsets and every record of the group are tombstoned."""
    from kbroker.coordinator.group.consumer import records as consumer_records
    if not group.is_empty:
        return respond(Errors.NON_EMPTY_GROUP)
    group_id = group.group_id
    records = [(rec.offset_commit_key(group_id, topic, partition), None)
               for topic, partition in shard.offsets.get(group_id, {})]
    count = len(records)
    records += consumer_records.group_tombstones(group)

    def deleted() -> None:
        shard.forget_classic_group(group_id)
        log.info("deleted consumer group %s and %d committed offset(s)", group_id, count)

    return CoordinatorResult(records, Errors.NONE, on_committed=deleted,
                             on_failed=lambda exc: exc.error)


def _delete_streams_group(shard: GroupShard, group) -> CoordinatorResult:
    """DeleteGroups of a streams group: only an Empty one (NON_EMPTY_GROUP otherwise); its
    offsets and every record of the group are tombstoned."""
    from kbroker.coordinator.group.streams import records as streams_records
    if not group.is_empty:
        return respond(Errors.NON_EMPTY_GROUP)
    group_id = group.group_id
    records = [(rec.offset_commit_key(group_id, topic, partition), None)
               for topic, partition in shard.offsets.get(group_id, {})]
    count = len(records)
    records += streams_records.group_tombstones(group)
    return CoordinatorResult(records, Errors.NONE, on_committed=lambda: log.info(
        "deleted streams group %s and %d committed offset(s)", group_id, count),
        on_failed=lambda exc: exc.error)
