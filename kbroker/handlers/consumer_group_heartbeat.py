"""ConsumerGroupHeartbeat (key 68), v0-1: the consumer group protocol (KIP-848).

Thin wrapper over :mod:`kbroker.coordinator.group.consumer.heartbeat`: the request is checked as
Kafka's GroupCoordinatorService does (INVALID_REQUEST: an empty member id from v1 on, KIP-1082 -
the client makes its member id - and for a leave or a known member; an empty group, instance or
rack id; a join without rebalance timeout, without subscription, or with owned partitions; an
epoch below -2. UNSUPPORTED_ASSIGNOR for an assignor not in ``group.consumer.assignors``), then
runs as one operation on the group's shard and is answered once its records are committed.
Errors carry Kafka's message (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID, UNRELEASED_INSTANCE_ID,
FENCED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED, GROUP_ID_NOT_FOUND for a classic group that cannot
be upgraded, INVALID_REGULAR_EXPRESSION from v1 on for a regex RE2 rejects).
Authorization: READ on the group (GROUP_AUTHORIZATION_FAILED), DESCRIBE on every subscribed topic
name (TOPIC_AUTHORIZATION_FAILED), as Kafka's KafkaApis.
v0 members may leave the member id empty on their first heartbeat; the coordinator names them.
With ``group.version`` 0 (or ``consumer`` left out of ``group.coordinator.rebalance.protocols``)
every heartbeat is answered UNSUPPORTED_VERSION before anything else, as Kafka's KafkaApis does;
a Java consumer then says the cluster does not support the CONSUMER protocol.
"""

from __future__ import annotations

import base64
import logging
import uuid

from kbroker.coordinator.group.consumer.heartbeat import HeartbeatRequest, heartbeat
from kbroker.handlers import handles
from kbroker.handlers.features import consumer_groups_enabled
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.protocol.messages.consumer_group_heartbeat import \
    ConsumerGroupHeartbeatResponse as R
from kbroker.security.authorizer import Op, ResourceType, allowed

log = logging.getLogger("kbroker.consumer_group_heartbeat")
GENERATED_MEMBER_ID_VERSION = 1  # KIP-1082: from v1 on the client makes its member id


def kafka_uuid() -> str:
    """A random id as Kafka prints a Uuid (URL-safe base64, no padding)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _invalid(ctx, request) -> KafkaError | None:
    def bad(message):
        return KafkaError(Errors.INVALID_REQUEST, message)

    if (ctx.api_version >= GENERATED_MEMBER_ID_VERSION or request.member_epoch > 0
            or request.member_epoch == -1) and not request.member_id:
        return bad("MemberId can't be empty.")
    if not request.group_id:
        return bad("GroupId can't be empty.")
    if request.instance_id == "":
        return bad("InstanceId can't be empty.")
    if request.rack_id == "":
        return bad("RackId can't be empty.")
    if request.member_epoch == 0:
        if request.rebalance_timeout_ms == -1:
            return bad("RebalanceTimeoutMs must be provided in first request.")
        if request.topic_partitions is None or request.topic_partitions:
            return bad("TopicPartitions must be empty when (re-)joining.")
        if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
            return bad("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null "
                       "when (re-)joining.")
    elif request.member_epoch == -2:
        if request.instance_id is None:
            return bad("InstanceId can't be null.")
    elif request.member_epoch < -2:
        return bad("MemberEpoch is invalid.")
    assignors = ctx.config.get("group.consumer.assignors")
    if request.server_assignor is not None and request.server_assignor not in assignors:
        return KafkaError(Errors.UNSUPPORTED_ASSIGNOR,
                          f"ServerAssignor {request.server_assignor} is not supported. "
                          f"Supported assignors: {', '.join(assignors)}.")
    return None


# Eager: a steady-state heartbeat writes nothing and never waits, so it is answered in the read
# callback that decoded it (no task, no futures, no writer task).
@handles("ConsumerGroupHeartbeat", eager=True)
async def handle_consumer_group_heartbeat(ctx, request):
    def failed(exc: KafkaError):
        if exc.error not in (Errors.NOT_COORDINATOR, Errors.COORDINATOR_LOAD_IN_PROGRESS,
                             Errors.COORDINATOR_NOT_AVAILABLE):
            log.info("ConsumerGroupHeartbeat of member %r (epoch %d) of group %r from %s: %s%s",
                     request.member_id, request.member_epoch, request.group_id, ctx.client_id,
                     exc.error.name, f" ({exc.message})" if exc.message else "")
        return R(throttle_time_ms=0, error_code=exc.error.code, error_message=exc.message)

    if not consumer_groups_enabled(ctx):  # group.version 0: Kafka answers without a message
        return R(throttle_time_ms=0, error_code=Errors.UNSUPPORTED_VERSION.code)
    problem = _invalid(ctx, request)
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
    owned = None if request.topic_partitions is None else [
        (tp.topic_id, list(tp.partitions)) for tp in request.topic_partitions]
    member_id = request.member_id
    if not member_id and request.member_epoch == 0:
        member_id = kafka_uuid()  # v0: named by the coordinator
    req = HeartbeatRequest(
        group_id=request.group_id, member_id=member_id, member_epoch=request.member_epoch,
        instance_id=request.instance_id, rack_id=request.rack_id,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        subscribed_topic_names=request.subscribed_topic_names,
        subscribed_topic_regex=request.subscribed_topic_regex if ctx.api_version >= 1 else None,
        server_assignor=request.server_assignor, owned=owned, client_id=ctx.client_id or "",
        client_host="/" + ctx.client_host)
    try:
        result = await ctx.groups.write(request.group_id, lambda shard: heartbeat(shard, req))
    except KafkaError as exc:
        return failed(exc)
    assignment = None
    if result.assignment is not None:
        assignment = R.Assignment(topic_partitions=[
            R.TopicPartitions(topic_id=topic_id, partitions=sorted(partitions))
            for topic_id, partitions in sorted(result.assignment.items(),
                                               key=lambda item: item[0].bytes)])
    return R(throttle_time_ms=0, error_code=0, member_id=result.member_id,
             member_epoch=result.member_epoch,
             heartbeat_interval_ms=result.heartbeat_interval_ms, assignment=assignment)
