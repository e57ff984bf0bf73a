"""Java properties files (``java.util.Properties`` syntax)."""

from __future__ import annotations

from typing import Iterable

from kbroker.config.types import ConfigError

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> Iterable[str]:
    """Join continued lines (odd number of trailing backslashes); drop blanks and comments."""
    pending: str | None = None
    for natural in text.splitlines():
        line = natural.lstrip(" \t\f")
        if pending is None:
            if not line or line[0] in "#!":
                continue  # comment lines never continue, whatever they end with
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending = (pending or "") + line[:-1]
            continue
        yield (pending or "") + line
        pending = None
    if pending is not None:
        yield pending


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 == len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2:i + 6]
            if len(digits) != 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise ConfigError(f"malformed \\uxxxx escape in {text!r}")
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    """Parse ``java.util.Properties`` text: ``key=value``, ``key: value`` or ``key value``;
    ``#``/``!`` comments; backslash line continuations; ``\\t \\n \\uXXXX`` escapes."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        i, n = 0, len(line)
        while i < n and line[i] not in "=: \t\f":
            i += 2 if line[i] == "\\" else 1
        key = line[:i]
        while i < n and line[i] in " \t\f":
            i += 1
        if i < n and line[i] in "=:":
            i += 1
            while i < n and line[i] in " \t\f":
                i += 1
        props[_unescape(key)] = _unescape(line[i:])
    return props

