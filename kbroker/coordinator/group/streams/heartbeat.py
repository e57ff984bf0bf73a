"""StreamsGroupHeartbeat as a coordinator operation (Kafka's streamsGroupHeartbeat).

One heartbeat, in order:
1. find or create the group (a join, epoch 0, creates it; an empty classic group of that id is
   deleted; any other group is GROUP_ID_NOT_FOUND "Group X is not a streams group.") and the
   member (UNKNOWN_MEMBER_ID for an unknown member that does not join; FENCED_MEMBER_EPOCH for a
   wrong epoch, unless it is the previous one with a subset of the member's tasks);
2. apply the member's changes (process, endpoint, client tags, rack, topology epoch): a changed
   member moves the group epoch;
3. the topology: the first member's is written (StreamsGroupTopology); a lower epoch is stale
   (STALE_TOPOLOGY status); another topology at the same or a higher epoch is INVALID_REQUEST;
4. configure the topology against the topics (:mod:`.topology`) when it is new, not configured
   yet, or the metadata hash of its topics moved; a newly validated topology, a new hash or new
   assignment configs (``num.standby.replicas``) move the group epoch too;
5. a new group waits ``streams.initial.rebalance.delay.ms`` before its first assignment
   (ASSIGNMENT_DELAYED); then, when the group epoch is ahead of the target and
   ``streams.assignment.interval.ms`` has passed, a new target assignment (:mod:`.target`);
6. reconcile the member (:mod:`.reconcile`);
7. (re)arm its session; answer epoch, intervals, tasks (when joining or changed), endpoint
   information (when the member's endpoint epoch is behind), statuses, and the internal topics
   the broker must create (MISSING_INTERNAL_TOPICS).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

from kbroker.coordinator.group import modern
from kbroker.coordinator.group import records as group_records
from kbroker.coordinator.group.streams import membership
from kbroker.coordinator.group.streams import records as rec
from kbroker.coordinator.group.streams import settings, target
from kbroker.coordinator.group.streams.group import StreamsGroup
from kbroker.coordinator.group.streams.member import (JOIN_EPOCH, LEAVE_EPOCH,
                                                      STATIC_LEAVE_EPOCH, Endpoint, MemberState,
                                                      StreamsGroupMember, TaskTuple)
from kbroker.coordinator.group.streams.reconcile import reconcile
from kbroker.coordinator.group.streams.topology import Status, StreamsTopology, configure
from kbroker.coordinator.runtime import CoordinatorResult, now_ms
from kbroker.protocol.errors import Errors, KafkaError

log = logging.getLogger("kbroker.coordinator.group")

INITIAL = "streams-initial-rebalance"
ASSIGN = "streams-assign"


@dataclass
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    endpoint_information_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology: object = None           # the request's Topology, or None
    owned: TaskTuple | None = None    # active, standby, warm-up tasks it reports
    process_id: str | None = None
    user_endpoint: Endpoint | None = None
    client_tags: dict | None = None
    shutdown_application: bool = False
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1
    task_offsets: list | None = None       # [(subtopology, partition, offset)]
    task_end_offsets: list | None = None


@dataclass
class HeartbeatResult:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int = 0
    acceptable_recovery_lag: int = 0
    task_offset_interval_ms: int = 0
    status: list = field(default_factory=list)        # [(Status, detail)]
    tasks: TaskTuple | None = None                    # sent when joining or changed
    endpoint_information_epoch: int = 0
    endpoints: list | None = None                     # [(Endpoint, active, standby)]
    topics_to_create: dict = field(default_factory=dict)


def heartbeat(shard, req: HeartbeatRequest) -> CoordinatorResult:
    if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
        group = membership.streams_group(shard, req.group_id)
        if req.shutdown_application and group.shutdown_request_member_id is None:
            group.shutdown_request_member_id = req.member_id
        return membership.leave(shard, req.group_id, req.member_id, req.instance_id,
                                req.member_epoch,
                                HeartbeatResult(req.member_id, req.member_epoch))
    now = now_ms()
    records: list = []
    committed: list = []
    status: list = []
    gid = req.group_id
    joining = req.member_epoch == JOIN_EPOCH
    group = _group(shard, gid, joining, records, committed)
    was_empty = group.is_empty
    if joining and group.static_member(req.instance_id) is None and \
            req.member_id not in group.members:
        _throw_if_full(shard, group)
    replaced = None  # the static member a rejoining instance replaces
    if req.instance_id is None:
        member = _member(group, req, joining)
    else:
        member, replaced = _static_member(group, req, joining, records)
    updated = _updated(member, req)
    offsets = _task_offsets(group, updated.member_id, req, replaced)
    committed.append(lambda: _set_task_offsets(shard, gid, updated.member_id, offsets))
    bump = False
    if updated != member:
        records.append(rec.member_metadata(gid, updated))
        # A static member's changes move the epoch only when the assignment depends on them.
        bump = req.instance_id is None or member.epoch_relevant_change(updated)
    topology = _topology(group, req, records)
    if topology is not None and updated.topology_epoch < topology.epoch:
        status.append((Status.STALE_TOPOLOGY,
                       f"The member's topology epoch {updated.topology_epoch} is behind the "
                       f"group's topology epoch {topology.epoch}."))
    # --- configured topology ---
    metadata_hash = shard.metadata_hash(topology.required_topics())
    configured = group.configured
    if metadata_hash != group.metadata_hash:
        log.info("group %s (member %s): computed new metadata hash %d", gid, req.member_id,
                 metadata_hash)
        bump = True
    if (configured is None or configured.epoch != topology.epoch
            or configured.metadata_hash != metadata_hash or group.topology is None):
        configured = configure(gid, req.member_id, metadata_hash, topology, shard.image)
    committed.append(lambda: _install_configured(shard, gid, configured))
    validated = -1
    if configured.ready:
        validated = topology.epoch
        if req.owned is not None:
            for kind in (req.owned.active, req.owned.standby, req.owned.warmup):
                _check_tasks(configured.subtopologies, kind)
    if validated != group.validated_topology_epoch:
        bump = True
    configs = settings.assignment_configs(shard, gid)
    if not bump and configs != group.last_assignment_configs:
        log.info("group %s (member %s): assignment configurations changed to %s; rebalancing",
                 gid, req.member_id, configs)
        bump = True
    epoch = group.group_epoch
    if bump:
        epoch += 1
        records.append(rec.group_epoch(gid, epoch, metadata_hash, validated, configs))
        log.info("group %s (member %s): bumped the streams group epoch to %d (metadata hash %d, "
                 "validated topology epoch %d)", gid, req.member_id, epoch, metadata_hash,
                 validated)
    if was_empty:
        delay = settings.initial_rebalance_delay_ms(shard, gid)
        if delay > 0:
            _schedule_once(shard, (INITIAL, gid), delay)
    # --- target assignment ---
    target_epoch, member_target = _update_target(shard, group, epoch, updated, configured,
                                                 configs, now, records, status, replaced)
    # --- reconciliation ---
    if not updated.is_reconciled_to(target_epoch):
        reconciled = reconcile(updated, target_epoch, member_target, group, req.owned)
        if reconciled != updated:
            records.append(rec.current_assignment(gid, reconciled))
            if reconciled.state is MemberState.UNREVOKED_TASKS:
                membership.schedule_rebalance(shard, gid, reconciled.member_id,
                                              reconciled.member_epoch,
                                              reconciled.rebalance_timeout_ms)
            else:
                shard.cancel((membership.REBALANCE, gid, reconciled.member_id))
        updated = reconciled
    membership.schedule_session(shard, gid, updated.member_id)
    if req.shutdown_application and group.shutdown_request_member_id is None:
        log.info("group %s (member %s): shutdown requested for the streams application", gid,
                 updated.member_id)
        group.shutdown_request_member_id = updated.member_id  # the first request stays
        committed.append(lambda: _set_shutdown(shard, gid, updated.member_id))
    # --- the answer ---
    result = HeartbeatResult(updated.member_id, updated.member_epoch,
                             settings.heartbeat_interval_ms(shard, gid),
                             settings.acceptable_recovery_lag(shard, gid),
                             settings.task_offset_interval_ms(shard, gid), status)
    endpoint_epoch = group.endpoint_information_epoch
    tasks_changed = updated.assigned != member.assigned
    if joining or tasks_changed:
        a = updated.assigned
        result.tasks = TaskTuple.of(a.active_ids(), a.standby, a.warmup)
    if updated.user_endpoint != member.user_endpoint or \
            (tasks_changed and updated.user_endpoint is not None):
        endpoint_epoch += 1
    if endpoint_epoch != group.endpoint_information_epoch:
        committed.append(lambda: _set_endpoint_epoch(shard, gid, endpoint_epoch))
    if endpoint_epoch != req.endpoint_information_epoch and configured.ready:
        result.endpoints = endpoints(group, updated, configured, shard.image, replaced)
    exists = shard.find_group(gid, "streams") is not None
    result.endpoint_information_epoch = endpoint_epoch if exists else 0
    if configured.problem is not None:
        result.topics_to_create = configured.topics_to_create
        status.append((configured.problem.status, configured.problem.message))
    if group.shutdown_request_member_id is not None:
        status.append((Status.SHUTDOWN_APPLICATION,
                       f"Streams group member {group.shutdown_request_member_id} encountered a "
                       f"fatal error and requested a shutdown for the entire application."))
    required = [t for t in configs.get("rack.aware.assignment.tags", "").split(",") if t]
    missing = [t for t in required if t not in updated.client_tags]
    if req.api_version >= 1 and missing:
        status.append((Status.MISSING_CLIENT_TAGS,
                       f"Missing required client tags for rack-aware standby assignment: "
                       f"[{', '.join(missing)}]. Configure them via 'client.tag.<tagKey>' in "
                       f"your Streams config."))
    out = CoordinatorResult(records, result)
    out.on_committed = lambda: [fn() for fn in committed]
    return out


def _nested(entries, what: str) -> dict:
    out: dict = {}
    for s, p, offset in entries:
        by_partition = out.setdefault(s, {})
        if p in by_partition:
            raise KafkaError(Errors.INVALID_REQUEST, f"{what} contain a duplicate entry for "
                             f"subtopology {s} and partition {p}.")
        by_partition[p] = offset
    return out


def _task_offsets(group, member_id: str, req: HeartbeatRequest, replaced) -> tuple:
    """The member's task offsets and end offsets after this heartbeat (Kafka's
    MemberTaskOffsets: a list sent replaces the previous one, a null keeps it)."""
    offsets, ends = group.offsets_of(replaced if replaced is not None else member_id)
    if req.task_offsets is not None:
        offsets = _nested(req.task_offsets, "Task offsets")
    if req.task_end_offsets is not None:
        ends = _nested(req.task_end_offsets, "Task offsets")
    return offsets, ends


def _set_task_offsets(shard, gid: str, member_id: str, offsets: tuple) -> None:
    group = shard.find_group(gid, "streams")
    if group is not None:
        if member_id in group.members:
            group.task_offsets[member_id] = offsets
        for gone in [m for m in group.task_offsets if m not in group.members]:
            del group.task_offsets[gone]


def _install_configured(shard, gid: str, configured) -> None:
    group = shard.find_group(gid, "streams")
    if group is not None:
        group.configured = configured


def _set_shutdown(shard, gid: str, member_id: str) -> None:
    group = shard.find_group(gid, "streams")
    if group is not None and group.shutdown_request_member_id is None:
        group.shutdown_request_member_id = member_id


def _set_endpoint_epoch(shard, gid: str, epoch: int) -> None:
    group = shard.find_group(gid, "streams")
    if group is not None:
        group.endpoint_information_epoch = epoch


# --- the group, the member, the topology -----------------------------------------------------------

def _group(shard, gid: str, joining: bool, records: list, committed: list) -> StreamsGroup:
    if not joining:
        return membership.streams_group(shard, gid)
    classic = shard.group(gid)
    if classic is not None and classic.is_empty():
        records.append(group_records.group_metadata_tombstone(gid))
        committed.append(lambda: shard.forget_classic_group(classic))
        log.info("group %s: converted the empty classic group to a streams group", gid)
        return StreamsGroup(gid)
    group = shard.group_of_type(gid, "streams")
    return group if group is not None else StreamsGroup(gid)


def _throw_if_full(shard, group: StreamsGroup) -> None:
    limit = settings.max_size(shard)
    if len(group.members) >= limit:
        raise KafkaError(Errors.GROUP_MAX_SIZE_REACHED,
                         f"The streams group has reached its maximum capacity of {limit} "
                         f"members.")


def _member(group: StreamsGroup, req: HeartbeatRequest, joining: bool) -> StreamsGroupMember:
    member = group.members.get(req.member_id)
    if member is None:
        if not joining:
            raise KafkaError(Errors.UNKNOWN_MEMBER_ID,
                             f"Member {req.member_id} is not a member of group "
                             f"{group.group_id}.")
        log.info("group %s (member %s): member joins the streams group", group.group_id,
                 req.member_id)
        return StreamsGroupMember(req.member_id)
    if joining:
        return member
    _check_epoch(member, req)
    return member


def _static_member(group: StreamsGroup, req: HeartbeatRequest, joining: bool, records: list):
    """(member, the member id it replaces or None) for a static member (KIP-345 semantics, as
    Kafka 4.4's streams groups: a new instance replaces one that left with epoch -2)."""
    gid = group.group_id
    if not joining:
        member = membership.static_member_of(group, req.instance_id, req.member_id)
        _check_epoch(member, req)
        return member, None
    existing = group.static_member(req.instance_id)
    if existing is None:
        log.info("group %s (member %s): static member %s with instance id %s joins the streams "
                 "group", gid, req.member_id, req.member_id, req.instance_id)
        return group.members.get(req.member_id) or \
            StreamsGroupMember(req.member_id, instance_id=req.instance_id), None
    if existing.member_epoch != STATIC_LEAVE_EPOCH:  # the handler logs the refusal, once
        raise KafkaError(Errors.UNRELEASED_INSTANCE_ID,
                         f"Static member {req.member_id} with instance id {req.instance_id} "
                         f"cannot join the group because the instance id is owned by "
                         f"{existing.member_id} member.")
    replacement = replace(existing, member_id=req.member_id, member_epoch=0,
                          previous_member_epoch=0)
    records += rec.remove_member_records(gid, existing.member_id)
    records.append(rec.member_metadata(gid, replacement))
    records.append(rec.target_member(gid, req.member_id, group.target_of(existing.member_id)))
    records.append(rec.current_assignment(gid, replacement))
    log.info("group %s (member %s): static member with instance id %s re-joins the streams "
             "group, replacing member %s", gid, req.member_id, req.instance_id,
             existing.member_id)
    return replacement, existing.member_id


def _check_epoch(member: StreamsGroupMember, req: HeartbeatRequest) -> None:
    epoch = req.member_epoch
    if epoch > member.member_epoch:
        raise KafkaError(Errors.FENCED_MEMBER_EPOCH,
                         f"The streams group member has a greater member epoch ({epoch}) than "
                         f"the one known by the group coordinator ({member.member_epoch}). The "
                         f"member must abandon all its partitions and rejoin.")
    if epoch < member.member_epoch and (epoch != member.previous_member_epoch
                                        or not _owned_subset(req.owned, member)):
        raise KafkaError(Errors.FENCED_MEMBER_EPOCH,
                         f"The streams group member has a smaller member epoch ({epoch}) than "
                         f"the one known by the group coordinator ({member.member_epoch}). The "
                         f"member must abandon all its partitions and rejoin.")


def _owned_subset(owned: TaskTuple | None, member: StreamsGroupMember) -> bool:
    if owned is None:
        return False
    mine = member.assigned
    for have, assigned in ((owned.active, mine.active_ids()), (owned.standby, mine.standby),
                           (owned.warmup, mine.warmup)):
        for s, parts in have.items():
            if not parts <= assigned.get(s, frozenset()):
                return False
    return True


def _updated(member: StreamsGroupMember, req: HeartbeatRequest) -> StreamsGroupMember:
    return replace(
        member,
        instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
        rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
        rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
        else member.rebalance_timeout_ms,
        topology_epoch=req.topology.epoch if req.topology is not None else member.topology_epoch,
        client_id=req.client_id, client_host=req.client_host,
        process_id=req.process_id if req.process_id is not None else member.process_id,
        client_tags=dict(req.client_tags) if req.client_tags is not None
        else member.client_tags,
        # A join sets the endpoint (none clears it); later heartbeats only change it.
        user_endpoint=req.user_endpoint if req.user_endpoint is not None or
        req.member_epoch == JOIN_EPOCH else member.user_endpoint)


def _topology(group: StreamsGroup, req: HeartbeatRequest, records: list) -> StreamsTopology:
    if req.topology is None:
        if group.topology is None:
            raise KafkaError(Errors.INVALID_REQUEST,
                             "The topology is null and the group topology is also null.")
        return group.topology
    wanted = StreamsTopology.from_request(req.topology)
    if group.topology is None:
        log.info("group %s (member %s): member initialized the topology with epoch %d",
                 group.group_id, req.member_id, wanted.epoch)
        records.append(rec.topology(group.group_id, wanted.to_record()))
        return wanted
    if group.topology.epoch > wanted.epoch:
        log.info("group %s (member %s): member joined with stale topology epoch %d",
                 group.group_id, req.member_id, wanted.epoch)
        return group.topology
    if group.topology != wanted:
        raise KafkaError(Errors.INVALID_REQUEST, "Topology updates are not supported yet.")
    return group.topology


def _check_tasks(subtopologies: dict, tasks) -> None:
    for s, parts in tasks.items():
        sub = subtopologies.get(s)
        if sub is None:
            raise KafkaError(Errors.INVALID_REQUEST,
                             f"Subtopology {s} does not exist in the topology.")
        for p in sorted(parts):
            if p < 0 or p >= sub.number_of_tasks:
                raise KafkaError(Errors.INVALID_REQUEST,
                                 f"Task {p} for subtopology {s} is invalid. Number of tasks for "
                                 f"this subtopology: {sub.number_of_tasks}")


# --- target assignment -------------------------------------------------------------------------------

def _schedule_once(shard, key: tuple, delay_ms: int) -> None:
    if not shard.runtime.has_timer(shard.partition_index, key):
        shard.schedule(key, max(delay_ms, 0),
                       lambda s: CoordinatorResult(assign_now(s, key[1], now_ms())))


def _update_target(shard, group, epoch: int, updated, configured, configs, now, records,
                   status, replaced: str | None = None) -> tuple[int, TaskTuple]:
    gid = group.group_id
    if shard.runtime.has_timer(shard.partition_index, (INITIAL, gid)):
        status.append((Status.ASSIGNMENT_DELAYED,
                       "Assignment delayed due to the configured initial rebalance delay."))
        return group.assignment_epoch, TaskTuple()
    current = group.target_of(replaced if replaced is not None and
                              updated.member_id not in group.target else updated.member_id)
    if group.assignment_epoch >= epoch:
        return group.assignment_epoch, current
    interval = settings.assignment_interval_ms(shard, gid)
    if not modern.can_compute_assignment(group.assignment_timestamp, interval, now):
        status.append((Status.ASSIGNMENT_DELAYED,
                       "Assignment delayed due to the configured assignment interval."))
        _schedule_once(shard, (ASSIGN, gid), group.assignment_timestamp + interval - now)
        return group.assignment_epoch, current
    members = dict(group.members)
    if replaced is not None:
        members.pop(replaced, None)
    members[updated.member_id] = updated
    new_records, assignment = target.build(group, epoch, members, configured, configs, now,
                                           {updated.member_id: current})
    records += new_records
    log.info("group %s: computed a new target assignment for epoch %d with the 'sticky' "
             "assignor", gid, epoch)
    return epoch, assignment.get(updated.member_id, TaskTuple())


def assign_now(shard, gid: str, now: int) -> list:
    """A timer's target assignment for the whole group (after the initial delay or the
    assignment interval), when its epoch is ahead."""
    group = shard.find_group(gid, "streams")
    if group is None or not group.members or group.assignment_epoch >= group.group_epoch:
        return []
    interval = settings.assignment_interval_ms(shard, gid)
    if not modern.can_compute_assignment(group.assignment_timestamp, interval, now):
        _schedule_once(shard, (ASSIGN, gid), group.assignment_timestamp + interval - now)
        return []
    if group.configured is None and group.topology is not None:
        group.configured = configure(gid, "", group.metadata_hash, group.topology, shard.image)
    records, _ = target.build(group, group.group_epoch, group.members, group.configured,
                              group.last_assignment_configs, now)
    log.info("group %s: computed a new target assignment for epoch %d with the 'sticky' "
             "assignor", gid, group.group_epoch)
    return records


# --- interactive queries ---------------------------------------------------------------------------

def endpoints(group: StreamsGroup, updated: StreamsGroupMember, configured, image,
              replaced: str | None = None) -> list:
    """[(endpoint, active [(topic, partitions)], standby [...])] of every member with an
    endpoint: the partitions of the source and repartition source topics of its tasks (a static
    member's replaced predecessor left out)."""
    out = []
    members = [m for mid, m in group.members.items()
               if mid != updated.member_id and mid != replaced] + [updated]
    for m in members:
        if m.user_endpoint is None:
            continue
        out.append((m.user_endpoint, _partitions(m.assigned.active_ids(), configured, image),
                    _partitions(m.assigned.standby, configured, image)))
    return out


def _partitions(tasks, configured, image) -> list:
    out = []
    for s in sorted(tasks):
        sub = configured.subtopologies.get(s)
        if sub is None:
            continue
        parts = sorted(tasks[s])
        for topic in sorted(sub.input_topics()):
            existing = image.topic(topic)
            if existing is None:
                continue
            out.append((topic, parts[:existing.num_partitions]))
    return out
