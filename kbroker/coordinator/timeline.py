"""Timeline state: coordinator maps whose uncommitted changes are reverted at the cost of what
they changed (Kafka's ``SnapshotRegistry``/``TimelineHashMap``, written for our runtime).

A shard's durable state lives in :class:`TimelineDict` maps (and :class:`TimelineValue` cells)
that share the shard's :class:`SnapshotRegistry`. While a write waits for its commit, the runtime
holds a *mark* for it (:meth:`SnapshotRegistry.mark`, taken before its records are replayed).
While any mark is held, every change to a timeline map appends one undo entry to the registry's
journal: the map, the key and what the key held before (or that it was missing). Reverting to a
mark (:meth:`SnapshotRegistry.revert_to`: the write failed) undoes the journal back to it, newest
first; committing a write drops its mark (:meth:`SnapshotRegistry.release_before`), and with the
last mark the journal. With no mark held (every write on a single node commits at once, and a
shard's load replays with none) a change costs a dict store and nothing more.

Values stored in a timeline map are either immutable (offsets, transaction metadata, share
states) or objects changed in place (a consumer group): before the first in-place change after a
mark, :meth:`TimelineDict.touch` journals a ``copy()`` of the value, which a revert puts back.
That copy is the cost of the change: one group, never the shard.

Kafka's maps also serve reads at an older epoch (its read operations see the last committed
offset). Our runtime gets the same guarantee another way: an operation without records that runs
while writes wait answers after them, and fails with them (``CoordinatorRuntime.run``), so no
caller is ever answered from state that is not committed.
"""

from __future__ import annotations

MISSING = object()  # a key that was absent, in an undo entry


class SnapshotRegistry:
    """The marks of one shard's pending writes and the journal of changes made since the
    oldest of them."""

    __slots__ = ("_journal", "_marks", "_touched")

    def __init__(self):
        self._journal: list[tuple] = []  # (container, key, previous value or MISSING)
        self._marks: list[tuple[int, int]] = []  # (epoch, journal length then), epochs ascending
        self._touched: set = set()  # (id(map), key) copied by touch() since the latest mark

    @property
    def recording(self) -> bool:
        return bool(self._marks)

    @property
    def epochs(self) -> list[int]:
        return [epoch for epoch, _ in self._marks]

    def __len__(self) -> int:
        """Undo entries held: what reverting to the oldest mark would undo."""
        return len(self._journal)

    def mark(self, epoch: int) -> None:
        """Remember the state as it is now under ``epoch`` (greater than every held mark's)."""
        if self._marks and epoch <= self._marks[-1][0]:
            raise ValueError(f"mark {epoch} is not after the latest mark {self._marks[-1][0]}")
        self._marks.append((epoch, len(self._journal)))
        self._touched = set()

    def revert_to(self, epoch: int) -> None:
        """Put every timeline map back as it was when ``epoch`` was marked; that mark and every
        later one are dropped."""
        position = self._position(epoch)
        start = self._marks[position][1]
        journal = self._journal
        while len(journal) > start:
            container, key, previous = journal.pop()
            container._undo(key, previous)
        del self._marks[position:]
        self._touched = set()

    def release_before(self, epoch: int | None = None) -> None:
        """Drop the marks below ``epoch`` (every mark when None): their writes are committed and
        will never be reverted. The journal keeps only what later marks may still undo."""
        marks = self._marks
        drop = len(marks) if epoch is None else next(
            (i for i, (e, _) in enumerate(marks) if e >= epoch), len(marks))
        if drop == 0:
            return
        del marks[:drop]
        if not marks:
            self._journal.clear()
            self._touched = set()
            return
        cut = marks[0][1]
        if cut:
            del self._journal[:cut]
            self._marks = [(e, p - cut) for e, p in marks]

    def _position(self, epoch: int) -> int:
        for i, (e, _) in enumerate(self._marks):
            if e == epoch:
                return i
        raise KeyError(f"no mark at epoch {epoch}")


class TimelineDict(dict):
    """A dict whose changes the registry journals while a mark is held. Reads are a plain dict's.

    Every mutating method of ``dict`` is routed through ``__setitem__``/``__delitem__`` so none
    escapes the journal."""

    __slots__ = ("_registry",)

    def __init__(self, registry: SnapshotRegistry, *args, **kwargs):
        super().__init__()
        self._registry = registry
        if args or kwargs:
            self.update(*args, **kwargs)

    def __setitem__(self, key, value) -> None:
        registry = self._registry
        if registry._marks:
            registry._journal.append((self, key, dict.get(self, key, MISSING)))
        dict.__setitem__(self, key, value)

    def __delitem__(self, key) -> None:
        registry = self._registry
        if registry._marks:
            registry._journal.append((self, key, dict.__getitem__(self, key)))
        dict.__delitem__(self, key)

    def pop(self, key, *default):
        if dict.__contains__(self, key):
            value = dict.__getitem__(self, key)
            del self[key]
            return value
        if default:
            return default[0]
        raise KeyError(key)

    def popitem(self):
        key, value = next(reversed(self.items()))
        del self[key]
        return key, value

    def setdefault(self, key, default=None):
        if dict.__contains__(self, key):
            return dict.__getitem__(self, key)
        self[key] = default
        return default

    def update(self, *args, **kwargs) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def clear(self) -> None:
        for key in list(self):
            del self[key]

    def __ior__(self, other):
        self.update(other)
        return self

    def __reduce__(self):  # copy/pickle as a plain dict: a copy is outside the timeline
        return (dict, (dict(self),))

    def put_untracked(self, key, value) -> None:
        """Store a value whose lifetime is not the log's, outside the journal: a classic group's
        live object, installed once its record is committed, must not go when a later write
        that did not touch it is reverted."""
        dict.__setitem__(self, key, value)

    def pop_untracked(self, key) -> None:
        """Remove such a value, outside the journal."""
        dict.pop(self, key, None)

    def touch(self, key) -> None:
        """The value under ``key`` is about to change in place: journal a copy of it (once per
        mark), which a revert puts back in its stead."""
        registry = self._registry
        if not registry._marks:
            return
        token = (id(self), key)
        if token in registry._touched:
            return
        registry._touched.add(token)
        value = dict.get(self, key, MISSING)
        registry._journal.append((self, key, value if value is MISSING else value.copy()))

    def _undo(self, key, previous) -> None:
        if previous is MISSING:
            dict.pop(self, key, None)
        else:
            dict.__setitem__(self, key, previous)


class TimelineValue:
    """One journaled value (a shard's scalar beside its maps)."""

    __slots__ = ("_registry", "_value")

    def __init__(self, registry: SnapshotRegistry, value=None):
        self._registry = registry
        self._value = value

    def get(self):
        return self._value

    def set(self, value) -> None:
        registry = self._registry
        if registry._marks:
            registry._journal.append((self, None, self._value))
        self._value = value

    def _undo(self, _key, previous) -> None:
        self._value = previous
