"""DescribeGroups, ListGroups and DeleteGroups over one shard's groups."""

from __future__ import annotations

import logging

from kbroker.coordinator.group import records as rec
from kbroker.coordinator.group.shard import GroupShard
from kbroker.coordinator.runtime import CoordinatorResult, respond
from kbroker.protocol.errors import Errors

log = logging.getLogger("kbroker.coordinator.group")


def describe(shard: GroupShard, group_id: str):
    """The group, or None when it does not exist. Members carry their protocol metadata and
    assignment only while the group is Stable (Kafka)."""
    return shard.group(group_id)


def list_groups(shard: GroupShard, states: set[str] | None, types: set[str] | None = None
                ) -> list:
    """[(group_id, protocol_type, state name, group type)] of this shard, filtered by lower-cased
    states and types ("classic", "consumer", "share", "streams")."""
    out = []
    for group in shard.groups.values():
        if types and group.group_type not in types:
            continue
        entry = group.list_entry()
        if states and entry[2].lower() not in states:
            continue
        out.append(entry)
    return out


def delete_group(shard: GroupShard, group_id: str) -> CoordinatorResult:
    """DeleteGroups of one group: only an Empty one (NON_EMPTY_GROUP otherwise); its offsets and
    every record of the group are tombstoned. The response is the group's error."""
    group = shard.find_group(group_id)
    if group is None:
        return respond(Errors.GROUP_ID_NOT_FOUND)
    error = group.delete_error()
    if error is not Errors.NONE:
        return respond(error)
    records = [(rec.offset_commit_key(group_id, topic, partition), None)
               for topic, partition in shard.offsets.get(group_id, {})]
    count = len(records)
    records += group.tombstones()

    def deleted() -> None:
        shard.drop_group(group_id)  # a classic group's live object; the others replayed away
        log.info("deleted %s group %s and %d committed offset(s)", group.group_type, group_id,
                 count)

    return CoordinatorResult(records, Errors.NONE, on_committed=deleted,
                             on_failed=lambda exc: exc.error)
