"""An asyncio TCP proxy the fault tests own: ``cut()`` drops every connection through it and
refuses new ones (a network partition as the peers see it: resets, then connect failures),
``restore()`` lets traffic through again.

The proxies run on one event loop in a background thread (:class:`ProxyLoop`), so synchronous
test code and tools drive them without an event loop of their own.
"""
from __future__ import annotations

import asyncio
import threading


class Proxy:
    """Forwards 127.0.0.1:listen_port to target_host:target_port while not cut."""

    def __init__(self, name: str, listen_port: int, target_port: int,
                 target_host: str = "127.0.0.1"):
        self.name = name
        self.listen_port = listen_port
        self.target = (target_host, target_port)
        self.is_cut = False
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.listen_port,
                                                  reuse_address=True)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        self._drop_all()

    def _drop_all(self) -> None:
        for writer in list(self._writers):
            # abort, not close: the peers see a reset at once, as when a link dies
            writer.transport.abort()
        self._writers.clear()

    async def _accept(self, reader, writer) -> None:
        if self.is_cut:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        if self.is_cut:  # cut while connecting
            writer.transport.abort()
            up_writer.transport.abort()
            return
        self._writers.update((writer, up_writer))
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        self._writers.discard(writer)
        self._writers.discard(up_writer)

    async def _pipe(self, reader, writer) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.transport.abort()


class ProxyLoop:
    """Owns the thread and loop the proxies run on; every method is called from other threads."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="fault-proxies",
                                        daemon=True)
        self._thread.start()
        self.proxies: dict[str, Proxy] = {}

    def _call(self, coro_or_fn):
        if asyncio.iscoroutine(coro_or_fn):
            return asyncio.run_coroutine_threadsafe(coro_or_fn, self.loop).result(30)

        async def run():
            return coro_or_fn()
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(30)

    def add(self, name: str, listen_port: int, target_port: int) -> Proxy:
        proxy = Proxy(name, listen_port, target_port)
        self._call(proxy.start())
        self.proxies[name] = proxy
        return proxy

    def cut(self, *names: str) -> None:
        def do():
            for name in names:
                self.proxies[name].is_cut = True
                self.proxies[name]._drop_all()
        self._call(do)

    def restore(self, *names: str) -> None:
        def do():
            for name in names:
                self.proxies[name].is_cut = False
        self._call(do)

    def restore_all(self) -> None:
        self.restore(*self.proxies)

    def close(self) -> None:
        for proxy in self.proxies.values():
            self._call(proxy.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
