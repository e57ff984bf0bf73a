"""The consumer-group assignors (``uniform``, ``range``): balance, stickiness, subscriptions."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings, strategies as st

from kbroker.coordinator.group.consumer.assignors import (AssignorError, MemberSpec, range_,
                                                          uniform)

T1, T2, T3 = uuid.UUID(int=1), uuid.UUID(int=2), uuid.UUID(int=3)


def spec(*topics, assignment=None, instance=None):
    return MemberSpec(frozenset(topics), instance, None, assignment or {})


def sizes(result):
    return sorted(sum(len(p) for p in a.values()) for a in result.values())


def owners(result):
    seen = {}
    for member, assignment in result.items():
        for topic, parts in assignment.items():
            for p in parts:
                assert (topic, p) not in seen, f"{topic}-{p} given twice"
                seen[(topic, p)] = member
    return seen


def test_uniform_homogeneous_is_balanced_and_sticky():
    first = uniform({"a": spec(T1)}, {T1: 6}, True)
    assert first == {"a": {T1: frozenset(range(6))}}
    second = uniform({"a": spec(T1, assignment=first["a"]), "b": spec(T1)}, {T1: 6}, True)
    assert sizes(second) == [3, 3]
    assert second["a"][T1] <= first["a"][T1]  # a keeps what it can, b gets the rest
    third = uniform({"a": spec(T1, assignment=second["a"]), "b": spec(T1, assignment=second["b"]),
                     "c": spec(T1)}, {T1: 7}, True)
    assert sizes(third) == [2, 2, 3] and len(owners(third)) == 7
    moved = sum(1 for m in ("a", "b") for p in third[m].get(T1, ()) if p not in second[m][T1])
    assert moved == 0  # a and b only give partitions up: nothing moves between them


def test_uniform_heterogeneous_balances_each_topic_among_its_subscribers():
    result = uniform({"a": spec(T1, T2), "b": spec(T1), "c": spec(T2, T3)},
                     {T1: 4, T2: 4, T3: 2}, False)
    found = owners(result)
    assert len(found) == 10
    assert all(found[(T3, p)] == "c" for p in range(2))
    assert {found[(T1, p)] for p in range(4)} <= {"a", "b"}
    assert max(sizes(result)) - min(sizes(result)) <= 1


def test_range_is_contiguous_and_co_partitioned():
    result = range_({"m1": spec(T1, T2), "m2": spec(T1, T2)}, {T1: 3, T2: 3}, True)
    assert result["m1"] == {T1: frozenset({0, 1}), T2: frozenset({0, 1})}
    assert result["m2"] == {T1: frozenset({2}), T2: frozenset({2})}
    static = range_({"z": spec(T1, instance="i-a"), "a": spec(T1)}, {T1: 2}, True)
    assert static["z"] == {T1: frozenset({0})}  # static members come first


def test_unknown_topic_is_an_assignor_error():
    with pytest.raises(AssignorError):
        uniform({"a": spec(T1)}, {}, True)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.frozensets(st.sampled_from([T1, T2, T3]), min_size=1), min_size=1,
                max_size=8),
       st.integers(1, 12), st.integers(1, 12), st.integers(1, 12))
def test_uniform_assigns_every_subscribed_partition_once(subs, n1, n2, n3):
    counts = {T1: n1, T2: n2, T3: n3}
    members = {f"m{i}": spec(*topics) for i, topics in enumerate(subs)}
    homogeneous = len(set(subs)) == 1
    result = uniform(members, counts, homogeneous)
    found = owners(result)
    wanted = {(t, p) for topics in subs for t in topics for p in range(counts[t])}
    assert set(found) == wanted
    for (topic, _), member in found.items():
        assert topic in members[member].topic_ids
    if homogeneous:
        assert max(sizes(result)) - min(sizes(result)) <= 1
    # Sticky: assigning again from the result moves nothing.
    again = uniform({m: spec(*members[m].topic_ids, assignment=result[m]) for m in members},
                    counts, homogeneous)
    assert again == result
