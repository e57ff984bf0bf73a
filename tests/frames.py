"""Request frames as a client writes them, encoded with the generated codecs, for tests and tools
that put raw bytes on a broker's socket (pipelining, limits, fuzzing, connection benchmarks)."""

from __future__ import annotations

import struct

from kbroker.protocol import messages
from kbroker.protocol.messages.headers import RequestHeader


def encode_request(api_key: int, version: int, body, correlation_id: int,
                   client_id: str = "test") -> bytes:
    """Request header (the version ``api_key``/``version`` takes) and body, without the size."""
    header = RequestHeader(request_api_key=api_key, request_api_version=version,
                           correlation_id=correlation_id, client_id=client_id)
    return header.to_bytes(messages.request_header_version(api_key, version)) + \
        body.to_bytes(version)


def request_frame(api_key: int, version: int, body, correlation_id: int,
                  client_id: str = "test") -> bytes:
    """``encode_request`` behind its int32 size: one frame ready for ``sendall``."""
    data = encode_request(api_key, version, body, correlation_id, client_id)
    return struct.pack(">i", len(data)) + data


def read_frame(sock) -> bytes | None:
    """The next response frame (without its size) from a blocking socket, or None once the
    broker closed the connection."""
    def exactly(n):
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                return None
            data += chunk
        return data
    head = exactly(4)
    return None if head is None else exactly(struct.unpack(">i", head)[0])
