"""Wire primitives used by the generated codecs in ``messages/``.

Every reader takes ``(buf, pos)`` and returns ``(value, new_pos)``; ``buf`` is a memoryview (or any
bytes-like object). Every writer appends to a ``bytearray``. Lengths read from the wire are checked
against the bytes that remain *before* anything is allocated, so a hostile length prefix costs
nothing (the KAFKA-14063 class of pre-auth memory attacks).

A ``records`` field is special: it decodes as a zero-copy memoryview of the request buffer, and on
encode it is not copied into the output. The writer notes a *splice* (the output position and the
records value) and :func:`join_parts` later interleaves the encoded bytes with the record buffers.
A records value may be ``None``, a bytes-like object, any object with ``__len__`` that the I/O layer
knows how to send (a file region for sendfile), or a list of those.
"""

from __future__ import annotations

import struct
import uuid
from typing import NamedTuple

class DecodeError(ValueError):
    """Raised for any malformed, truncated or hostile input. The only exception decoding raises."""


class EncodeError(ValueError):
    """Raised when a message cannot be written in the requested version."""


ZERO_UUID = uuid.UUID(int=0)

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")

_unpack_i16 = INT16.unpack_from
_unpack_i32 = INT32.unpack_from
_pack_i16 = INT16.pack
_pack_i32 = INT32.pack


# --- varints -----------------------------------------------------------------------------------

def read_uvarint(buf, pos):
    """Unsigned varint of at most 32 bits (Kafka's ByteUtils.readUnsignedVarint)."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    value = b & 0x7F
    shift = 7
    pos += 1
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value & 0xFFFFFFFF, pos  # Java's int arithmetic drops bits past 32
        shift += 7
        if shift > 28:
            raise DecodeError("varint is longer than 5 bytes")


def write_uvarint(out: bytearray, value: int) -> None:
    if value < 0x80:
        out.append(value)
        return
    if value >> 32:
        raise EncodeError(f"unsigned varint out of range: {value}")
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def uvarint_bytes(value: int) -> bytes:
    out = bytearray()
    write_uvarint(out, value)
    return bytes(out)


# --- lengths -----------------------------------------------------------------------------------

def _check_length(buf, pos, n, what):
    if n > len(buf) - pos:
        raise DecodeError(f"{what} length {n} exceeds the {len(buf) - pos} bytes remaining")


def read_array_length(buf, pos, nullable):
    """int32 element count (-1 = null); returns (count or -1, pos)."""
    (n,) = _unpack_i32(buf, pos)
    pos += 4
    if n < 0:
        if n == -1 and nullable:
            return -1, pos
        raise DecodeError(f"invalid array length {n}")
    # Every element takes at least one byte, so a count above the remaining bytes is a lie.
    _check_length(buf, pos, n, "array")
    return n, pos


def read_compact_array_length(buf, pos, nullable):
    n, pos = read_uvarint(buf, pos)
    n -= 1
    if n < 0:
        if nullable:
            return -1, pos
        raise DecodeError("null array in a non-nullable field")
    _check_length(buf, pos, n, "array")
    return n, pos


def check_fixed_array(buf, pos, n, size):
    _check_length(buf, pos, n * size, "array")


# --- strings -----------------------------------------------------------------------------------

def read_string(buf, pos):
    (n,) = _unpack_i16(buf, pos)
    pos += 2
    if n < 0:
        raise DecodeError("null string in a non-nullable field")
    end = pos + n
    _check_length(buf, pos, n, "string")
    return str(buf[pos:end], "utf-8"), end


def read_nullable_string(buf, pos):
    (n,) = _unpack_i16(buf, pos)
    pos += 2
    if n < 0:
        if n == -1:
            return None, pos
        raise DecodeError(f"invalid string length {n}")
    end = pos + n
    _check_length(buf, pos, n, "string")
    return str(buf[pos:end], "utf-8"), end


def read_compact_string(buf, pos):
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        raise DecodeError("null string in a non-nullable field")
    n -= 1
    end = pos + n
    _check_length(buf, pos, n, "string")
    return str(buf[pos:end], "utf-8"), end


def read_compact_nullable_string(buf, pos):
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    n -= 1
    end = pos + n
    _check_length(buf, pos, n, "string")
    return str(buf[pos:end], "utf-8"), end


def write_string(out, value):
    data = value.encode("utf-8")
    if len(data) > 0x7FFF:
        raise EncodeError(f"string of {len(data)} bytes is too long")
    out += _pack_i16(len(data))
    out += data


def write_nullable_string(out, value):
    if value is None:
        out += b"\xff\xff"
    else:
        write_string(out, value)


def write_compact_string(out, value):
    data = value.encode("utf-8")
    write_uvarint(out, len(data) + 1)
    out += data


def write_compact_nullable_string(out, value):
    if value is None:
        out.append(0)
    else:
        write_compact_string(out, value)


# --- bytes -------------------------------------------------------------------------------------

def read_bytes(buf, pos):
    (n,) = _unpack_i32(buf, pos)
    pos += 4
    if n < 0:
        raise DecodeError("null bytes in a non-nullable field")
    end = pos + n
    _check_length(buf, pos, n, "bytes")
    return bytes(buf[pos:end]), end


def read_nullable_bytes(buf, pos):
    (n,) = _unpack_i32(buf, pos)
    pos += 4
    if n < 0:
        if n == -1:
            return None, pos
        raise DecodeError(f"invalid bytes length {n}")
    end = pos + n
    _check_length(buf, pos, n, "bytes")
    return bytes(buf[pos:end]), end


def read_compact_bytes(buf, pos):
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        raise DecodeError("null bytes in a non-nullable field")
    n -= 1
    end = pos + n
    _check_length(buf, pos, n, "bytes")
    return bytes(buf[pos:end]), end


def read_compact_nullable_bytes(buf, pos):
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    n -= 1
    end = pos + n
    _check_length(buf, pos, n, "bytes")
    return bytes(buf[pos:end]), end


def write_bytes(out, value):
    out += _pack_i32(len(value))
    out += value


def write_nullable_bytes(out, value):
    if value is None:
        out += b"\xff\xff\xff\xff"
    else:
        write_bytes(out, value)


def write_compact_bytes(out, value):
    write_uvarint(out, len(value) + 1)
    out += value


def write_compact_nullable_bytes(out, value):
    if value is None:
        out.append(0)
    else:
        write_compact_bytes(out, value)


# --- records (zero-copy) -----------------------------------------------------------------------

def _as_view(buf):
    return buf if isinstance(buf, memoryview) else memoryview(buf)


def read_records(buf, pos):
    (n,) = _unpack_i32(buf, pos)
    pos += 4
    if n < 0:
        if n == -1:
            return None, pos
        raise DecodeError(f"invalid records length {n}")
    end = pos + n
    _check_length(buf, pos, n, "records")
    return _as_view(buf)[pos:end], end


def read_compact_records(buf, pos):
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    n -= 1
    end = pos + n
    _check_length(buf, pos, n, "records")
    return _as_view(buf)[pos:end], end


def records_size(value) -> int:
    """Byte size of a records value: bytes-like, a sized object (file region), or a list of those."""
    if isinstance(value, list):
        return sum(records_size(part) for part in value)
    if isinstance(value, memoryview):
        return value.nbytes
    return len(value)


def write_records(out, value, splices, compact):
    if value is None:
        if compact:
            out.append(0)
        else:
            out += b"\xff\xff\xff\xff"
        return
    size = records_size(value)
    if compact:
        write_uvarint(out, size + 1)
    else:
        out += _pack_i32(size)
    if size:
        splices.append((len(out), value))


def join_parts(out: bytearray, splices: list) -> list:
    """Interleave the encoded bytes with the record buffers noted while writing (no copies)."""
    if not splices:
        return [out]
    view = memoryview(out)
    parts = []
    start = 0
    for position, value in splices:
        if position > start:
            parts.append(view[start:position])
        if isinstance(value, list):
            parts.extend(value)
        else:
            parts.append(value)
        start = position
    if start < len(out):
        parts.append(view[start:])
    return parts


# --- uuid --------------------------------------------------------------------------------------

def read_uuid(buf, pos):
    end = pos + 16
    if end > len(buf):
        raise DecodeError("truncated uuid")
    return uuid.UUID(bytes=bytes(buf[pos:end])), end


def write_uuid(out, value):
    out += value.bytes


# --- tagged fields -----------------------------------------------------------------------------

def read_tag_header(buf, pos):
    """Returns (tag, size, pos) for one tagged field; the size is bounded by what remains."""
    tag, pos = read_uvarint(buf, pos)
    size, pos = read_uvarint(buf, pos)
    _check_length(buf, pos, size, "tagged field")
    return tag, size, pos


def read_tag_count(buf, pos):
    n, pos = read_uvarint(buf, pos)
    # Each tagged field takes at least two bytes (tag and size).
    _check_length(buf, pos, 2 * n, "tagged field section")
    return n, pos


def read_unknown_tags(buf, pos):
    """The tag section of a struct that has no known tagged fields: every tag is kept as raw
    bytes so it can be written back. Returns (list of (tag, bytes) or None, pos)."""
    n, pos = read_tag_count(buf, pos)
    if n == 0:
        return None, pos
    unknown = []
    for _ in range(n):
        tag, size, pos = read_tag_header(buf, pos)
        end = pos + size
        unknown.append((tag, bytes(buf[pos:end])))
        pos = end
    return unknown, pos


def write_unknown_tags(out, unknown):
    if unknown:
        write_tagged_fields(out, list(unknown))
    else:
        out.append(0)


def write_tagged_fields(out, tagged):
    """``tagged`` is a list of (tag, encoded bytes); Kafka requires ascending tag order."""
    tagged.sort(key=lambda item: item[0])
    write_uvarint(out, len(tagged))
    for tag, data in tagged:
        write_uvarint(out, tag)
        write_uvarint(out, len(data))
        out += data


# Exceptions that a decoder may hit on hostile input; the generated entry points turn them all
# into DecodeError.
DECODE_FAILURES = (struct.error, IndexError, UnicodeDecodeError, OverflowError, TypeError)
ENCODE_FAILURES = (struct.error, OverflowError, TypeError, AttributeError, UnicodeEncodeError)


# --- entry points shared by every generated class ----------------------------------------------

class _Unset:
    __slots__ = ()

    def __repr__(self):
        return "<unset>"


_UNSET = _Unset()


def _repr(obj) -> str:
    fields = ", ".join(f"{name}={getattr(obj, name)!r}" for name in obj.FIELD_NAMES)
    return f"{type(obj).__qualname__}({fields})"


def _read_at(cls, buf, pos: int, version: int):
    """Decode one message of ``cls`` at ``pos``; returns (message, position after it)."""
    try:
        return cls._read(buf, pos, version)
    except DecodeError:
        raise
    except DECODE_FAILURES as exc:
        raise DecodeError(f"cannot decode {cls.__qualname__} v{version}: {exc}") from None


def _decode(cls, buf, version: int):
    """Decode a message that starts at the beginning of ``buf`` (trailing bytes are ignored)."""
    return _read_at(cls, buf, 0, version)[0]


def _encode(self, version: int) -> list:
    """Encode into a list of buffers; record buffers are passed through, not copied."""
    out = bytearray()
    splices: list = []
    try:
        self._write(out, version, splices)
    except EncodeError:
        raise
    except ENCODE_FAILURES as exc:
        raise EncodeError(f"cannot encode {type(self).__qualname__} v{version}: {exc}") from exc
    return join_parts(out, splices)


def _to_bytes(self, version: int) -> bytes:
    return b"".join(_encode(self, version))


class FieldSpec(NamedTuple):
    """How a generated class describes one field (for tests and tools, not for encoding)."""

    attr: str
    type: str  # element type for arrays: int32, string, records, uuid, ... or a struct name
    is_array: bool
    versions: tuple
    nullable_versions: tuple | None
    tagged_versions: tuple | None
    tag: int | None
    ignorable: bool
    struct: type | None
