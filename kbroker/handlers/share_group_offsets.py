"""Share groups' admin side over the persister: deleting a share group's state (DeleteGroups of a
share group) and, below, DescribeShareGroupOffsets (key 90), AlterShareGroupOffsets (91) and
DeleteShareGroupOffsets (92).

The group coordinator (kbroker.coordinator.group.share.admin) decides and records; the share
state itself lives behind ``ctx.groups.share_persister`` (the share coordinator).
"""

from __future__ import annotations

import logging

from kbroker.coordinator.group.share import admin as share_admin
from kbroker.coordinator.share.persister import SharePartitionKey
from kbroker.protocol.errors import Errors, KafkaError

log = logging.getLogger("kbroker.share_groups")


def is_share_group(ctx, group_id: str) -> bool:
    try:
        return group_id in ctx.groups.shard_for(group_id).share_groups
    except KafkaError:
        return False


async def delete_share_group(ctx, group_id: str) -> Errors:
    """DeleteGroups of a share group: its share partitions' state first, then the group."""
    todo = await ctx.groups.write(group_id,
                                  lambda shard: share_admin.prepare_delete(shard, group_id))
    if isinstance(todo, Errors):
        return todo
    if todo:
        persister = ctx.groups.share_persister
        if persister is None:
            log.warning("DeleteGroups of share group %s: no share persister to delete the state "
                        "of its share partitions", group_id)
            return Errors.COORDINATOR_NOT_AVAILABLE
        for topic_id, partitions in todo.items():
            for p in sorted(partitions):
                result = await persister.delete(SharePartitionKey(group_id, topic_id, p))
                if result.error is not Errors.NONE:
                    log.info("DeleteGroups of share group %s: deleting the state of %s-%d "
                             "failed: %s %s", group_id, topic_id, p, result.error.name,
                             result.error_message or "")
                    return result.error
    return await ctx.groups.write(group_id, lambda shard: share_admin.delete(shard, group_id))
