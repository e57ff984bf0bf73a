"""What ConsumerGroupDescribe, StreamsGroupDescribe and ShareGroupDescribe share: finding one
group of the asked type, with Kafka's per-group errors when it cannot be described."""

from __future__ import annotations

from kbroker.protocol.errors import Errors, KafkaError
from kbroker.security.authorizer import Op, ResourceType, allowed

NOT_REQUESTED = -(2**31)  # authorized operations were not asked for


def find_group(ctx, R, group_id: str, kind: str):
    """(the DescribedGroup answer to fill, the shard, the group). The group is None when the
    answer already carries its error: INVALID_GROUP_ID, GROUP_AUTHORIZATION_FAILED, the
    coordinator's error, or GROUP_ID_NOT_FOUND ("not a <kind> group" when the id names a group of
    another type: :meth:`GroupShard.group_of_type`)."""
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
    try:
        group = shard.group_of_type(group_id, kind)
        if group is None:
            raise KafkaError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
    except KafkaError as exc:
        out.error_code, out.error_message = exc.error.code, exc.message
        return out, shard, None
    return out, shard, group
