"""A streams-group member's reconciliation toward its target tasks (Kafka's
CurrentAssignmentBuilder for streams): revoke first, then assign what is free.

- STABLE: at the target epoch nothing changes; behind it, compute the next assignment.
- UNREVOKED_TASKS: wait until the member no longer reports the tasks it must give up (the
  owned tasks of its heartbeat); then move to epoch + 1 and compute the next assignment.
- UNRELEASED_TASKS: compute again: tasks still held elsewhere may be free now.
- UNKNOWN: fence, unless the member reports it owns nothing.

Computing: kept = owned ∩ target, to revoke = owned − target, to assign = target − kept − the
tasks another process still holds (an active task anybody holds as active, or this process
holds in any role; a standby or warm-up task this process holds as active, standby or warm-up).
Active tasks keep their assignment epochs; newly assigned ones get the target epoch.
"""

from __future__ import annotations

from kbroker.coordinator.group.streams.member import (NO_TASKS, AssignedTasks, MemberState,
                                                      StreamsGroupMember, TaskTuple, tasks,
                                                      tasks_with_epochs)
from kbroker.protocol.errors import Errors, KafkaError


def reconcile(member: StreamsGroupMember, target_epoch: int, target: TaskTuple, group,
              owned: TaskTuple | None) -> StreamsGroupMember:
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next(member, member.member_epoch, target_epoch, target, group, owned)
        return member
    if state is MemberState.UNREVOKED_TASKS:
        if owned is None or owned.contains_any(member.pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, group, owned)
    if state is MemberState.UNRELEASED_TASKS:
        return _next(member, member.member_epoch, target_epoch, target, group, owned)
    if owned is None or not owned.is_empty:
        raise KafkaError(Errors.FENCED_MEMBER_EPOCH,
                         "The streams group member is in a unknown state. The member must "
                         "abandon all its tasks and rejoin.")
    return _next(member, target_epoch, target_epoch, target, group, owned)


def _next(member, epoch: int, target_epoch: int, target: TaskTuple, group, owned):
    pid = member.process_id

    def active_unreleased(s, p):
        return (group.current_active_process(s, p) is not None
                or pid in group.current_processes("standby", s, p)
                or pid in group.current_processes("warmup", s, p))

    def other_unreleased(s, p):
        return (group.current_active_process(s, p) == pid
                or pid in group.current_processes("standby", s, p)
                or pid in group.current_processes("warmup", s, p))

    kept_a, revoke_a, assign_a, unreleased = {}, {}, {}, False
    for s in set(target.active) | set(member.assigned.active):
        current = member.assigned.active.get(s, {})
        wanted = target.active.get(s, frozenset())
        kept = {p: e for p, e in current.items() if p in wanted}
        gone = {p: e for p, e in current.items() if p not in kept}
        new = {p: target_epoch for p in wanted if p not in kept}
        blocked = [p for p in new if active_unreleased(s, p)]
        for p in blocked:
            del new[p]
        unreleased |= bool(blocked)
        for out, value in ((kept_a, kept), (revoke_a, gone), (assign_a, new)):
            if value:
                out[s] = value
    result = {}
    for kind in ("standby", "warmup"):
        kept_k, revoke_k, assign_k = {}, {}, {}
        current_all = getattr(member.assigned, kind)
        wanted_all = getattr(target, kind)
        for s in set(current_all) | set(wanted_all):
            current = current_all.get(s, frozenset())
            wanted = wanted_all.get(s, frozenset())
            kept = current & wanted
            gone = current - kept
            new = {p for p in wanted - kept if not other_unreleased(s, p)}
            unreleased |= len(new) != len(wanted - kept)
            for out, value in ((kept_k, kept), (revoke_k, gone), (assign_k, new)):
                if value:
                    out[s] = value
        result[kind] = (kept_k, revoke_k, assign_k)
    to_revoke = AssignedTasks(tasks_with_epochs(revoke_a), tasks(result["standby"][1]),
                              tasks(result["warmup"][1]))
    assigned = AssignedTasks(tasks_with_epochs(kept_a), tasks(result["standby"][0]),
                             tasks(result["warmup"][0]))
    to_assign = AssignedTasks(tasks_with_epochs(assign_a), tasks(result["standby"][2]),
                              tasks(result["warmup"][2]))
    if not to_revoke.is_empty and (owned is None or owned.contains_any(to_revoke)):
        return member.with_epoch(epoch, state=MemberState.UNREVOKED_TASKS, assigned=assigned,
                                 pending_revocation=to_revoke)
    if not to_assign.is_empty:
        state = MemberState.UNRELEASED_TASKS if unreleased else MemberState.STABLE
        return _moved(member, target_epoch, state, assigned.merge(to_assign))
    if unreleased:
        return _moved(member, target_epoch, MemberState.UNRELEASED_TASKS, assigned)
    return _moved(member, target_epoch, MemberState.STABLE, assigned)


def _moved(member, epoch: int, state, assigned) -> StreamsGroupMember:
    """Kafka's updateMemberEpoch: the previous epoch becomes the one it had."""
    return member.with_epoch(epoch, state=state, assigned=assigned, pending_revocation=NO_TASKS)
