"""Reading records from stdin with an rpk-style input format (``kbroker topic produce -f``).

The format is applied again and again, one record per match, until the input ends::

    %v\\n          one value per line (the default)
    %k %v\\n       key, a space, value
    %t;%k;%v\\n    topic too (TOPIC may then be left out)
    %p %v\\n       partition, then value
    %h|%v\\n       headers as k=v,k2=v2 (as ``topic consume -f %h`` prints them), then value

Fields: ``%t`` topic, ``%k`` key, ``%v`` value, ``%p`` partition, ``%h`` headers. Everything else
is text that must appear in the input as written; ``\\n``, ``\\t``, ``\\r``, ``\\\\``, ``\\xNN``,
``%%``, ``%{`` and ``%}`` stand for a newline, tab, carriage return, backslash, a byte, ``%``,
``{``, ``}``. A field ends at the text that follows it (a field at the very end takes the rest of
the input). rpk's size-prefixed fields (``%K{4}``, ``%V{big32}``) and value modifiers
(``%v{hex}``) are not implemented and are refused by name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import BinaryIO, Iterator

FIELDS = {"t": "topic", "k": "key", "v": "value", "p": "partition", "h": "headers"}
_UNSUPPORTED = {"T": "topic length", "K": "key length", "V": "value length", "H": "header count"}
_ESCAPES = {"n": b"\n", "t": b"\t", "r": b"\r", "\\": b"\\"}
CHUNK = 1 << 16


class FormatError(ValueError):
    pass


@dataclass
class ParsedRecord:
    topic: str | None = None
    key: bytes | None = None
    value: bytes = b""
    partition: int | None = None
    headers: list[tuple[str, bytes]] = field(default_factory=list)


def compile_format(text: str) -> list[tuple[str, bytes | str]]:
    """``[("text", b"..."), ("field", "key"), ...]``, adjacent texts merged."""
    tokens: list[tuple[str, bytes | str]] = []

    def add_text(chunk: bytes) -> None:
        if tokens and tokens[-1][0] == "text":
            tokens[-1] = ("text", tokens[-1][1] + chunk)
        else:
            tokens.append(("text", chunk))

    i = 0
    while i < len(text):
        char = text[i]
        if char == "%" and i + 1 < len(text):
            code = text[i + 1]
            if code in FIELDS:
                if i + 2 < len(text) and text[i + 2] == "{":
                    raise FormatError(f"-f: modifiers such as %{code}{{...}} are not implemented")
                if tokens and tokens[-1][0] == "field":
                    raise FormatError(f"-f: %{code} follows another field with nothing between "
                                      "them; put a delimiter between fields")
                tokens.append(("field", FIELDS[code]))
            elif code in "%{}":
                add_text(code.encode())
            elif code in _UNSUPPORTED:
                raise FormatError(f"-f: %{code} ({_UNSUPPORTED[code]}, size-prefixed input) is not "
                                  "implemented; use delimiters")
            else:
                raise FormatError(f"-f: unknown field %{code} (one of %t %k %v %p %h)")
            i += 2
        elif char == "\\" and i + 1 < len(text):
            code = text[i + 1]
            if code == "x" and re.fullmatch(r"[0-9a-fA-F]{2}", text[i + 2:i + 4]):
                add_text(bytes([int(text[i + 2:i + 4], 16)]))
                i += 4
                continue
            if code not in _ESCAPES:
                raise FormatError(f"-f: unknown escape \\{code} (\\n \\t \\r \\\\ \\xNN)")
            add_text(_ESCAPES[code])
            i += 2
        else:
            add_text(char.encode())
            i += 1
    if not any(kind == "field" and name == "value" for kind, name in tokens):
        raise FormatError("-f: the format reads no value (%v)")
    return tokens


class _Input:
    def __init__(self, stream: BinaryIO) -> None:
        self.stream, self.buffer, self.eof = stream, b"", False

    def _fill(self) -> bool:
        chunk = b"" if self.eof else self.stream.read(CHUNK)
        self.eof = not chunk
        self.buffer += chunk
        return bool(chunk)

    def at_end(self) -> bool:
        return not self.buffer and not self._fill() and not self.buffer

    def expect(self, text: bytes) -> bool:
        while len(self.buffer) < len(text) and self._fill():
            pass
        if not self.buffer.startswith(text):
            return False
        self.buffer = self.buffer[len(text):]
        return True

    def until(self, delimiter: bytes) -> bytes | None:
        """Bytes up to ``delimiter`` (consumed); None when the input ends first."""
        start = 0
        while (found := self.buffer.find(delimiter, start)) < 0:
            start = max(len(self.buffer) - len(delimiter) + 1, 0)
            if not self._fill():
                return None
        data, self.buffer = self.buffer[:found], self.buffer[found + len(delimiter):]
        return data

    def rest(self) -> bytes:
        while self._fill():
            pass
        data, self.buffer = self.buffer, b""
        return data


def records(tokens, stream: BinaryIO) -> Iterator[ParsedRecord]:
    source = _Input(stream)
    number = 0
    while not source.at_end():
        number += 1
        yield _one(tokens, source, number)
        if tokens[-1][0] == "field":  # the last field took the rest of the input
            return


def _one(tokens, source: _Input, number: int) -> ParsedRecord:
    record = ParsedRecord()
    i = 0
    while i < len(tokens):
        kind, what = tokens[i]
        if kind == "text":  # only a leading text: the others are the delimiters fields end at
            if not source.expect(what):
                raise FormatError(f"record {number}: expected {_show(what)} in the input")
            i += 1
            continue
        last = i + 1 == len(tokens)
        if last:
            data = source.rest()
        else:
            delimiter = tokens[i + 1][1]
            data = source.until(delimiter)
            if data is None:
                # the input may lack the final delimiter (a last line without its newline)
                if i + 2 == len(tokens):
                    data = source.rest()
                else:
                    raise FormatError(f"record {number}: the input ends before {_show(delimiter)}")
        _assign(record, what, data, number)
        i += 1 if last else 2
    return record


def _assign(record: ParsedRecord, name: str, data: bytes, number: int) -> None:
    if name == "value":
        record.value = data
    elif name == "key":
        record.key = data
    elif name == "topic":
        record.topic = data.decode()
    elif name == "partition":
        if not data.strip().isdigit():
            raise FormatError(f"record {number}: partition {_show(data)} is not a number")
        record.partition = int(data)
    else:
        for item in filter(None, data.split(b",")):
            key, sep, value = item.partition(b"=")
            if not sep:
                raise FormatError(f"record {number}: header {_show(item)}: expected key=value")
            record.headers.append((key.decode(), value))


def _show(data: bytes) -> str:
    return repr(data.decode(errors="backslashreplace"))
