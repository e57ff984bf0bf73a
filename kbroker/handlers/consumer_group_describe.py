"""ConsumerGroupDescribe (key 69), v0-1: consumer groups as their coordinator sees them.

Per group: its state (Empty, Assigning, Reconciling, Stable), group and target assignment
epochs, the assignor (the one most members ask for, else the first of
``group.consumer.assignors``), and every member with its epoch, subscription, current assignment
(owned plus pending revocation) and target assignment, topics named. v1 (KIP-1099) adds the member
type: 0 for a member still on the classic protocol, 1 for a consumer-protocol member.
An empty group id is INVALID_GROUP_ID; a group that does not exist, or is not a consumer group,
GROUP_ID_NOT_FOUND with Kafka's message. DESCRIBE on the group is required
(GROUP_AUTHORIZATION_FAILED), and DESCRIBE on the topics of its members' subscriptions and
assignments (TOPIC_AUTHORIZATION_FAILED), as Kafka's KafkaApis. With ``group.version`` 0 every
group is answered UNSUPPORTED_VERSION (no message), as Kafka's.
"""

from __future__ import annotations

from kbroker.coordinator.group.consumer import settings
from kbroker.handlers import handles
from kbroker.handlers.features import consumer_groups_enabled
from kbroker.handlers.group_describe import NOT_REQUESTED, find_group
from kbroker.protocol.errors import Errors
from kbroker.security.authorizer import Op, ResourceType, allowed, authorized_operations



def _topic_partitions(R, image, *assignments):
    merged: dict = {}
    for assignment in assignments:
        for topic_id, partitions in assignment.items():
            merged.setdefault(topic_id, set()).update(partitions)
    out = []
    for topic_id in sorted(merged, key=lambda t: t.bytes):
        topic = image.topic_by_id(topic_id)
        if topic is not None:
            out.append(R.TopicPartitions(topic_id=topic_id, topic_name=topic.name,
                                         partitions=sorted(merged[topic_id])))
    return out


def describe(ctx, R, group_id: str):
    out, shard, group = find_group(ctx, R, group_id, "consumer")
    if group is None:
        return out
    image = ctx.metadata
    topics = set()
    for member in group.members.values():
        topics |= group.subscribed_topics_of(member)
        for assignment in (member.assigned, member.pending_revocation,
                           group.target_of(member.member_id)):
            topics |= {image.topic_by_id(t).name for t in assignment if image.topic_by_id(t)}
    denied = sorted(t for t in topics if not allowed(ctx, Op.DESCRIBE, ResourceType.TOPIC, t))
    if denied:
        out.error_code = Errors.TOPIC_AUTHORIZATION_FAILED.code
        out.error_message = f"The described group uses topics that the client is not " \
                            f"authorized to describe: {denied}"
        return out
    out.group_state = group.state.value
    out.group_epoch = group.group_epoch
    out.assignment_epoch = group.assignment_epoch
    out.assignor_name = group.preferred_assignor() or settings.default_assignor(shard)
    for member in group.members.values():
        out.members.append(R.Member(
            member_id=member.member_id, instance_id=member.instance_id, rack_id=member.rack_id,
            member_epoch=member.member_epoch, client_id=member.client_id,
            client_host=member.client_host,
            subscribed_topic_names=sorted(member.subscribed_topic_names),
            subscribed_topic_regex=member.regex,
            assignment=R.Assignment(topic_partitions=_topic_partitions(
                R, image, member.assigned, member.pending_revocation)),
            target_assignment=R.Assignment(topic_partitions=_topic_partitions(
                R, image, group.target_of(member.member_id))),
            member_type=0 if member.uses_classic_protocol else 1))
    return out


@handles("ConsumerGroupDescribe")
def handle_consumer_group_describe(ctx, request):
    from kbroker.protocol.messages.consumer_group_describe import \
        ConsumerGroupDescribeResponse as R

    if not consumer_groups_enabled(ctx):  # group.version 0: every group, without a message
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
