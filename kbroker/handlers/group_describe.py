"""What ConsumerGroupDescribe, StreamsGroupDescribe and ShareGroupDescribe share: finding one
group of the asked type, with Kafka's per-group errors when it cannot be described."""

from __future__ import annotations

from kbroker.protocol.errors import Errors, KafkaError
from kbroker.security.authorizer import Op, ResourceType, allowed

NOT_REQUESTED = -(2**31)  # authorized operations were not asked for


def find_group(ctx, R, group_id: str, groups_of, kind: str):
    """(the DescribedGroup answer to fill, the shard, the group). The group is None when the
    answer already carries its error: INVALID_GROUP_ID, GROUP_AUTHORIZATION_FAILED, the
    coordinator's error, or GROUP_ID_NOT_FOUND ("not a <kind> group" when the id names a group of
    another type).
    ``groups_of(shard)`` is the shard's table of groups of that type."""
    out = R.DescribedGroup(group_id=group_id, error_code=0, authorized_operations=NOT_REQUESTED)
    if not group_id:
        out.error_code = Errors.INVALID_GROUP_ID.code
        return out, None, None
    if not allowed(ctx, Op.DESCRIBE, ResourceType.GROUP, group_id):
        out.error_code = Errors.GROUP_AUTHORIZATION_FAILED.code
        return out, None, None
    try:
        shard = ctx.groups.shard_for(group_id)
    except KafkaError as exc:
        out.error_code, out.error_message = exc.error.code, exc.message
        return out, None, None
    group = groups_of(shard).get(group_id)
    if group is None:
        out.error_code = Errors.GROUP_ID_NOT_FOUND.code
        other = shard.is_modern_group(group_id) or shard.group(group_id) is not None
        out.error_message = (f"Group {group_id} is not a {kind} group." if other
                             else f"Group {group_id} not found.")
    return out, shard, group
