"""The sticky task assignor of streams groups (Kafka's StickyTaskAssignor): balanced active
tasks, stickiness to the previous owner (active, then standby), a range-like first assignment,
standby replicas never on the process holding the active task, and fewer standbys when there is
no room."""

from __future__ import annotations

from kbroker.coordinator.group.streams.assignor import AssignmentMember, assign


def active_count(result):
    return {m: sum(len(p) for p in t.active.values()) for m, t in result.items()}


def all_active(result):
    return sorted((s, p) for t in result.values() for s, parts in t.active.items() for p in parts)


def test_one_member_gets_every_task():
    result = assign({"a": AssignmentMember("p1")}, {"0": (3, False), "1": (2, True)})
    assert {s: sorted(p) for s, p in result["a"].active.items()} == {"0": [0, 1, 2], "1": [0, 1]}
    assert not result["a"].standby


def test_tasks_are_balanced_and_range_like():
    members = {m: AssignmentMember(f"p-{m}") for m in "abc"}
    result = assign(members, {"0": (6, False)})
    assert sorted(active_count(result).values()) == [2, 2, 2]
    assert all_active(result) == [("0", p) for p in range(6)]


def test_previous_owner_keeps_its_tasks():
    members = {"a": AssignmentMember("p1", active={"0": {0, 1}}),
               "b": AssignmentMember("p2", active={"0": {2, 3}}),
               "c": AssignmentMember("p3")}
    result = assign(members, {"0": (6, False)})
    assert active_count(result) == {"a": 2, "b": 2, "c": 2}
    assert result["a"].active["0"] == {0, 1} and result["b"].active["0"] == {2, 3}
    assert result["c"].active["0"] == {4, 5}


def test_quota_moves_tasks_off_an_overloaded_member():
    members = {"a": AssignmentMember("p1", active={"0": {0, 1, 2, 3}}),
               "b": AssignmentMember("p2")}
    result = assign(members, {"0": (4, False)})
    assert active_count(result) == {"a": 2, "b": 2}
    assert result["a"].active["0"] <= {0, 1, 2, 3}


def test_previous_standby_becomes_active():
    members = {"a": AssignmentMember("p1", standby={"0": {0}}),
               "b": AssignmentMember("p2")}
    result = assign(members, {"0": (2, True)})
    assert 0 in result["a"].active["0"]


def test_standby_replicas_on_other_processes():
    members = {"a": AssignmentMember("p1"), "b": AssignmentMember("p2")}
    result = assign(members, {"0": (2, True), "1": (2, False)}, num_standby_replicas=1)
    for m, tasks in result.items():
        for s, parts in tasks.standby.items():
            assert s == "0"  # only stateful subtopologies have standbys
            assert not parts & tasks.active.get(s, set())
    standbys = sorted((s, p) for t in result.values() for s, ps in t.standby.items() for p in ps)
    assert standbys == [("0", 0), ("0", 1)]


def test_no_standby_on_the_same_process():
    # Two members of one process: a standby there would share the active task's process.
    members = {"a": AssignmentMember("p1"), "b": AssignmentMember("p1")}
    result = assign(members, {"0": (2, True)}, num_standby_replicas=1)
    assert all(not t.standby for t in result.values())
    assert all_active(result) == [("0", 0), ("0", 1)]


def test_previous_active_owner_gets_the_standby():
    members = {"a": AssignmentMember("p1", active={"0": {0}}),
               "b": AssignmentMember("p2", standby={"0": {0}})}
    # "b" had 0 as standby: with a fresh quota it gets 0 active only if "a" is full; here "a"
    # keeps 0 and "b" gets 1, and the standby of 0 goes to "b", of 1 to "a".
    result = assign(members, {"0": (2, True)}, num_standby_replicas=1)
    assert result["a"].active["0"] == {0} and result["b"].active["0"] == {1}
    assert result["b"].standby["0"] == {0} and result["a"].standby["0"] == {1}


def test_standby_goes_to_the_member_with_the_most_caught_up_state():
    # Kafka 4.4: members reporting a task's state (task offsets) are standby candidates, the
    # highest offset sum first; a previous standby still comes first.
    members = {"a": AssignmentMember("p1", active={"0": {0}}),
               "b": AssignmentMember("p2", task_offsets={"0": {0: 10}}),
               "c": AssignmentMember("p3", task_offsets={"0": {0: 500}})}
    result = assign(members, {"0": (1, True)}, num_standby_replicas=1)
    assert result["a"].active["0"] == {0}
    assert result["c"].standby == {"0": frozenset({0})} and not result["b"].standby
    members["b"].standby = {"0": {0}}
    result = assign(members, {"0": (1, True)}, num_standby_replicas=1)
    assert result["b"].standby == {"0": frozenset({0})} and not result["c"].standby
