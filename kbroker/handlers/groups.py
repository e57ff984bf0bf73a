"""The classic group protocol: JoinGroup (key 11) v0-9, SyncGroup (14) v0-5, Heartbeat (12)
v0-4, LeaveGroup (13) v0-5, DescribeGroups (15) v0-6, ListGroups (16) v0-5, DeleteGroups (42) v0-3.

Thin wrappers over :mod:`kbroker.coordinator.group`; the behaviour lives there. Each request is one
operation on the group's shard, answered once its records are committed. Version quirks:
- JoinGroup v0 has no rebalance timeout (the session timeout is used); v4+ new members first get
  MEMBER_ID_REQUIRED with their id (KIP-394); v5+ group.instance.id (KIP-345); v7+ protocol type
  and nullable protocol name (KIP-559); v8+ reason (KIP-800); v9 skip_assignment for a static
  leader rejoining a stable group (KIP-814).
- SyncGroup v5 checks protocol type and name (INCONSISTENT_GROUP_PROTOCOL).
- LeaveGroup v3+ removes a batch of members by member id or instance id (KIP-345).
- DescribeGroups: metadata and assignment bytes only while Stable (Kafka); an unknown group is
  "Dead", and from v6 (KIP-1043) also GROUP_ID_NOT_FOUND.
- ListGroups v4+ filters by state (KIP-518), v5+ by type (KIP-848): "classic" or "consumer"
  (a consumer group's protocol type is "consumer" and its states Empty, Assigning, Reconciling,
  Stable).
- DescribeGroups of a consumer-protocol group: Dead, and from v6 GROUP_ID_NOT_FOUND "Group G is
  not a classic group." (Kafka; the admin client asks ConsumerGroupDescribe).
- DeleteGroups deletes an Empty consumer or share group too (NON_EMPTY_GROUP otherwise); a
  share group's share-partition state is deleted through the persister first.
- ListGroups lists share groups as protocol type and type "share" (Empty or Stable).
- DeleteGroups v3 (KIP-1331) adds a per-group error message, which Kafka 4.4 fills only when its
  streams topology description plugin fails a deletion (GROUP_DELETION_FAILED); it is null here,
  as Kafka's is for GROUP_ID_NOT_FOUND and NON_EMPTY_GROUP.
Not supported: authorized operations (the "not requested" value is returned).
"""

from __future__ import annotations

from kbroker.coordinator.group import admin, heartbeat, leave, sync
from kbroker.coordinator.group.join import JoinRequest, join
from kbroker.coordinator.group.parked import JoinResult, SyncResult
from kbroker.coordinator.group.state import GroupState
from kbroker.handlers import handles, share_group_offsets
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.security.authorizer import (Op, ResourceType, allowed, authorized_operations,
                                         check)

NOT_REQUESTED = -(2**31)


def _shard(ctx, group_id):
    return ctx.groups.shard_for(group_id)


async def _answer(ctx, group_id, op, make, on_error, needs=Op.READ):
    """Run ``op`` on the group's shard; ``make(response)``, or ``make(on_error(error))``.
    The principal needs ``needs`` on the group (Kafka: READ to join, sync, heartbeat, leave)."""
    try:
        check(ctx, needs, ResourceType.GROUP, group_id)
        result = await ctx.groups.write(group_id, op)
    except KafkaError as exc:
        result = on_error(exc.error)
    return make(result)


# --- JoinGroup ---------------------------------------------------------------------------------

@handles("JoinGroup")
def handle_join_group(ctx, request):
    from kbroker.protocol.messages.join_group import JoinGroupResponse as R

    v = ctx.api_version

    def make(result: JoinResult):
        protocol_name = result.protocol_name
        if protocol_name is None and v < 7:
            protocol_name = ""
        members = [R.JoinGroupResponseMember(member_id=mid,
                                             group_instance_id=iid if v >= 5 else None,
                                             metadata=metadata)
                   for mid, iid, metadata in result.members]
        return R(throttle_time_ms=0, error_code=result.error.code,
                 generation_id=result.generation,
                 protocol_type=result.protocol_type if v >= 7 else None,
                 protocol_name=protocol_name, leader=result.leader,
                 skip_assignment=result.skip_assignment if v >= 9 else False,
                 member_id=result.member_id, members=members)

    req = JoinRequest(
        group_id=request.group_id, member_id=request.member_id,
        group_instance_id=request.group_instance_id if v >= 5 else None,
        protocol_type=request.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=request.rebalance_timeout_ms if v >= 1 else
        request.session_timeout_ms,
        client_id=ctx.client_id or "", client_host="/" + ctx.client_host, version=v,
        reason=request.reason if v >= 8 else None)
    return _answer(ctx, request.group_id, lambda shard: join(shard, req), make,
                   lambda error: JoinResult(error, request.member_id))


# --- SyncGroup ---------------------------------------------------------------------------------

@handles("SyncGroup")
def handle_sync_group(ctx, request):
    from kbroker.protocol.messages.sync_group import SyncGroupResponse as R

    v = ctx.api_version

    def make(result: SyncResult):
        ok = result.error is Errors.NONE and v >= 5
        return R(throttle_time_ms=0, error_code=result.error.code,
                 protocol_type=result.protocol_type if ok else None,
                 protocol_name=result.protocol_name if ok else None,
                 assignment=result.assignment)

    assignments = {a.member_id: bytes(a.assignment) for a in request.assignments}
    return _answer(ctx, request.group_id, lambda shard: sync.sync(
        shard, request.group_id, request.generation_id, request.member_id,
        request.group_instance_id if v >= 3 else None, request.protocol_type if v >= 5 else None,
        request.protocol_name if v >= 5 else None, assignments), make, SyncResult)


# --- Heartbeat ---------------------------------------------------------------------------------

@handles("Heartbeat")
def handle_heartbeat(ctx, request):
    from kbroker.protocol.messages.heartbeat import HeartbeatResponse as R

    instance_id = request.group_instance_id if ctx.api_version >= 3 else None
    return _answer(ctx, request.group_id, lambda shard: heartbeat.heartbeat(
        shard, request.group_id, request.generation_id, request.member_id, instance_id),
        lambda error: R(throttle_time_ms=0, error_code=error.code), lambda error: error)


# --- LeaveGroup --------------------------------------------------------------------------------

@handles("LeaveGroup")
def handle_leave_group(ctx, request):
    from kbroker.protocol.messages.leave_group import LeaveGroupResponse as R

    v = ctx.api_version
    if v >= 3:
        identities = [(m.member_id, m.group_instance_id, m.reason if v >= 5 else None)
                      for m in request.members]
    else:
        identities = [(request.member_id, None, None)]

    def make(result):
        top, errors = result
        if v < 3:
            error = top if top is not Errors.NONE else errors[0]
            return R(throttle_time_ms=0, error_code=error.code)
        members = [] if top is not Errors.NONE else [
            R.MemberResponse(member_id=mid, group_instance_id=iid, error_code=e.code)
            for (mid, iid, _), e in zip(identities, errors)]
        return R(throttle_time_ms=0, error_code=top.code, members=members)

    return _answer(ctx, request.group_id,
                   lambda shard: leave.leave(shard, request.group_id, identities), make,
                   lambda error: (error, []))


# --- DescribeGroups ----------------------------------------------------------------------------

@handles("DescribeGroups")
def handle_describe_groups(ctx, request):
    from kbroker.protocol.messages.describe_groups import DescribeGroupsResponse as R

    v = ctx.api_version
    asked = v >= 3 and request.include_authorized_operations
    described = []
    for group_id in request.groups:
        out = R.DescribedGroup(group_id=group_id, error_code=Errors.NONE.code,
                               group_state=GroupState.DEAD.value, protocol_type="",
                               protocol_data="", members=[], authorized_operations=
                               authorized_operations(ctx, ResourceType.GROUP, group_id)
                               if asked else NOT_REQUESTED)
        try:
            check(ctx, Op.DESCRIBE, ResourceType.GROUP, group_id)
            group = admin.describe(_shard(ctx, group_id), group_id)
        except KafkaError as exc:
            out.error_code = exc.error.code
            out.group_state = ""
            if v >= 6:
                out.error_message = exc.message
            described.append(out)
            continue
        if group is None:
            if v >= 6:
                out.error_code = Errors.GROUP_ID_NOT_FOUND.code
                # A consumer-protocol group is described by ConsumerGroupDescribe (Kafka).
                out.error_message = f"Group {group_id} not found."
                try:
                    _shard(ctx, group_id).group_of_type(group_id, "classic")
                except KafkaError as exc:
                    out.error_message = exc.message
            described.append(out)
            continue
        stable = group.is_in(GroupState.STABLE)
        out.group_state = group.state.value
        out.protocol_type = group.protocol_type or ""
        out.protocol_data = (group.protocol_name or "") if stable else ""
        for m in group.members.values():
            out.members.append(R.DescribedGroupMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id if v >= 4 else None,
                client_id=m.client_id, client_host=m.client_host,
                member_metadata=m.metadata(group.protocol_name) if stable else b"",
                member_assignment=m.assignment if stable else b""))
        described.append(out)
    return R(throttle_time_ms=0, groups=described)


# --- ListGroups --------------------------------------------------------------------------------

@handles("ListGroups")
def handle_list_groups(ctx, request):
    from kbroker.protocol.messages.list_groups import ListGroupsResponse as R

    v = ctx.api_version
    states = {s.lower() for s in request.states_filter} if v >= 4 else set()
    types = {t.lower() for t in request.types_filter} if v >= 5 else set()
    error = Errors.NONE
    listed = []
    # Kafka lists every group to a principal with DESCRIBE on the cluster, else those it may
    # describe.
    everything = allowed(ctx, Op.DESCRIBE, ResourceType.CLUSTER)
    for shard in ctx.groups.shards():
        if shard.loading:
            # A shard whose load failed is unavailable, not loading (Kafka's
            # COORDINATOR_NOT_AVAILABLE); its reload retries with backoff.
            error = (Errors.COORDINATOR_NOT_AVAILABLE if shard.load_error is not None
                     else Errors.COORDINATOR_LOAD_IN_PROGRESS)
            continue
        for group_id, protocol_type, state, kind in admin.list_groups(shard, states, types):
            if not everything and not allowed(ctx, Op.DESCRIBE, ResourceType.GROUP, group_id):
                continue
            listed.append(R.ListedGroup(group_id=group_id, protocol_type=protocol_type,
                                        group_state=state if v >= 4 else "",
                                        group_type=kind if v >= 5 else ""))
    return R(throttle_time_ms=0, error_code=error.code, groups=listed)


# --- DeleteGroups ------------------------------------------------------------------------------

@handles("DeleteGroups")
def handle_delete_groups(ctx, request):
    from kbroker.protocol.messages.delete_groups import DeleteGroupsResponse as R

    async def delete_all():
        results = []
        for group_id in request.groups_names:
            if share_group_offsets.is_share_group(ctx, group_id):
                results.append(R.DeletableGroupResult(
                    group_id=group_id, error_code=(await _delete_share(ctx, group_id)).code))
                continue
            error = await _answer(ctx, group_id,
                                  lambda shard, g=group_id: admin.delete_group(shard, g),
                                  lambda e: e, lambda e: e, needs=Op.DELETE)
            results.append(R.DeletableGroupResult(group_id=group_id, error_code=error.code))
        return R(throttle_time_ms=0, results=results)

    return delete_all()


async def _delete_share(ctx, group_id: str) -> Errors:
    try:
        check(ctx, Op.DELETE, ResourceType.GROUP, group_id)
        return await share_group_offsets.delete_share_group(ctx, group_id)
    except KafkaError as exc:
        return exc.error
