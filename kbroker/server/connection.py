"""One client connection: size-prefixed framing in, ordered responses out.

Reading uses ``asyncio.BufferedProtocol``: the socket reads straight into a receive buffer, frames
are cut from it, and a large frame gets a buffer of its own so that its bytes (usually records)
are received once. That buffer grows as the bytes arrive (doubling, up to the declared size), so a
client that declares a large frame and sends little costs little. A frame longer than
``socket.request.max.bytes`` (or a negative size) closes the connection with a log line, as Kafka
does.

Memory of an idle connection: every read lands in one shared 256 KiB buffer (sized for throughput)
and is parsed before the read callback returns; only a connection left with a partial frame keeps
a buffer of its own (from a small pool) until the frame completes. An idle connection holds only
its objects (a few KiB).

Backpressure: requests read but not answered are "in flight". Reading pauses
(``transport.pause_reading``) while this connection has too many requests or bytes in flight,
while its responses are not being read by the client (the transport's write buffer is full), or
while the broker-wide ``queued.max.requests`` / ``queued.max.request.bytes`` are reached
(:mod:`kbroker.server.limits`) and this connection has requests of its own in flight; it resumes
when answers go out. Kafka is stricter still: it reads the next request only after answering the
previous one.

Ordering: requests are handled in the order they arrive and their responses are written in the
same order (Kafka's per-connection guarantee, which clients rely on to match correlation ids and
to pipeline). A handler may answer at once or later (a long-poll fetch, a produce waiting for
acks); later answers wait in ``_pending`` behind earlier ones, but handling of the next requests
goes on meanwhile. Responses are written with ``writelines``; file regions (fetched log data) go
to the socket with ``loop.sendfile`` from a writer task, except small ones (up to 64 KiB per
response), which are read into the response: cheaper than sendfile's set-up, one write.

Security (a listener's :class:`~kbroker.server.authenticator.ListenerSecurity`): on a TLS listener
the transport is already TLS when ``connection_made`` runs (the acceptor did the handshake), the
principal comes from the client certificate if one was sent, and file regions are read into
memory and written in pieces, since ``sendfile`` cannot encrypt. On a SASL listener frames go to
the authenticator, capped at ``sasl.server.max.receive.size``, until it calls
:meth:`KafkaConnection.authenticated`. A PLAINTEXT listener takes none of these branches.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import struct
import threading
import time

from kbroker.handlers.session import ClientSession

log = logging.getLogger("kbroker.connection")

_SIZE = struct.Struct(">i")
_RECV_SIZE = 256 * 1024
# Frames up to this size are parsed from the shared receive buffer; bigger ones get their own.
_DEDICATED_FRAME = 64 * 1024
# Per-connection bounds on requests read but not answered. Clients pipeline a handful (Java's
# max.in.flight.requests.per.connection is 5); librdkafka's default is unbounded.
_MAX_IN_FLIGHT = 32
# Every read lands in one buffer per thread: frames are handled (or copied out) before the read
# callback returns, so no other connection of the same event loop can read in between. Only a
# partial frame left at the end moves to a buffer of the connection's own, sized to what it holds
# and grown as more arrives. Per thread, not per process: brokers run in-process side by side,
# each on its own loop and thread (a 3-broker test cluster), and a buffer shared between them
# was overwritten by one broker's read while another parsed it (lost and garbled requests).


class _Landing(threading.local):
    def __init__(self):
        self.buf = bytearray(_RECV_SIZE)
        self.view = memoryview(self.buf)


_landing = _Landing()
_OWN_MIN = 1024
# A TLS connection writes file regions through memory in pieces of this size. Measured (tools/
# bench_security.py, broker CPU per GB fetched over SSL): 1 MiB pieces cost ~2.1 CPU-s/GB,
# 256 KiB ~1.3: what one send() does not take is copied into the transport's buffer and
# shifted down after every later send, so pieces larger than a socket send cost extra copies.
_TLS_CHUNK = 256 * 1024
ANONYMOUS = "User:ANONYMOUS"


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
    def __init__(self, server, listener_name: str | None = None, security=None,
                 authenticator=None):
        self._server = server
        self._limits = server.connection_limits
        self.listener_name = listener_name
        self._max_frame = server.max_request_size
        self._max_frame_key = "socket.request.max.bytes"
        self._frame_handler = server.handle_frame
        self._security = security
        self.tls = security is not None and security.ssl_context is not None
        self.principal = ANONYMOUS
        self.token_authenticated = False  # authenticated with a delegation token (KIP-48)
        self.session = ClientSession()  # handlers' per-connection state (produce order)
        if authenticator is not None:
            self._frame_handler = authenticator.handle
            self._max_frame = min(self._max_frame, security.max_receive_size)
            self._max_frame_key = "sasl.server.max.receive.size, before authentication"
        self._buf: bytearray | None = None  # receive buffer, lent from the pool while in use
        self._view: memoryview | None = None
        self._start = 0  # first unparsed byte in _buf
        self._end = 0  # end of received bytes in _buf
        self._frame: bytearray | None = None  # dedicated buffer of a large frame being received
        self._frame_view: memoryview | None = None
        self._frame_size = 0
        self._frame_filled = 0
        # (response parts or future, request size) in request order
        self._pending: collections.deque = collections.deque()
        self._in_flight_bytes = 0
        self._writer: asyncio.Task | None = None
        self._can_write = asyncio.Event()
        self._can_write.set()
        self._reading_paused = False
        self._throttle_timer: asyncio.TimerHandle | None = None  # client quotas: muted until
        self.transport = None
        self.peer = "?"
        self.ip = "?"
        self.port: int | None = None
        self.client_id: str | None = None  # from its ApiVersions request (the console shows them)
        self.client_software: tuple[str, str] | None = None  # (name, version), KIP-511
        self.connected_at = 0.0  # wall-clock seconds
        self.last_active = 0.0
        self.closed = False

    # --- asyncio callbacks ---------------------------------------------------------------------

    def connection_made(self, transport):
        self.transport = transport
        peer = transport.get_extra_info("peername")
        if peer:
            self.ip = peer[0]
            self.port = peer[1]
            self.peer = f"{peer[0]}:{peer[1]}"
        self.connected_at = time.time()
        self.last_active = asyncio.get_running_loop().time()
        self._server.connections.add(self)
        self._limits.opened(self)
        if self.tls:
            self._tls_principal()

    def _tls_principal(self):
        """Kafka's SSL principal: the mapped certificate subject, else ANONYMOUS. A SASL_SSL
        connection authenticates again through SASL, whose principal replaces this one."""
        cert = self.transport.get_extra_info("peercert")
        if not cert or not cert.get("subject"):
            return
        from kbroker.security.principal import MappingError, subject_name

        name = subject_name(cert)
        try:
            self.principal = f"User:{self._security.principal_mapper.name(name)}"
        except MappingError as exc:
            self._security.failures.failed(self.ip, self._security.name, str(exc))
            self.close()

    def authenticated(self, principal: str, frame_handler=None):
        """SASL succeeded: serve requests from now on, with the normal frame limit. A session that
        expires (KIP-368) keeps its authenticator in front (``frame_handler``)."""
        self.principal = principal
        self._frame_handler = frame_handler or self._server.handle_frame
        self._max_frame = self._server.max_request_size
        self._max_frame_key = "socket.request.max.bytes"

    def reauthenticating(self):
        """A re-authentication (KIP-368) began: frames are capped as before authentication until
        :meth:`authenticated` is called again."""
        self._max_frame = min(self._server.max_request_size, self._security.max_receive_size)
        self._max_frame_key = "sasl.server.max.receive.size, during re-authentication"

    def connection_lost(self, exc):
        self.closed = True
        self._server.connections.discard(self)
        self._limits.closed(self)
        telemetry = getattr(self._server, "client_metrics", None)
        if telemetry is not None:  # its client instance goes with it, as in Kafka
            telemetry.disconnected(self)
        # (built or not: a connection that never reached a share group builds nothing)
        share = getattr(getattr(self._server, "coordinators", None), "share_partitions", None)
        if share is not None:  # Kafka drops the connection's share sessions and their locks
            share.connection_closed(self)
        for item, size in self._pending:
            if isinstance(item, asyncio.Future):
                item.cancel()
            self._limits.request_done(size)
        self._pending.clear()
        self._in_flight_bytes = 0
        if self._writer is not None:
            self._writer.cancel()
        if self._throttle_timer is not None:
            self._throttle_timer.cancel()
        self._release_buffer()
        self._frame = self._frame_view = None

    def pause_writing(self):
        self._can_write.clear()
        self.update_reading()

    def resume_writing(self):
        self._can_write.set()
        self.update_reading()

    def get_buffer(self, sizehint):
        if self._frame is not None:
            if self._frame_filled == len(self._frame):
                self._grow_frame()
            return self._frame_view[self._frame_filled:]
        if self._buf is None:
            self._buf, self._view = _landing.buf, _landing.view
            self._start = self._end = 0
        elif self._end == len(self._buf):
            self._compact()
            if self._end == len(self._buf):
                self._own_buffer(min(2 * len(self._buf), _RECV_SIZE))
        return self._view[self._end:]

    def buffer_updated(self, nbytes):
        self.last_active = asyncio.get_running_loop().time()
        if self._frame is not None:
            self._frame_filled += nbytes
            if self._frame_filled == self._frame_size:
                frame = self._frame_view
                self._frame = self._frame_view = None
                self._handle_frame(frame)
            return
        self._end += nbytes
        self._parse_frames()

    def eof_received(self):
        if self._buf is _landing.buf:
            self._buf = self._view = None
        return False

    # --- framing -------------------------------------------------------------------------------

    def _compact(self):
        remaining = self._end - self._start
        if remaining and self._start:
            self._buf[:remaining] = self._view[self._start:self._end]
        self._start, self._end = 0, remaining

    def _release_buffer(self):
        self._buf = self._view = None
        self._start = self._end = 0

    def _own_buffer(self, capacity: int):
        """Move the unparsed bytes to a new buffer of this connection's own."""
        remaining = self._end - self._start
        buf = bytearray(max(capacity, remaining))
        buf[:remaining] = self._view[self._start:self._end]
        self._buf, self._view = buf, memoryview(buf)
        self._start, self._end = 0, remaining

    def _grow_frame(self):
        # Doubling keeps copies amortised and memory at most twice what has arrived.
        grown = bytearray(min(self._frame_size, 2 * len(self._frame)))
        grown[:self._frame_filled] = self._frame_view[:self._frame_filled]
        self._frame, self._frame_view = grown, memoryview(grown)

    def _parse_frames(self):
        view = self._view
        while not self.closed and not self._reading_paused:
            available = self._end - self._start
            if available < 4:
                break
            (size,) = _SIZE.unpack_from(self._buf, self._start)
            if size < 0 or size > self._max_frame:
                log.warning("closing connection from %s: request size %d is outside 0..%d "
                            "(%s)", self.peer, size, self._max_frame, self._max_frame_key)
                self.close()
                return
            if available - 4 >= size:
                begin = self._start + 4
                self._start = begin + size
                # Small frames are copied out so the receive buffer can be reused at once.
                self._handle_frame(memoryview(bytes(view[begin:self._start])))
                continue
            if size > _DEDICATED_FRAME:
                # Receive the rest of a large frame into a buffer of its own, grown as it fills.
                have = available - 4
                frame = bytearray(min(size, max(2 * have, _DEDICATED_FRAME)))
                frame[:have] = view[self._start + 4:self._end]
                self._start = self._end
                self._frame, self._frame_view = frame, memoryview(frame)
                self._frame_size, self._frame_filled = size, have
                break
            if self._start + 4 + size > len(self._buf):
                self._compact()
            break
        if self._buf is None:
            return
        if self._start == self._end:
            self._release_buffer()
        elif self._buf is _landing.buf:  # a partial frame stays: move it to a buffer of our own
            self._own_buffer(max(_OWN_MIN, 2 * (self._end - self._start)))

    # --- backpressure --------------------------------------------------------------------------

    def _must_pause(self) -> bool:
        if not self._can_write.is_set() or self._throttle_timer is not None:
            return True
        if len(self._pending) >= _MAX_IN_FLIGHT or self._in_flight_bytes >= self._max_frame:
            return True
        # Only connections with requests of their own in flight wait for the broker-wide queue:
        # parked requests (long-poll fetches) count in it, and the producers that would complete
        # them must still be read.
        if self._pending and self._limits.queue_full():
            self._limits.wait_for_queue(self)
            return True
        return False

    # --- client quotas: a throttled client's channel is muted (kbroker.server.quotas) ----------

    def throttle(self, delay_s: float) -> None:
        """Read nothing more from this client for ``delay_s`` (Kafka mutes a throttled channel;
        its response still goes out meanwhile)."""
        loop = asyncio.get_running_loop()
        until = loop.time() + delay_s
        if self._throttle_timer is not None:
            if self._throttle_timer.when() >= until:
                return
            self._throttle_timer.cancel()
        self._throttle_timer = loop.call_at(until, self._throttle_ended)
        self.update_reading()

    def _throttle_ended(self) -> None:
        self._throttle_timer = None
        self.update_reading()

    def update_reading(self):
        """Pause or resume reading from the socket after the in-flight counts changed."""
        if self.closed or self.transport is None:
            return
        if self._must_pause():
            if not self._reading_paused:
                self._reading_paused = True
                self.transport.pause_reading()
        elif self._reading_paused:
            self._reading_paused = False
            self.transport.resume_reading()
            if self._buf is not None:
                self._parse_frames()  # frames that arrived before the pause

    # --- requests and responses ----------------------------------------------------------------

    def _handle_frame(self, frame: memoryview):
        try:
            result = self._frame_handler(frame, self)
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
        size = len(frame)
        self._pending.append((result, size))
        self._in_flight_bytes += size
        self._limits.request_queued(size)
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write_pending())
        self.update_reading()

    async def _write_pending(self):
        loop = asyncio.get_running_loop()
        pending = self._pending
        try:
            while pending and not self.closed:
                item, size = pending[0]
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
                if self.closed:
                    return
                # Only now: while this response is being sent, later ones must queue behind it.
                pending.popleft()
                self._in_flight_bytes -= size
                self._limits.request_done(size)
                self.last_active = loop.time()
                self.update_reading()
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
            if self.tls:
                await self._write_region(part)
                continue
            # A file region: sendfile waits for the transport's buffer to drain first.
            await loop.sendfile(self.transport, part.file, part.position, len(part))
        if buffered:
            self.transport.writelines(buffered)
        if not self._can_write.is_set():
            await self._can_write.wait()

    async def _write_region(self, region):
        """TLS cannot sendfile: read the region in pieces and write each once the client has
        taken the previous one, so a large fetch holds at most one piece in memory."""
        fd = region.fileno()
        position, remaining = region.position, len(region)
        while remaining > 0 and not self.closed:
            data = os.pread(fd, min(remaining, _TLS_CHUNK), position)
            if not data:
                raise ConnectionError("segment truncated under a fetch")
            self.transport.write(data)
            position += len(data)
            remaining -= len(data)
            if not self._can_write.is_set():
                await self._can_write.wait()

    def idle(self) -> bool:
        """No request in flight (a half-received frame does not count: Kafka closes those too)."""
        return not self._pending

    def close(self):
        if not self.closed:
            self.closed = True
            if self.transport is not None:
                self.transport.close()
