"""One client connection: size-prefixed framing in, ordered responses out.

Reading uses ``asyncio.BufferedProtocol``: the socket reads straight into our buffer, frames are
cut as memoryviews, and a large frame gets a buffer of its own so that its bytes (usually records)
are received once and never copied again. A frame longer than ``socket.request.max.bytes`` (or a
negative size) closes the connection with a log line, as Kafka does.

Ordering: requests are handled in the order they arrive and their responses are written in the
same order (Kafka's per-connection guarantee, which clients rely on to match correlation ids and
to pipeline). A handler may answer at once or later (a long-poll fetch, a produce waiting for
acks); later answers wait in ``_pending`` behind earlier ones, but handling of the next requests
goes on meanwhile. Responses are written with ``writelines``; file regions (fetched log data) go
to the socket with ``loop.sendfile`` from a writer task, except small ones (up to 64 KiB per
response), which are read into the response: cheaper than sendfile's set-up, one write.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import struct

log = logging.getLogger("kbroker.connection")

_SIZE = struct.Struct(">i")
_RECV_SIZE = 256 * 1024
# Frames up to this size are parsed from the shared receive buffer; bigger ones get their own.
_DEDICATED_FRAME = 64 * 1024


# File regions up to this many bytes per response are read (pread) into the response instead
# of sent with loop.sendfile: sendfile's fixed cost (pause reading, wait for an empty buffer,
# fstat, a separate write) is more than copying a few KiB, and a parked fetch woken by a small
# produce sends just that, so it sets the end-to-end latency. The budget is per response, so a
# fetch of many partitions never copies more than this; the rest goes by sendfile.
_INLINE_REGION_BYTES = 64 * 1024


def _inline_small_regions(parts):
    """``parts`` as buffers when its file regions hold at most the inline budget, else None."""
    if sum(len(part) for part in parts
           if not isinstance(part, (bytes, bytearray, memoryview))) > _INLINE_REGION_BYTES:
        return None
    return [part if isinstance(part, (bytes, bytearray, memoryview)) else part.read()
            for part in parts]


class Closed(Exception):
    """The handler asks for the connection to be closed without a response."""


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, server, listener_name: str | None = None):
        self._server = server
        self.listener_name = listener_name
        self._max_frame = server.max_request_size
        self._buf = bytearray(_RECV_SIZE)
        self._view = memoryview(self._buf)
        self._start = 0  # first unparsed byte in _buf
        self._end = 0  # end of received bytes in _buf
        self._frame: bytearray | None = None  # dedicated buffer of a large frame being received
        self._frame_view: memoryview | None = None
        self._frame_filled = 0
        self._pending: collections.deque = collections.deque()  # responses in request order
        self._writer: asyncio.Task | None = None
        self._can_write = asyncio.Event()
        self._can_write.set()
        self.transport = None
        self.peer = "?"
        self.closed = False

    # --- asyncio callbacks ---------------------------------------------------------------------

    def connection_made(self, transport):
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self._server.connections.add(self)

    def connection_lost(self, exc):
        self.closed = True
        self._server.connections.discard(self)
        for item in self._pending:
            if isinstance(item, asyncio.Future):
                item.cancel()
        self._pending.clear()
        if self._writer is not None:
            self._writer.cancel()

    def pause_writing(self):
        self._can_write.clear()

    def resume_writing(self):
        self._can_write.set()

    def get_buffer(self, sizehint):
        if self._frame is not None:
            return self._frame_view[self._frame_filled:]
        if self._end == len(self._buf):
            self._compact()
        return self._view[self._end:]

    def buffer_updated(self, nbytes):
        if self._frame is not None:
            self._frame_filled += nbytes
            if self._frame_filled == len(self._frame):
                frame = self._frame_view
                self._frame = self._frame_view = None
                self._handle_frame(frame)
            return
        self._end += nbytes
        self._parse_frames()

    def eof_received(self):
        return False

    # --- framing -------------------------------------------------------------------------------

    def _compact(self):
        remaining = self._end - self._start
        if remaining and self._start:
            self._buf[:remaining] = self._view[self._start:self._end]
        self._start, self._end = 0, remaining

    def _parse_frames(self):
        view = self._view
        while not self.closed:
            available = self._end - self._start
            if available < 4:
                break
            (size,) = _SIZE.unpack_from(self._buf, self._start)
            if size < 0 or size > self._max_frame:
                log.warning("closing connection from %s: request size %d is outside 0..%d "
                            "(socket.request.max.bytes)", self.peer, size, self._max_frame)
                self.close()
                return
            if available - 4 >= size:
                begin = self._start + 4
                self._start = begin + size
                # Small frames are copied out so the receive buffer can be reused at once.
                self._handle_frame(memoryview(bytes(view[begin:self._start])))
                continue
            if size > _DEDICATED_FRAME:
                # Receive the rest of a large frame straight into a buffer of its own.
                frame = bytearray(size)
                have = available - 4
                frame[:have] = view[self._start + 4:self._end]
                self._start = self._end = 0
                self._frame, self._frame_view, self._frame_filled = frame, memoryview(frame), have
                return
            if self._start + 4 + size > len(self._buf):
                self._compact()
            break
        if self._start == self._end:
            self._start = self._end = 0

    # --- requests and responses ----------------------------------------------------------------

    def _handle_frame(self, frame: memoryview):
        try:
            result = self._server.handle_frame(frame, self)
        except Closed:
            self.close()
            return
        if result is None:  # no response (acks=0 produce)
            return
        if not self._pending and not isinstance(result, asyncio.Future):
            try:
                parts = _inline_small_regions(result)
            except OSError as exc:  # the log was truncated under the region
                log.warning("closing connection from %s: %s", self.peer, exc)
                self.close()
                return
            if parts is not None:
                self.transport.writelines(parts)
                return
        self._pending.append(result)
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write_pending())

    async def _write_pending(self):
        loop = asyncio.get_running_loop()
        pending = self._pending
        try:
            while pending and not self.closed:
                item = pending[0]
                if isinstance(item, asyncio.Future):
                    try:
                        parts = await item
                    except Closed:
                        self.close()
                        return
                    except asyncio.CancelledError:
                        raise
                    except Exception:
                        log.exception("request from %s failed; closing the connection", self.peer)
                        self.close()
                        return
                else:
                    parts = item
                if parts is not None:
                    await self._send(loop, parts)
                # Only now: while this response is being sent, later ones must queue behind it.
                pending.popleft()
        except (ConnectionError, asyncio.CancelledError):
            pass

    async def _send(self, loop, parts):
        buffered = []
        inline_budget = _INLINE_REGION_BYTES
        for part in parts:
            if isinstance(part, (bytes, bytearray, memoryview)):
                buffered.append(part)
                continue
            if len(part) <= inline_budget:
                inline_budget -= len(part)
                buffered.append(part.read())
                continue
            if buffered:
                self.transport.writelines(buffered)
                buffered = []
            # A file region: sendfile waits for the transport's buffer to drain first.
            await loop.sendfile(self.transport, part.file, part.position, len(part))
        if buffered:
            self.transport.writelines(buffered)
        if not self._can_write.is_set():
            await self._can_write.wait()

    def close(self):
        if not self.closed:
            self.closed = True
            if self.transport is not None:
                self.transport.close()
