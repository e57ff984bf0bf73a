"""StreamsGroupHeartbeat (key 88), v0-1: the streams group protocol (KIP-1071).

Thin wrapper over :mod:`kbroker.coordinator.group.streams.heartbeat`. The request is checked as
Kafka's GroupCoordinatorService does (INVALID_REQUEST with Kafka's message: empty member, group,
instance or rack id; a join without rebalance timeout or topology, or with tasks; an epoch below
-2; one task list without the others; a topology outside a join. STREAMS_INVALID_TOPOLOGY: a
changelog topic with a partition count), and for what Kafka 4.4.0's streams groups do not
support yet (source topic regexes). Task offsets and end offsets, which Kafka Streams 4.4 members
send every ``task.offset.interval.ms``, are accepted; the assignor does not use them (it hands out
no warm-up tasks). Before all that, as Kafka's KafkaApis: READ on the group
(GROUP_AUTHORIZATION_FAILED), then a topology naming Kafka's internal topics or invalid topic
names (STREAMS_INVALID_TOPOLOGY), then DESCRIBE on the topology's topics
(TOPIC_AUTHORIZATION_FAILED); the two authorization failures carry no message. With
``streams.version`` 0 (or ``streams`` left out of ``group.coordinator.rebalance.protocols``) the
heartbeat is answered UNSUPPORTED_VERSION before any of that, as Kafka's.

The internal topics the group is missing (status MISSING_INTERNAL_TOPICS) are created by the
broker, once, in the background, with the partitions, replication factor and configs the
configured topology decided; a principal without CREATE on them gets the status only.
"""

from __future__ import annotations

import logging

from kbroker.coordinator.group.streams.heartbeat import HeartbeatRequest, heartbeat
from kbroker.coordinator.group.streams.member import Endpoint, TaskTuple
from kbroker.handlers import handles
from kbroker.handlers.features import streams_groups_enabled
from kbroker.metadata.image import INTERNAL_TOPICS, topic_name_problem
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.security.authorizer import Op, ResourceType, allowed

log = logging.getLogger("kbroker.streams_group_heartbeat")


def _invalid(request) -> KafkaError | None:
    def bad(message):
        return KafkaError(Errors.INVALID_REQUEST, message)

    if request.member_id == "":
        return bad("MemberId can't be empty.")
    if request.group_id == "":
        return bad("GroupId can't be empty.")
    if request.instance_id == "":
        return bad("InstanceId can't be empty.")
    if request.rack_id == "":
        return bad("RackId can't be empty.")
    if request.member_epoch == 0:
        if request.rebalance_timeout_ms == -1:
            return bad("RebalanceTimeoutMs must be provided in first request.")
        for name, tasks in (("ActiveTasks", request.active_tasks),
                            ("StandbyTasks", request.standby_tasks),
                            ("WarmupTasks", request.warmup_tasks)):
            if tasks is None or tasks:  # null too, as Kafka's check
                return bad(f"{name} must be empty when (re-)joining.")
        if request.topology is None:
            return bad("Topology must be non-null when (re-)joining.")
        for s in request.topology.subtopologies:
            for t in s.state_changelog_topics:
                if t.partitions != 0:
                    return KafkaError(Errors.STREAMS_INVALID_TOPOLOGY,
                                      f"Changelog topic {t.name} must have an undefined "
                                      f"partition count, but it is set to {t.partitions}.")
    elif request.member_epoch == -2:
        if request.instance_id is None:
            return bad("InstanceId can't be null.")
    elif request.member_epoch < -2:
        return bad(f"MemberEpoch is {request.member_epoch}, but must be greater than or equal "
                   f"to -2.")
    lists = (request.active_tasks, request.standby_tasks, request.warmup_tasks)
    if any(t is not None for t in lists) and any(t is None for t in lists):
        return bad("If one task-type is non-null, all must be non-null.")
    if request.member_epoch != 0 and request.topology is not None:
        return bad("Topology can only be provided when (re-)joining.")
    # What Kafka 4.4.0's streams groups do not support yet.
    if request.topology is not None:
        for s in request.topology.subtopologies:
            if s.source_topic_regex:
                return bad("Regular expressions for source topics are not supported yet.")
    return None


def _topology_topics(topology) -> list[str]:
    """Every topic the topology names, once each, in Kafka's order (per subtopology: sources,
    repartition sinks, repartition sources, changelogs)."""
    out: dict[str, None] = {}
    for s in topology.subtopologies:
        out.update(dict.fromkeys(s.source_topics))
        out.update(dict.fromkeys(s.repartition_sink_topics))
        out.update(dict.fromkeys(t.name for t in s.repartition_source_topics))
        out.update(dict.fromkeys(t.name for t in s.state_changelog_topics))
    return list(out)


def _tasks(task_ids) -> dict:
    return {t.subtopology_id: set(t.partitions) for t in task_ids or ()}


@handles("StreamsGroupHeartbeat")
async def handle_streams_group_heartbeat(ctx, request):
    from kbroker.protocol.messages.streams_group_heartbeat import \
        StreamsGroupHeartbeatResponse as R

    def failed(exc: KafkaError):
        if exc.error not in (Errors.NOT_COORDINATOR, Errors.COORDINATOR_LOAD_IN_PROGRESS,
                             Errors.COORDINATOR_NOT_AVAILABLE):
            log.info("StreamsGroupHeartbeat of member %r (epoch %d) of group %r from %s: %s%s",
                     request.member_id, request.member_epoch, request.group_id, ctx.client_id,
                     exc.error.name, f" ({exc.message})" if exc.message else "")
        return R(throttle_time_ms=0, error_code=exc.error.code, error_message=exc.message)

    if not streams_groups_enabled(ctx):  # streams.version 0: Kafka answers without a message
        return R(throttle_time_ms=0, error_code=Errors.UNSUPPORTED_VERSION.code)
    # Kafka's KafkaApis order: READ on the group, then the topology's topics (internal ones,
    # invalid names, DESCRIBE on each), and only then the coordinator's checks of the request.
    # Both authorization failures are answered without a message, as Kafka's are.
    if not allowed(ctx, Op.READ, ResourceType.GROUP, request.group_id):
        failed(KafkaError(Errors.GROUP_AUTHORIZATION_FAILED))
        return R(throttle_time_ms=0, error_code=Errors.GROUP_AUTHORIZATION_FAILED.code)
    if request.topology is not None:
        required = _topology_topics(request.topology)
        prohibited = [t for t in required if t in INTERNAL_TOPICS]
        if prohibited:
            return failed(KafkaError(Errors.STREAMS_INVALID_TOPOLOGY, (
                f"Use of Kafka internal topics {','.join(prohibited)} in a Kafka Streams "
                f"topology is prohibited.")))
        invalid = [t for t in required if topic_name_problem(t) is not None]
        if invalid:
            return failed(KafkaError(Errors.STREAMS_INVALID_TOPOLOGY,
                                     f"Topic names {','.join(invalid)} are not valid topic "
                                     f"names."))
        if not all(allowed(ctx, Op.DESCRIBE, ResourceType.TOPIC, t) for t in required):
            failed(KafkaError(Errors.TOPIC_AUTHORIZATION_FAILED))
            return R(throttle_time_ms=0, error_code=Errors.TOPIC_AUTHORIZATION_FAILED.code)
    problem = _invalid(request)
    if problem is not None:
        return failed(problem)
    owned = None
    if request.active_tasks is not None:
        owned = TaskTuple.of(_tasks(request.active_tasks), _tasks(request.standby_tasks),
                             _tasks(request.warmup_tasks))
    endpoint = None
    if request.user_endpoint is not None:
        endpoint = Endpoint(request.user_endpoint.host, request.user_endpoint.port)
    tags = None
    if request.client_tags is not None:
        tags = {kv.key: kv.value for kv in request.client_tags}
    req = HeartbeatRequest(
        group_id=request.group_id, member_id=request.member_id,
        member_epoch=request.member_epoch,
        endpoint_information_epoch=request.endpoint_information_epoch,
        instance_id=request.instance_id, rack_id=request.rack_id,
        rebalance_timeout_ms=request.rebalance_timeout_ms, topology=request.topology,
        owned=owned, process_id=request.process_id, user_endpoint=endpoint, client_tags=tags,
        shutdown_application=bool(request.shutdown_application), api_version=ctx.api_version,
        task_offsets=None if request.task_offsets is None else
        [(t.subtopology_id, t.partition, t.offset) for t in request.task_offsets],
        task_end_offsets=None if request.task_end_offsets is None else
        [(t.subtopology_id, t.partition, t.offset) for t in request.task_end_offsets],
        client_id=ctx.client_id or "", client_host="/" + ctx.client_host)
    try:
        result = await ctx.groups.write(request.group_id, lambda shard: heartbeat(shard, req))
    except KafkaError as exc:
        return failed(exc)
    if result.topics_to_create:
        _create_internal_topics(ctx, request.group_id, result.topics_to_create)
    response = R(throttle_time_ms=0, error_code=0, member_id=result.member_id,
                 member_epoch=result.member_epoch,
                 heartbeat_interval_ms=result.heartbeat_interval_ms,
                 task_offset_interval_ms=result.task_offset_interval_ms,
                 status=[R.Status(status_code=int(code), status_detail=detail)
                         for code, detail in result.status],
                 endpoint_information_epoch=result.endpoint_information_epoch)
    if ctx.api_version >= 1:  # KIP-1071's v1: the lag as a long
        response.acceptable_recovery_lag = result.acceptable_recovery_lag
    else:
        response.acceptable_recovery_lag_legacy = min(result.acceptable_recovery_lag, 2**31 - 1)
    if result.tasks is not None:
        def ids(tasks):
            return [R.TaskIds(subtopology_id=s, partitions=sorted(tasks[s])) for s in
                    sorted(tasks)]
        response.active_tasks = ids(result.tasks.active)
        response.standby_tasks = ids(result.tasks.standby)
        response.warmup_tasks = ids(result.tasks.warmup)
    if result.endpoints is not None:
        response.partitions_by_user_endpoint = [
            R.EndpointToPartitions(
                user_endpoint=R.Endpoint(host=e.host, port=e.port),
                active_partitions=[R.TopicPartition(topic=t, partitions=p) for t, p in active],
                standby_partitions=[R.TopicPartition(topic=t, partitions=p) for t, p in standby])
            for e, active, standby in result.endpoints]
    return response


def _create_internal_topics(ctx, group_id: str, topics: dict) -> None:
    """Kafka's AutoTopicCreationManager for streams groups: the group coordinator creates what
    is missing in the background, of what the principal may create; the members see
    MISSING_INTERNAL_TOPICS until the topics exist."""
    for name, topic in topics.items():
        if ctx.metadata.topic(name) is not None:
            continue
        if not (allowed(ctx, Op.CREATE, ResourceType.CLUSTER)
                or allowed(ctx, Op.CREATE, ResourceType.TOPIC, name)):
            log.info("group %s: not creating internal topic %s: the principal may not create "
                     "it", group_id, name)
            continue
        ctx.groups.create_internal_topic(group_id, topic)
