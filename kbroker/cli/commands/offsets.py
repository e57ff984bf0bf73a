"""rpk's ``--offset`` language: where to begin consuming and, optionally, where to stop.

    start | end          the log start / the log end (also oldest / newest)
    N  or  N:            exactly offset N
    +N                   N after the log start offset
    -N                   N before the log end offset
    :end   :N            (from the start) until the log end as of now / until offset N
    A:B                  any begin form above, then any end form (end, N)
    @T  @T:  @:T  @T1:T2 by timestamp: from T (the first record at or after it), until T2

Timestamps: 13 digits (unix ms), 9 or 10 digits (unix s), ``YYYY-MM-DD`` (UTC),
``YYYY-MM-DDTHH:MM:SS[.fff]Z`` (RFC 3339), a duration ``-1h`` / ``1h30m`` / ``500ms`` (from now;
as T2 after a timestamp T1, from T1), or ``end`` as T2. The end of a range is exclusive: ``3:5``
prints offsets 3 and 4. Every end is turned into one stop offset per partition at start-up.
"""

from __future__ import annotations

import datetime
import re
import time
from dataclasses import dataclass

_DURATION = re.compile(r"(\d+)(ms|hr|h|m|s)")
_NUMBER = re.compile(r"[+-]?\d+")


class OffsetError(ValueError):
    pass


@dataclass(frozen=True)
class Position:
    kind: str  # start, end, offset, after_start, before_end, time
    value: int | None = None


@dataclass(frozen=True)
class OffsetRange:
    begin: Position
    stop: Position | None  # None: keep consuming


def parse(text: str) -> OffsetRange:
    if text.startswith("@"):
        return _parse_times(text[1:])
    begin_text, sep, stop_text = text.partition(":")
    begin = _begin(begin_text)
    if not sep or stop_text == "":
        return OffsetRange(begin, None)
    if stop_text == "end":
        return OffsetRange(begin, Position("end"))
    if stop_text.isdigit():
        return OffsetRange(begin, Position("offset", int(stop_text)))
    raise OffsetError(f"end of range {stop_text!r}: expected end or an offset")


def _begin(text: str) -> Position:
    aliases = {"": "start", "start": "start", "oldest": "start", "end": "end", "newest": "end"}
    if text in aliases:
        return Position(aliases[text])
    if not _NUMBER.fullmatch(text):
        raise OffsetError(f"{text!r}: expected start, end, N, +N, -N, @TIMESTAMP or a range")
    if text[0] == "+":
        return Position("after_start", int(text[1:]))
    if text[0] == "-":
        return Position("before_end", int(text[1:]))
    return Position("offset", int(text))


def _parse_times(text: str) -> OffsetRange:
    now = int(time.time() * 1000)
    first, second = _split_times(text) if ":" in text else (text, None)
    begin = Position("start") if first == "" else Position("time", timestamp(first, now))
    if not second:
        return OffsetRange(begin, None)
    if second == "end":
        return OffsetRange(begin, Position("end"))
    # rpk: a duration as T2 counts from T1 when T1 is a timestamp, else from now
    base = begin.value if begin.kind == "time" and not _is_duration(first) else now
    return OffsetRange(begin, Position("time", timestamp(second, base)))


def _split_times(text: str) -> tuple[str, str]:
    """``T1:T2`` split at the colon that leaves two valid halves (RFC 3339 times hold colons)."""
    for i, char in enumerate(text):
        if char != ":":
            continue
        head, tail = text[:i], text[i + 1:]
        try:
            if head:
                timestamp(head, 0)
            if tail not in ("", "end"):
                timestamp(tail, 0)
        except OffsetError:
            continue
        return head, tail
    raise OffsetError(f"@{text}: expected @T, @T:, @:T or @T1:T2 (T a timestamp or duration)")


def _is_duration(text: str) -> bool:
    return bool(re.fullmatch(r"[+-]?(?:\d+(?:ms|hr|h|m|s))+", text))


def timestamp(text: str, base_ms: int) -> int:
    """Milliseconds since the epoch; a duration is taken relative to ``base_ms``."""
    if text.isdigit() and len(text) == 13:
        return int(text)
    if text.isdigit() and len(text) in (9, 10):
        return int(text) * 1000
    if _is_duration(text):
        sign = -1 if text[0] == "-" else 1
        units = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "hr": 3_600_000}
        return base_ms + sign * sum(int(n) * units[u] for n, u in _DURATION.findall(text))
    for layout in ("%Y-%m-%d", "%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M:%S.%fZ"):
        try:
            moment = datetime.datetime.strptime(text, layout).replace(tzinfo=datetime.timezone.utc)
        except ValueError:
            continue
        return int(moment.timestamp() * 1000)
    raise OffsetError(f"timestamp {text!r}: expected unix ms (13 digits) or s (9-10 digits), "
                      "YYYY-MM-DD, YYYY-MM-DDTHH:MM:SSZ or a duration like -1h")


def resolve(position: Position, bounds: dict, by_time) -> dict:
    """One offset per partition. ``bounds``: partition -> (log start, log end);
    ``by_time(ms)``: partition -> first offset at or after ``ms`` (None past the end)."""
    kind, value = position.kind, position.value
    if kind == "time":
        found = by_time(value)
        return {tp: found.get(tp) if found.get(tp) is not None else end
                for tp, (start, end) in bounds.items()}
    return {tp: {"start": start, "end": end, "offset": value,
                 "after_start": min(start + (value or 0), end),
                 "before_end": max(end - (value or 0), start)}[kind]
            for tp, (start, end) in bounds.items()}
