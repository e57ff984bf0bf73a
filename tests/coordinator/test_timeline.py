"""Timeline maps (kbroker.coordinator.timeline): reverting to any mark gives the state at that
mark, committing forgets what no mark can revert, and a change costs what it changed.

The model is a plain copy of the state taken at every mark; Hypothesis drives random changes
(every mutating dict method, in-place changes after ``touch``, nested maps), marks, reverts and
releases, and the timeline must equal the model's copy after every revert.
"""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.coordinator.timeline import SnapshotRegistry, TimelineDict, TimelineValue


class Box:
    """A value changed in place (as a consumer group is)."""

    def __init__(self, items=()):
        self.items = list(items)

    def copy(self):
        return Box(self.items)

    def __eq__(self, other):
        return isinstance(other, Box) and self.items == other.items

    def __repr__(self):
        return f"Box({self.items})"


def plain(value):
    """A deep plain copy of a timeline structure, for comparing with the model."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, Box):
        return Box(value.items)
    return value


KEYS = st.sampled_from("abcde")
OPS = st.one_of(
    st.tuples(st.just("set"), KEYS, st.integers(0, 9)),
    st.tuples(st.just("del"), KEYS),
    st.tuples(st.just("pop"), KEYS),
    st.tuples(st.just("setdefault"), KEYS, st.integers(0, 9)),
    st.tuples(st.just("update"), st.dictionaries(KEYS, st.integers(0, 9), max_size=3)),
    st.tuples(st.just("clear")),
    st.tuples(st.just("popitem")),
    st.tuples(st.just("box"), KEYS, st.integers(0, 9)),  # touch, then change in place
    st.tuples(st.just("nested"), KEYS, KEYS, st.integers(0, 9)),
    st.tuples(st.just("nested_del"), KEYS, KEYS),
    st.tuples(st.just("value"), st.integers(0, 9)),
    st.tuples(st.just("mark")),
    st.tuples(st.just("revert"), st.integers(0, 20)),
    st.tuples(st.just("release"), st.integers(0, 20)),
    st.tuples(st.just("release_all")),
)


class State:
    def __init__(self):
        self.registry = SnapshotRegistry()
        self.flat = TimelineDict(self.registry)
        self.boxes = TimelineDict(self.registry)
        self.nested = TimelineDict(self.registry)
        self.value = TimelineValue(self.registry, 0)

    def view(self):
        return (plain(self.flat), plain(self.boxes), plain(self.nested), self.value.get())

    def apply(self, op) -> None:
        kind = op[0]
        if kind == "set":
            self.flat[op[1]] = op[2]
        elif kind == "del":
            if op[1] in self.flat:
                del self.flat[op[1]]
            else:
                with pytest.raises(KeyError):
                    del self.flat[op[1]]
        elif kind == "pop":
            self.flat.pop(op[1], None)
        elif kind == "setdefault":
            self.flat.setdefault(op[1], op[2])
        elif kind == "update":
            self.flat.update(op[1])
        elif kind == "clear":
            self.flat.clear()
        elif kind == "popitem":
            if self.flat:
                self.flat.popitem()
        elif kind == "box":
            self.boxes.touch(op[1])
            box = self.boxes.get(op[1])
            if box is None:
                box = self.boxes[op[1]] = Box()
            box.items.append(op[2])
            if len(box.items) > 3:
                del self.boxes[op[1]]
        elif kind == "nested":
            inner = self.nested.get(op[1])
            if inner is None:
                inner = self.nested[op[1]] = TimelineDict(self.registry)
            inner[op[2]] = op[3]
        elif kind == "nested_del":
            inner = self.nested.get(op[1])
            if inner is not None:
                inner.pop(op[2], None)
                if not inner:
                    del self.nested[op[1]]
        elif kind == "value":
            self.value.set(op[1])


@settings(max_examples=300, deadline=None)
@given(st.lists(OPS, max_size=60))
def test_revert_to_any_mark_gives_the_state_at_that_mark(ops):
    state = State()
    saved: dict[int, tuple] = {}  # mark epoch -> the state when it was taken
    epoch = 0
    for op in ops:
        if op[0] == "mark":
            epoch += 1
            state.registry.mark(epoch)
            saved[epoch] = copy.deepcopy(state.view())
        elif op[0] in ("revert", "release"):
            held = state.registry.epochs
            if not held:
                continue
            target = held[op[1] % len(held)]
            if op[0] == "revert":
                state.registry.revert_to(target)
                assert state.view() == saved[target]
                assert state.registry.epochs == [e for e in held if e < target]
            else:
                state.registry.release_before(target)
                assert state.registry.epochs == [e for e in held if e >= target]
        elif op[0] == "release_all":
            state.registry.release_before()
            assert not state.registry.recording and len(state.registry) == 0
        else:
            state.apply(op)
    # Whatever marks are left still revert exactly, oldest last.
    for target in reversed(state.registry.epochs):
        state.registry.revert_to(target)
        assert state.view() == saved[target]


def test_nothing_is_journaled_without_a_mark():
    registry = SnapshotRegistry()
    offsets = TimelineDict(registry)
    for i in range(1000):
        offsets[i] = i
    assert len(registry) == 0


def test_a_change_costs_what_it_changed_not_what_the_map_holds():
    registry = SnapshotRegistry()
    offsets = TimelineDict(registry, {i: i for i in range(100_000)})
    groups = TimelineDict(registry, {g: Box(range(3)) for g in range(10_000)})
    registry.mark(1)
    offsets[7] = -7
    groups.touch(3)
    groups[3].items.append(99)
    groups.touch(3)  # a second change of the same value under the same mark journals nothing
    groups[3].items.append(100)
    assert len(registry) == 2
    registry.revert_to(1)
    assert offsets[7] == 7 and groups[3] == Box(range(3)) and len(registry) == 0


def test_release_keeps_only_what_a_later_mark_may_undo():
    registry = SnapshotRegistry()
    values = TimelineDict(registry)
    registry.mark(10)
    values["a"] = 1
    registry.mark(20)
    values["b"] = 2
    registry.release_before(20)  # the first write committed
    assert registry.epochs == [20] and len(registry) == 1
    registry.revert_to(20)  # the second failed
    assert values == {"a": 1}
    with pytest.raises(KeyError):
        registry.revert_to(10)


def test_marks_must_grow_and_copies_leave_the_timeline():
    registry = SnapshotRegistry()
    registry.mark(5)
    with pytest.raises(ValueError):
        registry.mark(5)
    values = TimelineDict(registry, a=1)
    copied = copy.copy(values)
    assert type(copied) is dict and copied == {"a": 1}
