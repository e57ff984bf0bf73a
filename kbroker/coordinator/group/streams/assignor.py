"""The ``sticky`` task assignor of streams groups, behaving as Kafka's StickyTaskAssignor.

Input: the members (id -> process id and their current target: active and standby tasks), the
subtopologies (id -> number of tasks, stateful or not) and ``num.standby.replicas``. Output:
member id -> TaskTuple.

Active tasks, in order:
1. each task stays with the member that had it, while that member is under its quota (the
   ceiling of remaining tasks over remaining members, recomputed whenever a member fills it);
2. a task a member held as standby goes to the least loaded such member, under the same quota;
3. what is left goes, by subtopology then partition (a range-like spread), to the least loaded
   process (tasks per member of the process), and there to its least loaded member.

Standby tasks (stateful subtopologies only, ``num.standby.replicas`` per task, never on a
process that already holds the task): first the member that had the task active, then a
candidate (Kafka 4.4: members that had it as standby, then members reporting its state in their
task offsets, the most caught-up first), under the total quota; the rest go to the least loaded
processes. When no process can take a replica, Kafka logs it and the task has fewer standbys.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from kbroker.coordinator.group.streams.member import TaskTuple

log = logging.getLogger("kbroker.coordinator.group")

NAME = "sticky"


class TaskAssignorError(Exception):
    pass


@dataclass
class AssignmentMember:
    process_id: str
    active: dict = field(default_factory=dict)    # subtopology -> partitions (current target)
    standby: dict = field(default_factory=dict)
    task_offsets: dict = field(default_factory=dict)  # subtopology -> {partition: offset sum}


@dataclass
class _Process:
    process_id: str
    members: dict = field(default_factory=dict)   # member id -> task count, in insertion order
    tasks: set = field(default_factory=set)
    active: dict = field(default_factory=dict)    # member id -> set of tasks
    standby: dict = field(default_factory=dict)
    count: int = 0

    @property
    def load(self) -> float:
        return self.count / len(self.members) if self.members else -1.0

    def add(self, member_id: str, task, active: bool) -> int:
        self.count += 1
        self.tasks.add(task)
        (self.active if active else self.standby).setdefault(member_id, set()).add(task)
        self.members[member_id] += 1
        return self.members[member_id]

    def add_to_least_loaded(self, task, active: bool) -> int:
        member_id = min(self.members, key=lambda m: self.members[m])
        return self.add(member_id, task, active)


def _per_member(tasks: int, members: int) -> int:
    return 0 if members == 0 else -(-tasks // members)


class _Quota:
    """Kafka's shrinking quota: once a member reaches it, it leaves the pool with its tasks."""

    def __init__(self, tasks: int, members: int):
        self.tasks, self.members = tasks, members
        self.per_member = _per_member(tasks, members)

    def filled(self, count: int) -> None:
        if count == self.per_member:
            self.members -= 1
            self.tasks -= count
            self.per_member = _per_member(self.tasks, self.members)


def assign(members: dict, subtopologies: dict, num_standby_replicas: int = 0) -> dict:
    """``members``: id -> AssignmentMember; ``subtopologies``: id -> (number of tasks,
    stateful). Returns id -> TaskTuple."""
    processes: dict[str, _Process] = {}
    prev_active, candidates = {}, {}
    for member_id, spec in members.items():
        process = processes.setdefault(spec.process_id, _Process(spec.process_id))
        process.members[member_id] = 0
        for s, parts in spec.active.items():
            for p in parts:
                prev_active[(s, p)] = member_id
        # Standby candidates (Kafka 4.4): previous standbys first, then members reporting the
        # task's state (task offsets), the most caught-up first.
        for s, parts in spec.standby.items():
            for p in parts:
                offset = spec.task_offsets.get(s, {}).get(p, 0)
                candidates.setdefault((s, p), []).append((0, -offset, member_id))
        for s, offsets in spec.task_offsets.items():
            for p, offset in offsets.items():
                if p not in spec.standby.get(s, ()):
                    candidates.setdefault((s, p), []).append((1, -offset, member_id))
    prev_standby = {task: [m for _, _, m in sorted(c, key=lambda x: x[:2])]
                    for task, c in candidates.items()}
    total_active = sum(n for n, _ in subtopologies.values())
    total = total_active + sum(n * num_standby_replicas for n, stateful in subtopologies.values()
                               if stateful)
    active_quota = _Quota(total_active, len(members))
    total_quota = _Quota(total, len(members))

    def process_of(member_id: str) -> _Process:
        return processes[members[member_id].process_id]

    def added(count: int, active: bool) -> None:
        if active:
            active_quota.filled(count)
        total_quota.filled(count)

    def least_loaded_previous(candidates, task=None):
        """In rank order, the first candidate, replaced only by one whose process and member
        are both less loaded; candidates whose process holds ``task`` are skipped."""
        best = None
        best_load = best_member_load = float("inf")
        for member_id in candidates or ():
            process = process_of(member_id)
            if task is not None and task in process.tasks:
                continue
            load, member_load = process.load, process.members[member_id]
            if best is not None and not (load < best_load and member_load < best_member_load):
                continue
            best, best_load, best_member_load = member_id, load, member_load
        return best

    # --- active tasks ---
    active_tasks = [(s, p) for s, (n, _) in subtopologies.items() for p in range(n)]
    active_tasks.sort(key=lambda t: (t[1], t[0]))
    left = []
    for task in active_tasks:
        member_id = prev_active.get(task)
        if member_id is not None and process_of(member_id).members[member_id] < \
                active_quota.per_member:
            added(process_of(member_id).add(member_id, task, True), True)
        else:
            left.append(task)
    remaining = []
    for task in left:
        member_id = least_loaded_previous(prev_standby.get(task))
        if member_id is not None and process_of(member_id).members[member_id] < \
                active_quota.per_member:
            added(process_of(member_id).add(member_id, task, True), True)
        else:
            remaining.append(task)
    remaining.sort()
    order = list(processes)
    for task in remaining:
        if not processes:
            raise TaskAssignorError(f"No process available to assign active task {task}.")
        process = min((processes[pid] for pid in order), key=lambda pr: pr.load)
        added(process.add_to_least_loaded(task, True), True)

    # --- standby tasks ---
    if num_standby_replicas > 0:
        stateful = [(s, p) for s, (n, st) in subtopologies.items() if st for p in range(n)]
        stateful.sort(key=lambda t: (t[1], t[0]), reverse=True)
        to_least_loaded = []
        for task in stateful:
            for i in range(num_standby_replicas):
                member_id = prev_active.get(task)
                if member_id is not None:
                    process = process_of(member_id)
                    if task not in process.tasks and \
                            process.members[member_id] < total_quota.per_member:
                        added(process.add(member_id, task, False), False)
                        continue
                member_id = least_loaded_previous(prev_standby.get(task), task)
                if member_id is not None:
                    process = process_of(member_id)
                    if process.members[member_id] < total_quota.per_member:
                        added(process.add(member_id, task, False), False)
                        continue
                to_least_loaded.append((task, num_standby_replicas - i))
                break
        to_least_loaded.sort(key=lambda x: x[0], reverse=True)
        for task, replicas in to_least_loaded:
            for i in range(replicas):
                candidates = sorted((processes[pid] for pid in order if task not in
                                     processes[pid].tasks), key=lambda pr: pr.load)
                if not candidates:
                    log.warning("Unable to assign %d of %d standby tasks for task [%s_%d]. "
                                "There is not enough available capacity. You should increase "
                                "the number of threads and/or application instances to "
                                "maintain the requested number of standby replicas.",
                                replicas - i, num_standby_replicas, task[0], task[1])
                    break
                added(candidates[0].add_to_least_loaded(task, False), False)

    out = {}
    for member_id in members:
        process = process_of(member_id)
        active, standby = {}, {}
        for s, p in process.active.get(member_id, ()):
            active.setdefault(s, set()).add(p)
        for s, p in process.standby.get(member_id, ()):
            standby.setdefault(s, set()).add(p)
        out[member_id] = TaskTuple.of(active, standby)
    return out
