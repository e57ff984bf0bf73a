"""A structure-aware fuzzer for the broker's wire protocol, shared by tests/server/test_fuzz.py
(bounded) and tools/fuzz_broker.py (long runs).

Frames come from the generated message classes, for every advertised api and version: a valid
request with random field values, then mutated (one field set to an extreme value and re-encoded,
or bytes flipped, cut, inserted, or a length inside overwritten with a lie), plus random frames and
frames whose size prefix lies. :class:`FuzzSession` sends them over a real socket to a real broker
and checks after each that the broker still answers (a valid ApiVersions "sentinel" behind the
frame gets its answer, or the connection was closed and a new one works).

Fields that would make a valid request slow rather than wrong (timeouts, waits) or create
resources at scale (partition counts) are kept small: the fuzzer looks for crashes and tracebacks,
not for how long the broker may legitimately wait.
"""

from __future__ import annotations

import random
import socket
import struct
import uuid

from kbroker.protocol import messages
from kbroker.protocol.messages import ADVERTISED, API_BY_KEY
from kbroker.protocol.messages.headers import ResponseHeader
from tests.frames import encode_request, request_frame

# The value range of each integer type of the message schemas (the Hypothesis strategies too).
INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
_SMALL = ("timeout", "wait", "partitions", "count", "replication_factor", "interval", "delay")
SENTINEL_ID = 0x5E171E1


def _in(versions, version) -> bool:
    return versions is not None and versions[0] <= version <= versions[1]


class FrameMaker:
    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    # --- values --------------------------------------------------------------------------------

    def _int(self, type_name: str, attr: str) -> int:
        lo, hi = INT_RANGES[type_name]
        if any(word in attr for word in _SMALL):
            return self.rng.choice((0, 1, 2, 3, -1))
        return self.rng.choice((0, 1, -1, 2, lo, hi, self.rng.randint(lo, hi),
                                self.rng.randint(-5, 100)))

    def _primitive(self, type_name: str, attr: str):
        rng = self.rng
        if type_name in INT_RANGES:
            return self._int(type_name, attr)
        if type_name == "bool":
            return rng.random() < 0.5
        if type_name == "float64":
            return rng.choice((0.0, -1.0, 1e308, rng.random()))
        if type_name == "string":
            return rng.choice(("", "fuzz", "__consumer_offsets", "a" * 300, "t\u00e9\u2603",
                               "bad name!", "..", "x" * rng.randint(0, 40)))
        if type_name in ("bytes", "records"):
            return bytes(rng.getrandbits(8) for _ in range(rng.choice((0, 1, 12, 61, 200))))
        if type_name == "uuid":
            return rng.choice((uuid.UUID(int=0), uuid.UUID(int=rng.getrandbits(128))))
        raise AssertionError(type_name)

    def _field(self, spec, version: int, depth: int):
        def element():
            if spec.struct is not None:
                return self.message(spec.struct, version, depth + 1)
            return self._primitive(spec.type, spec.attr)
        if _in(spec.nullable_versions, version) and self.rng.random() < 0.1:
            return None
        if spec.is_array:
            return [element() for _ in range(self.rng.choice((0, 1, 2, 3) if depth < 2 else (0, 1)))]
        return element()

    def message(self, cls, version: int, depth: int = 0):
        kwargs = {spec.attr: self._field(spec, version, depth)
                  for spec in cls.FIELDS if _in(spec.versions, version)}
        return cls(**kwargs)

    # --- frames --------------------------------------------------------------------------------

    def api(self) -> tuple[int, int]:
        api_key = self.rng.choice(sorted(ADVERTISED))
        lo, hi = ADVERTISED[api_key]
        return api_key, self.rng.randint(max(lo, API_BY_KEY[api_key].valid_versions[0]), hi)

    def encode(self, api_key: int, version: int, body, correlation_id: int) -> bytes:
        return encode_request(api_key, version, body, correlation_id, "fuzz")

    def valid(self, correlation_id: int) -> tuple[str, bytes]:
        api_key, version = self.api()
        cls = messages.request_class(api_key)
        for _ in range(5):
            try:
                body = self.message(cls, version)
                return f"{API_BY_KEY[api_key].name} v{version}", \
                    self.encode(api_key, version, body, correlation_id)
            except (ValueError, TypeError, OverflowError, struct.error):
                continue  # a value this version cannot carry: draw again
        return "ApiVersions v0", self.encode(18, 0, messages.request_class(18)(), correlation_id)

    def field_mutation(self, correlation_id: int) -> tuple[str, bytes]:
        """A valid request with one top-level field pushed to an extreme, re-encoded."""
        api_key, version = self.api()
        cls = messages.request_class(api_key)
        specs = [s for s in cls.FIELDS if _in(s.versions, version)]
        for _ in range(5):
            try:
                body = self.message(cls, version)
                if specs:
                    spec = self.rng.choice(specs)
                    if spec.is_array:
                        value = getattr(body, spec.attr) or []
                        setattr(body, spec.attr, value * self.rng.choice((0, 5, 50)))
                    elif spec.type in INT_RANGES:
                        lo, hi = INT_RANGES[spec.type]
                        if not any(word in spec.attr for word in _SMALL):
                            setattr(body, spec.attr, self.rng.choice((lo, hi, -1, 0)))
                    elif spec.type in ("string", "bytes", "records"):
                        setattr(body, spec.attr, None if self.rng.random() < 0.5 else
                                ("z" * 5000 if spec.type == "string" else b"\xff" * 5000))
                return f"{API_BY_KEY[api_key].name} v{version} field {specs and spec.attr}", \
                    self.encode(api_key, version, body, correlation_id)
            except (ValueError, TypeError, OverflowError, AttributeError, struct.error):
                continue
        return self.valid(correlation_id)

    def byte_mutation(self, correlation_id: int) -> tuple[str, bytes]:
        what, data = self.valid(correlation_id)
        data = bytearray(data)
        rng = self.rng
        kind = rng.choice(("flip", "cut", "insert", "lie"))
        if kind == "flip":
            for _ in range(rng.randint(1, 8)):
                position = rng.randrange(8, len(data)) if len(data) > 8 else 0
                data[position] = rng.getrandbits(8)
        elif kind == "cut":
            del data[rng.randint(8, max(8, len(data))):]
        elif kind == "insert":
            position = rng.randint(8, max(8, len(data)))
            data[position:position] = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 16)))
        elif len(data) >= 12:  # a length or count inside the body lies
            position = rng.randrange(8, len(data) - 3)
            data[position:position + 4] = struct.pack(">i", rng.choice(
                (0x7FFFFFFF, -2, 0x10000000, 65536, len(data) * 4)))
        return f"{what} {kind}", bytes(data)

    def random_frame(self, correlation_id: int) -> tuple[str, bytes]:
        rng = self.rng
        api_key, version = self.api() if rng.random() < 0.8 else (rng.getrandbits(16) - 32768,
                                                                  rng.getrandbits(16) - 32768)
        body = bytes(rng.getrandbits(8) for _ in range(rng.choice((0, 3, 30, 300))))
        return "random", struct.pack(">hhi", api_key, version, correlation_id) + body

    def next(self, correlation_id: int) -> tuple[str, bytes, bool]:
        """(description, wire bytes, size prefix lies: more declared than sent)."""
        roll = self.rng.random()
        if roll < 0.05:
            what, data = self.valid(correlation_id)
            declared = self.rng.choice((len(data) + 1, len(data) + 100_000, 100 * 1024 * 1024,
                                        0x7FFFFFFF, -1))
            return f"{what} size lies ({declared})", struct.pack(">i", declared) + data, True
        if roll < 0.25:
            what, data = self.valid(correlation_id)
        elif roll < 0.55:
            what, data = self.field_mutation(correlation_id)
        elif roll < 0.85:
            what, data = self.byte_mutation(correlation_id)
        else:
            what, data = self.random_frame(correlation_id)
        return what, struct.pack(">i", len(data)) + data, False


def sentinel() -> bytes:
    return request_frame(18, 0, messages.request_class(18)(), SENTINEL_ID, "fuzz-sentinel")


class FuzzSession:
    """Send frames to ``host:port``; after each, make sure the broker still answers."""

    def __init__(self, host: str, port: int, seed: int, timeout: float = 20.0):
        self.address = (host, port)
        self.maker = FrameMaker(seed)
        self.timeout = timeout
        self.sock: socket.socket | None = None
        self.frames = 0
        self.closed_by_broker = 0
        self._sentinel = sentinel()

    def _connect(self) -> socket.socket:
        if self.sock is None:
            self.sock = socket.create_connection(self.address, timeout=self.timeout)
        return self.sock

    def _drop(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def _recv_exactly(self, n: int) -> bytes | None:
        chunks, have = [], 0
        while have < n:
            chunk = self.sock.recv(min(n - have, 1 << 20))
            if not chunk:
                return None
            chunks.append(chunk)
            have += len(chunk)
        return b"".join(chunks)

    def _answered_through_sentinel(self) -> bool:
        """Read answers until the sentinel's; False when the broker closed the connection."""
        while True:
            try:
                head = self._recv_exactly(4)
            except ConnectionResetError:
                return False
            if head is None:
                return False
            body = self._recv_exactly(struct.unpack(">i", head)[0])
            if body is None:
                return False
            if ResponseHeader.decode(body, 0).correlation_id == SENTINEL_ID:
                return True

    def step(self) -> str:
        """Send one frame; returns its description. Raises if the broker stops answering."""
        correlation_id = self.frames % 1_000_000
        what, data, lies = self.maker.next(correlation_id)
        sock = self._connect()
        self.frames += 1
        try:
            if lies:  # the broker waits for bytes that never come: hang up
                sock.sendall(data)
                self._drop()
                return what
            sock.sendall(data + self._sentinel)
        except (BrokenPipeError, ConnectionResetError):
            self.closed_by_broker += 1
            self._drop()
            return what
        if not self._answered_through_sentinel():
            self.closed_by_broker += 1
            self._drop()
            # A closed connection is a fine answer to a bad frame; a new one must be served.
            self._connect().sendall(self._sentinel)
            if not self._answered_through_sentinel():
                raise AssertionError(f"the broker does not answer after: {what}")
        return what
