"""ShareGroupHeartbeat (key 76), v1: share groups (KIP-932).

Thin wrapper over :mod:`kbroker.coordinator.group.share.heartbeat`. The request is checked as
Kafka's GroupCoordinatorService does (INVALID_REQUEST with Kafka's message: empty member, group
or rack id; a join without subscribed topics; an epoch below -1), UNSUPPORTED_VERSION while
``share.version`` is 0. Authorization: READ on the
group (GROUP_AUTHORIZATION_FAILED) and DESCRIBE on the subscribed topics
(TOPIC_AUTHORIZATION_FAILED), as Kafka's KafkaApis.

Partitions the heartbeat finds uninitialized are initialized through the share persister in the
background (as Kafka's coordinator does, after answering): on success a second coordinator
write records them initialized, and the members get them at their next heartbeat.
"""

from __future__ import annotations

import logging

from kbroker.coordinator.group.share.heartbeat import HeartbeatRequest, heartbeat
from kbroker.handlers import handles
from kbroker.handlers.features import share_groups_enabled
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.security.authorizer import Op, ResourceType, allowed

log = logging.getLogger("kbroker.share_group_heartbeat")

def _invalid(request) -> KafkaError | None:
    def bad(message):
        return KafkaError(Errors.INVALID_REQUEST, message)

    if request.member_id == "":
        return bad("MemberId can't be empty.")
    if request.group_id == "":
        return bad("GroupId can't be empty.")
    if request.rack_id == "":
        return bad("RackId can't be empty.")
    if request.member_epoch == 0:
        if not request.subscribed_topic_names:
            return bad("SubscribedTopicNames must be set in first request.")
    elif request.member_epoch < -1:
        return bad("MemberEpoch is invalid.")
    return None


@handles("ShareGroupHeartbeat")
async def handle_share_group_heartbeat(ctx, request):
    from kbroker.protocol.messages.share_group_heartbeat import \
        ShareGroupHeartbeatResponse as R

    def failed(exc: KafkaError):
        if exc.error not in (Errors.NOT_COORDINATOR, Errors.COORDINATOR_LOAD_IN_PROGRESS,
                             Errors.COORDINATOR_NOT_AVAILABLE):
            log.info("ShareGroupHeartbeat of member %r (epoch %d) of group %r from %s: %s%s",
                     request.member_id, request.member_epoch, request.group_id, ctx.client_id,
                     exc.error.name, f" ({exc.message})" if exc.message else "")
        return R(throttle_time_ms=0, error_code=exc.error.code, error_message=exc.message)

    if not share_groups_enabled(ctx):  # share.version 0: Kafka answers without a message
        return R(throttle_time_ms=0, error_code=Errors.UNSUPPORTED_VERSION.code)
    problem = _invalid(request)
    if problem is not None:
        return failed(problem)
    if not allowed(ctx, Op.READ, ResourceType.GROUP, request.group_id):
        return failed(KafkaError(Errors.GROUP_AUTHORIZATION_FAILED))
    if request.subscribed_topic_names:
        denied = sorted(t for t in set(request.subscribed_topic_names)
                        if not allowed(ctx, Op.DESCRIBE, ResourceType.TOPIC, t))
        if denied:
            return failed(KafkaError(Errors.TOPIC_AUTHORIZATION_FAILED,
                                     f"The group member is not authorized to describe topics: "
                                     f"{', '.join(denied)}."))
    req = HeartbeatRequest(group_id=request.group_id, member_id=request.member_id,
                           member_epoch=request.member_epoch, rack_id=request.rack_id,
                           subscribed=request.subscribed_topic_names,
                           client_id=ctx.client_id or "", client_host="/" + ctx.client_host)
    try:
        result = await ctx.groups.write(request.group_id, lambda shard: heartbeat(shard, req))
    except KafkaError as exc:
        return failed(exc)
    if result.initialize is not None:
        ctx.groups.initialize_share_partitions(result.initialize)
    response = R(throttle_time_ms=0, error_code=0, member_id=result.member_id,
                 member_epoch=result.member_epoch,
                 heartbeat_interval_ms=result.heartbeat_interval_ms)
    if result.assignment is not None:
        response.assignment = R.Assignment(topic_partitions=[
            R.TopicPartitions(topic_id=t, partitions=p)
            for t, p in sorted(result.assignment.items(), key=lambda kv: str(kv[0]))])
    return response
