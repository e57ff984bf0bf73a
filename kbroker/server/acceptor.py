"""A listening socket with our own accept loop, so connection limits act before a client is served.

asyncio's ``create_server`` accepts whatever arrives; Kafka's Acceptor instead stops accepting at
``max.connections`` and closes a connection over ``max.connections.per.ip`` right after accepting
it. ``Listener`` does the same with ``sock_accept`` + ``connect_accepted_socket`` and offers the
part of ``asyncio.Server`` the broker uses (``sockets``, ``close``, ``wait_closed``).

A TLS listener (``ssl_context`` given) runs each handshake in a task of its own, so a client that
connects and stalls cannot hold up accepting others; the protocol's ``connection_made`` runs only
after the handshake succeeded. A failed handshake (plaintext or garbage on a TLS port, an untrusted
client certificate) is logged once per client address and costs nothing more.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket

log = logging.getLogger("kbroker.connection")

# Accept failures that a moment's wait can cure (out of descriptors or kernel memory).
_RETRY_LATER = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


class Listener:
    def __init__(self, sock: socket.socket, protocol_factory, limits, ssl_context=None,
                 on_tls_failure=None):
        self.sockets = [sock]
        self._ssl = ssl_context
        self._on_tls_failure = on_tls_failure
        self._handshakes: set[asyncio.Task] = set()
        self._sock = sock
        self._factory = protocol_factory
        self._limits = limits
        self._task = asyncio.get_running_loop().create_task(self._accept_loop(),
                                                            name=f"accept-{sock.getsockname()}")

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        out_of_descriptors_logged = False
        while True:
            await self._limits.wait_for_slot()
            try:
                conn, address = await loop.sock_accept(self._sock)
            except OSError as exc:
                if self._sock.fileno() < 0:  # closed: the broker is stopping
                    return
                if exc.errno not in _RETRY_LATER:
                    # One client's failure (it reset before we accepted, ...): accept the next.
                    log.debug("accept failed: %s", exc)
                    continue
                if not out_of_descriptors_logged:
                    log.warning("cannot accept connections: %s; retrying (raise the descriptor "
                                "limit or lower max.connections)", exc.strerror)
                    out_of_descriptors_logged = True
                await asyncio.sleep(0.1)
                continue
            out_of_descriptors_logged = False
            if not self._limits.admits(address[0]):
                conn.close()
                continue
            # Connection creation rates (KIP-612): broker-wide, then per address.
            delay_ms = self._limits.creation_delay_ms()
            if delay_ms > 0:
                await asyncio.sleep(delay_ms / 1000)
            throttle_ms = self._limits.ip_throttle_ms(address[0])
            if throttle_ms > 0:
                loop.call_later(throttle_ms / 1000, conn.close)
                continue
            if self._ssl is not None:
                task = loop.create_task(self._tls_set_up(conn, address))
                self._handshakes.add(task)
                task.add_done_callback(self._handshakes.discard)
                continue
            try:
                await loop.connect_accepted_socket(self._factory, conn)
            except OSError as exc:  # the client left between accept and set-up
                log.debug("connection from %s lost during set-up: %s", address, exc)
                conn.close()

    async def _tls_set_up(self, conn: socket.socket, address) -> None:
        loop = asyncio.get_running_loop()
        try:
            await loop.connect_accepted_socket(self._factory, conn, ssl=self._ssl,
                                               ssl_handshake_timeout=10.0)
        except (OSError, asyncio.TimeoutError) as exc:  # ssl.SSLError is an OSError
            conn.close()
            if self._on_tls_failure is not None:
                self._on_tls_failure(address[0], exc)

    def close(self) -> None:
        for task in self._handshakes:
            task.cancel()
        self._task.cancel()
        self._sock.close()

    async def wait_closed(self) -> None:
        try:
            await self._task
        except asyncio.CancelledError:
            pass


def _numeric(host: str | None, port: int) -> list | None:
    """getaddrinfo's answer for an IP address, asked with AI_NUMERICHOST (no lookup, so no need
    for the loop's executor thread) and as ASCII bytes (no idna codec): ~10 ms of a broker's
    start. None for a host name or every interface: those go through the loop's resolver."""
    if not host or not host.isascii():
        return None
    try:
        return socket.getaddrinfo(host.encode(), port, type=socket.SOCK_STREAM,
                                  flags=socket.AI_PASSIVE | socket.AI_NUMERICHOST)
    except socket.gaierror:
        return None


async def listen(host: str | None, port: int, protocol_factory, limits,
                 backlog: int = 1024, ssl_context=None, on_tls_failure=None) -> Listener:
    """Bind and start accepting; raises OSError (with errno) when the address cannot be bound."""
    loop = asyncio.get_running_loop()
    infos = _numeric(host, port)
    if infos is None:
        infos = await loop.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                       flags=socket.AI_PASSIVE)
    # Like create_server's default of every interface, but one socket: prefer IPv4's 0.0.0.0.
    infos.sort(key=lambda info: info[0] != socket.AF_INET)
    family, type_, proto, _, address = infos[0]
    sock = socket.socket(family, type_, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return Listener(sock, protocol_factory, limits, ssl_context, on_tls_failure)
