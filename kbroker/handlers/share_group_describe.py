"""ShareGroupDescribe (key 77), v1: share groups as their coordinator sees them.

Per group: state (Empty, Stable), group and target assignment epochs, the assignor (``simple``)
and every member with its epoch, rack, client, subscription and assigned partitions (with topic
names; a partition of a topic deleted since is left out). An empty group id is INVALID_GROUP_ID;
a group that does not exist is GROUP_ID_NOT_FOUND "Group X not found.", a group of another type
"Group X is not a share group.". DESCRIBE on the group is required (GROUP_AUTHORIZATION_FAILED),
and DESCRIBE on the topics its members subscribe to (TOPIC_AUTHORIZATION_FAILED), as Kafka's
KafkaApis. While ``share.version`` is 0 every group is UNSUPPORTED_VERSION.
"""

from __future__ import annotations

from kbroker.handlers import handles
from kbroker.handlers.group_describe import NOT_REQUESTED, find_group
from kbroker.handlers.features import share_groups_enabled
from kbroker.protocol.errors import Errors
from kbroker.security.authorizer import Op, ResourceType, allowed, authorized_operations

ASSIGNOR = "simple"


def describe(ctx, R, group_id: str):
    out, _, group = find_group(ctx, R, group_id, "share")
    if group is None:
        return out
    denied = sorted(t for t in group.subscribed_topics()
                    if not allowed(ctx, Op.DESCRIBE, ResourceType.TOPIC, t))
    if denied:
        out.error_code = Errors.TOPIC_AUTHORIZATION_FAILED.code
        out.error_message = f"The described group uses topics that the client is not " \
                            f"authorized to describe: {denied}"
        return out
    image = ctx.metadata
    out.group_state = group.state.value
    out.group_epoch = group.group_epoch
    out.assignment_epoch = group.assignment_epoch
    out.assignor_name = ASSIGNOR
    for m in group.members.values():
        parts = []
        for topic_id, partitions in sorted(m.assigned.items(), key=lambda kv: str(kv[0])):
            topic = image.topic_by_id(topic_id)
            if topic is not None:
                parts.append(R.TopicPartitions(topic_id=topic_id, topic_name=topic.name,
                                               partitions=sorted(partitions)))
        out.members.append(R.Member(
            member_id=m.member_id, member_epoch=m.member_epoch, rack_id=m.rack_id,
            client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=list(m.subscribed),
            assignment=R.Assignment(topic_partitions=parts)))
    return out


@handles("ShareGroupDescribe")
def handle_share_group_describe(ctx, request):
    from kbroker.protocol.messages.share_group_describe import ShareGroupDescribeResponse as R

    if not share_groups_enabled(ctx):  # share.version 0: every group, without a message
        return R(throttle_time_ms=0, groups=[
            R.DescribedGroup(group_id=g, error_code=Errors.UNSUPPORTED_VERSION.code,
                             authorized_operations=NOT_REQUESTED) for g in request.group_ids])
    groups = []
    for group_id in request.group_ids:
        described = describe(ctx, R, group_id)
        if request.include_authorized_operations and described.error_code == 0:
            described.authorized_operations = authorized_operations(ctx, ResourceType.GROUP,
                                                                    group_id)
        groups.append(described)
    return R(throttle_time_ms=0, groups=groups)
