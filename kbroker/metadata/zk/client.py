"""Connecting to ZooKeeper the way Kafka does, and awaiting kazoo's answers from asyncio.

``zookeeper.connect`` with an optional chroot, ``zookeeper.session.timeout.ms`` and
``zookeeper.connection.timeout.ms``.

``zookeeper.connect`` is ``host:port[,host:port...][/chroot]``. Like Kafka (KafkaServer's
``createZkClient``), the chroot path is created if it is missing before the real session starts
inside it, so a fresh ZooKeeper needs no preparation. The session timeout asked for is bounded
by the server (2 to 20 ticks: 4 s to 40 s at the default 2 s tick); ``negotiated_timeout_ms``
says what the server granted.

**No ZooKeeper call blocks the event loop.** kazoo's ``*_async`` calls only queue a request for
its connection thread; :func:`aio` turns the answer into an asyncio future (resolved through
``call_soon_threadsafe`` from kazoo's callback thread) and :func:`gather` awaits many at once
with a single wake-up of the loop, so reading 20,000 partition states costs one loop turn, not
20,000. Every await is bounded by ``READ_TIMEOUT_S``: kazoo fails requests when the connection
drops, but a stalled server would otherwise hold the caller for ever. Blocking kazoo calls are
left to code on kazoo's own threads (election, registration) and to start-up in a thread.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
from typing import Sequence

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry

# Kafka's defaults: zookeeper.session.timeout.ms=18000; the connection timeout defaults to it.
DEFAULT_SESSION_TIMEOUT_MS = 18000

# What a ZooKeeper call raises when the server is unreachable or the session is gone: kazoo's
# own errors, and its handler's timeout (not a KazooException) from a read bounded with get().
ZK_ERRORS = (KazooException, KazooTimeoutError)
# The longest one request may wait for ZooKeeper (seconds).
READ_TIMEOUT_S = 15.0


class _DeferredWake:
    """Stands in for kazoo's wake-up socket while a batch of requests is queued: it keeps the
    wake-ups owed (kazoo sends one request per byte it reads from the socket pair). Another
    thread may queue a request meanwhile, and may still hold this stand-in after the batch:
    every byte must reach the socket, or the connection's queue stays one request behind for
    good (each later wake-up sending the request before it)."""

    def __init__(self, socket):
        self._socket = socket
        self._lock = threading.Lock()
        self._owed: list[bytes] = []
        self._closed = False

    def send(self, data: bytes) -> int:
        with self._lock:
            if not self._closed:
                self._owed.append(data)
                return len(data)
        return self._socket.send(data)

    def close(self) -> bytes:
        """The bytes owed; later sends go straight to the socket."""
        with self._lock:
            self._closed = True
            return b"".join(self._owed)


def submit(client, calls: Sequence) -> list:
    """Run kazoo asynchronous calls (``lambda: client.get_async(path)``, ...) with one write to
    kazoo's wake-up socket for the batch. kazoo writes a byte to a socket pair after queueing
    each request; with thousands of reads (a new topic's partition states) each write hands the
    GIL to the connection thread and back, which cost more than the reads themselves (5 s for
    20,000). A request another thread queues meanwhile goes out with the batch."""
    connection = getattr(client, "_connection", None)
    wake = getattr(connection, "_write_sock", None)
    if wake is None or len(calls) < 2:
        return [call() for call in calls]
    deferred = _DeferredWake(wake)
    connection._write_sock = deferred
    try:
        return [call() for call in calls]
    finally:
        connection._write_sock = wake
        try:
            wake.sendall(deferred.close())
        except OSError:  # closed meanwhile: the queued requests fail as any would
            pass


async def aio(result):
    """The value of a kazoo asynchronous call (``client.get_async(...)``), awaited; its
    exception (NoNodeError, ...) raised."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def done(result):
        _call_soon(loop, _settle, future, result)

    result.rawlink(done)
    async with asyncio.timeout(READ_TIMEOUT_S):
        return await future


async def gather(results: Sequence) -> list:
    """The outcomes of many kazoo asynchronous calls, in order: each call's value, or the
    exception it failed with (returned, not raised). One wake-up of the loop for them all.
    TimeoutError only when none of them answered for READ_TIMEOUT_S: 30,000 reads on a loaded
    machine take longer than that, and are still making progress."""
    if not results:
        return []
    loop = asyncio.get_running_loop()
    future = loop.create_future()
    remaining = [len(results)]
    lock = threading.Lock()

    def done(_result):
        with lock:
            remaining[0] -= 1
            last = remaining[0] == 0
        if last:
            _call_soon(loop, _finish, future)

    for result in results:
        result.rawlink(done)
    waiting = None
    while waiting != remaining[0]:
        waiting = remaining[0]
        try:
            # asyncio.timeout, not wait_for: Python 3.11's wait_for returns the result when a
            # cancellation lands just as the future completes, and so swallows the cancel (a
            # broker's stop then waited out the purge loop's next sleep).
            async with asyncio.timeout(READ_TIMEOUT_S):
                await asyncio.shield(future)
            break
        except TimeoutError:
            continue  # compared with what was left: another round if some answered meanwhile
    else:
        raise TimeoutError(f"ZooKeeper answered none of {waiting} request(s) in "
                           f"{READ_TIMEOUT_S} s")
    return [r.value if r.successful() else r.exception for r in results]


def _call_soon(loop, callback, *args) -> None:
    try:
        loop.call_soon_threadsafe(callback, *args)
    except RuntimeError:  # the loop closed meanwhile (shutdown): nobody waits any more
        pass


def _settle(future: asyncio.Future, result) -> None:
    if future.done():
        return
    if result.successful():
        future.set_result(result.value)
    else:
        future.set_exception(result.exception)


def _finish(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)


def split_chroot(connect: str) -> tuple[str, str]:
    """``"h1:2181,h2:2181/kafka"`` -> ``("h1:2181,h2:2181", "/kafka")``; no chroot gives ""."""
    hosts, slash, chroot = connect.partition("/")
    chroot = ("/" + chroot).rstrip("/") if slash else ""
    return hosts, chroot


def connect(connect_string: str, session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
            connection_timeout_ms: int | None = None) -> KazooClient:
    """A started client, rooted at the chroot; raises kazoo's timeout error when no server
    answers within the connection timeout."""
    hosts, chroot = split_chroot(connect_string)
    connection_timeout = (connection_timeout_ms or session_timeout_ms) / 1000
    if chroot:
        bootstrap = KazooClient(hosts=hosts, timeout=session_timeout_ms / 1000)
        bootstrap.start(timeout=connection_timeout)
        try:
            bootstrap.ensure_path(chroot)
        finally:
            bootstrap.stop()
            bootstrap.close()
    client = KazooClient(hosts=hosts + chroot, timeout=session_timeout_ms / 1000,
                         connection_retry=_reconnect_retry(session_timeout_ms))
    client.start(timeout=connection_timeout)
    _never_block_exit(client)
    return client


def _reconnect_retry(session_timeout_ms: int) -> KazooRetry:
    """Reconnect attempts at most a third of the session timeout apart (and at most 1 s), as
    ZooKeeper's Java client retries. kazoo's default backoff doubles up to a minute: after a
    ZooKeeper restart a broker could come back only after its session had expired, losing its
    registration and its leaderships for nothing."""
    return KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_jitter=0.1,
                      max_delay=min(1.0, session_timeout_ms / 3000))


def _never_block_exit(client: KazooClient) -> None:
    """kazoo registers its handler's ``stop`` with ``atexit``; that stop joins the callback
    thread, which waits without a timeout when a watch callback is inside a request to a
    server that is gone. A client left open (a stop that timed out, a crashed test) would then
    hang the interpreter at exit forever. Its threads are daemons, so exit needs no join."""
    atexit.unregister(client.handler.stop)

