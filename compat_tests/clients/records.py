"""The record shapes every client adapter speaks."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Rec:
    """A record to produce. ``timestamp`` None lets the client pick (CreateTime = now)."""

    value: bytes | None
    key: bytes | None = None
    headers: tuple = ()
    partition: int | None = None
    timestamp: int | None = None


@dataclass(frozen=True)
class Ack:
    """A delivery acknowledgement the client received (offset/timestamp None if not reported)."""

    partition: int
    offset: int | None
    timestamp: int | None = None
    value: bytes | None = None


@dataclass(frozen=True)
class Failed:
    """A record the client reported as not delivered; ``error`` is what the client said."""

    error: object


@dataclass(frozen=True)
class Got:
    """A consumed record; ``timestamp_type`` is "create" or "append". ``topic`` and
    ``leader_epoch`` (when the client reports it) do not take part in comparisons."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple
    timestamp: int
    timestamp_type: str
    topic: str | None = field(default=None, compare=False)
    leader_epoch: int | None = field(default=None, compare=False)


class Unsupported(Exception):
    """The client cannot do what was asked (e.g. kcat and per-record timestamps)."""


def as_rec(item) -> Rec:
    """A Rec from a Rec, a (key, value) pair or a bare value."""
    if isinstance(item, Rec):
        return item
    if isinstance(item, tuple):
        return Rec(key=item[0], value=item[1])
    return Rec(value=item)


def start_position(start) -> str | int:
    """"beginning", "end" or an offset."""
    if start in ("beginning", "end") or isinstance(start, int):
        return start
    raise ValueError(f"start must be 'beginning', 'end' or an offset, not {start!r}")


class Deadline:
    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds

    def left(self, low: float = 0.0, high: float = float("inf")) -> float:
        return max(low, min(high, self.end - time.monotonic()))

    def __bool__(self) -> bool:
        """True while time is left."""
        return time.monotonic() < self.end


def no_partitions(topic: str) -> Exception:
    return RuntimeError(f"topic {topic} not found in metadata before the timeout")
