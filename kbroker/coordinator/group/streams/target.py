"""A streams group's new target assignment: the sticky assignor over the members (with their
current targets, for stickiness) and the configured topology; the records of what changed.

When the topology is not configured (source topics missing, internal topics not created yet)
every member's target is empty, as in Kafka.
"""

from __future__ import annotations

from kbroker.coordinator.group.streams import assignor
from kbroker.coordinator.group.streams import records as rec
from kbroker.coordinator.group.streams.member import TaskTuple

EMPTY = TaskTuple()


def build(group, epoch: int, members: dict, configured, configs: dict, now: int,
          current: dict | None = None) -> tuple[list, dict]:
    """``members``: the group's members after this operation (id -> member); ``current``: the
    current target of members not in the group's target yet (a static member that replaced its
    predecessor). Returns (records, member id -> TaskTuple)."""
    current = current or {}
    if configured is None or not configured.ready or not members:
        assignment = {mid: EMPTY for mid in members}
    else:
        specs = {}
        for mid, m in members.items():
            now_target = current.get(mid) or group.target_of(mid)
            specs[mid] = assignor.AssignmentMember(m.process_id or mid,
                                                   dict(now_target.active),
                                                   dict(now_target.standby),
                                                   group.offsets_of(mid)[0])
        subtopologies = {sid: (s.number_of_tasks, s.stateful)
                         for sid, s in configured.subtopologies.items()}
        assignment = assignor.assign(specs, subtopologies,
                                     int(configs.get("num.standby.replicas", "0")))
    records = []
    for mid, tasks in assignment.items():
        if group.target.get(mid) != tasks:
            records.append(rec.target_member(group.group_id, mid, tasks))
    records.append(rec.target_metadata(group.group_id, epoch, now))
    return records, assignment
