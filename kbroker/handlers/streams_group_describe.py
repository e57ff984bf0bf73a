"""StreamsGroupDescribe (key 89), v0-1: streams groups as their coordinator sees them.

Per group: state (Empty, NotReady, Assigning, Reconciling, Stable), group and target assignment
epochs, the topology (as configured, with the internal topics' partition counts, once it is
ready; else as the members sent it), the assignor (``sticky``), and every member with its epoch,
process, endpoint, client tags, current tasks and target tasks. An empty group id is
INVALID_GROUP_ID; a group that does not exist, or is not a streams group, GROUP_ID_NOT_FOUND
with Kafka's message. DESCRIBE on the group is required (GROUP_AUTHORIZATION_FAILED), and
DESCRIBE on the topology's topics (TOPIC_AUTHORIZATION_FAILED). With ``streams.version`` 0 every
group is answered UNSUPPORTED_VERSION (no message), as Kafka's.

v1's IncludeTopologyDescription (KIP-1331) asks for the description the topology description
plugin stored. kbroker runs without one (see streams_group_topology_description_update), so, as
Kafka 4.4.0 without a plugin, every group described without error says NOT_STORED and carries no
description; a group with an error, or a request that did not ask, says NOT_REQUESTED.
"""

from __future__ import annotations

from kbroker.coordinator.group.streams.assignor import NAME as ASSIGNOR
from kbroker.handlers import handles
from kbroker.handlers.features import streams_groups_enabled
from kbroker.handlers.group_describe import NOT_REQUESTED, find_group
from kbroker.protocol.errors import Errors
from kbroker.security.authorizer import Op, ResourceType, allowed, authorized_operations

# StreamsGroupDescribe v1's TopologyDescriptionStatus: no description recorded for the group.
TOPOLOGY_DESCRIPTION_NOT_STORED = 1


def _ids(R, tasks) -> list:
    return [R.TaskIds(subtopology_id=s, partitions=sorted(tasks[s])) for s in sorted(tasks)]


def _offsets(R, offsets: dict) -> list:
    return [R.TaskOffset(subtopology_id=s, partition=p, offset=offsets[s][p])
            for s in sorted(offsets) for p in sorted(offsets[s])]


def _topic_info(R, t) -> object:
    configs = t.configs.items() if isinstance(t.configs, dict) else t.configs
    return R.TopicInfo(name=t.name, partitions=t.partitions,
                       replication_factor=t.replication_factor or 0,
                       topic_configs=[R.KeyValue(key=k, value=v) for k, v in configs])


def _topology(R, group):
    configured = group.configured
    if configured is not None and configured.ready:
        return R.Topology(epoch=configured.epoch, subtopologies=[
            R.Subtopology(subtopology_id=sid, source_topics=sorted(s.source_topics),
                          repartition_sink_topics=sorted(s.repartition_sink_topics),
                          state_changelog_topics=[_topic_info(R, t) for _, t in
                                                  sorted(s.state_changelog_topics.items())],
                          repartition_source_topics=[_topic_info(R, t) for _, t in
                                                     sorted(s.repartition_source_topics.items())])
            for sid, s in configured.subtopologies.items()])
    topology = group.topology
    if topology is None:
        return None
    return R.Topology(epoch=topology.epoch, subtopologies=[
        R.Subtopology(subtopology_id=s.subtopology_id, source_topics=list(s.source_topics),
                      repartition_sink_topics=list(s.repartition_sink_topics),
                      state_changelog_topics=[_topic_info(R, t) for t in
                                              s.state_changelog_topics],
                      repartition_source_topics=[_topic_info(R, t) for t in
                                                 s.repartition_source_topics])
        for s in topology.subtopologies.values()])


def describe(ctx, R, group_id: str):
    out, _, group = find_group(ctx, R, group_id, "streams")
    if group is None:
        return out
    if group.topology is not None:
        topics = group.topology.required_topics()
        denied = sorted(t for t in topics if not allowed(ctx, Op.DESCRIBE, ResourceType.TOPIC,
                                                         t))
        if denied:
            out.error_code = Errors.TOPIC_AUTHORIZATION_FAILED.code
            out.error_message = f"The described group uses topics that the client is not " \
                                f"authorized to describe: {denied}"
            return out
    out.group_state = group.state.value
    out.group_epoch = group.group_epoch
    out.assignment_epoch = group.assignment_epoch
    out.topology = _topology(R, group)
    out.assignor_name = ASSIGNOR
    for m in group.members.values():
        target = group.target_of(m.member_id)
        offsets, ends = group.offsets_of(m.member_id)
        out.members.append(R.Member(
            member_id=m.member_id, member_epoch=m.member_epoch, instance_id=m.instance_id,
            rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
            topology_epoch=m.topology_epoch, process_id=m.process_id,
            user_endpoint=R.Endpoint(host=m.user_endpoint.host, port=m.user_endpoint.port)
            if m.user_endpoint is not None else None,
            client_tags=[R.KeyValue(key=k, value=v) for k, v in sorted(m.client_tags.items())],
            assignment=R.Assignment(active_tasks=_ids(R, m.assigned.active_ids()),
                                    standby_tasks=_ids(R, m.assigned.standby),
                                    warmup_tasks=_ids(R, m.assigned.warmup)),
            target_assignment=R.Assignment(active_tasks=_ids(R, target.active),
                                           standby_tasks=_ids(R, target.standby),
                                           warmup_tasks=_ids(R, target.warmup)),
            task_offsets=_offsets(R, offsets), task_end_offsets=_offsets(R, ends),
            is_classic=False))
    return out


@handles("StreamsGroupDescribe")
def handle_streams_group_describe(ctx, request):
    from kbroker.protocol.messages.streams_group_describe import \
        StreamsGroupDescribeResponse as R

    if not streams_groups_enabled(ctx):  # streams.version 0: every group, without a message
        return R(throttle_time_ms=0, groups=[
            R.DescribedGroup(group_id=g, error_code=Errors.UNSUPPORTED_VERSION.code,
                             authorized_operations=NOT_REQUESTED) for g in request.group_ids])
    groups = []
    for group_id in request.group_ids:
        described = describe(ctx, R, group_id)
        if request.include_authorized_operations and described.error_code == 0:
            described.authorized_operations = authorized_operations(ctx, ResourceType.GROUP,
                                                                    group_id)
        if request.include_topology_description and described.error_code == 0:
            described.topology_description_status = TOPOLOGY_DESCRIPTION_NOT_STORED
        groups.append(described)
    return R(throttle_time_ms=0, groups=groups)
