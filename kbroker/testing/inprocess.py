"""A real broker inside the current process, for scripts and tests.

``KafkaBroker`` (synchronous, any framework) runs the asyncio broker on its own event loop in a
background thread; ``AsyncKafkaBroker`` runs it on the caller's loop. Both listen on an ephemeral
port of 127.0.0.1 and a fresh temp data dir unless told otherwise, apply the dev profile
(:mod:`kbroker.config.profile`) under the caller's settings, and expose the bound addresses::

    with KafkaBroker({"num.partitions": 3}) as kafka:
        producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers)

    async with AsyncKafkaBroker() as kafka:
        consumer = AIOKafkaConsumer("t", bootstrap_servers=kafka.bootstrap_servers)

Settings use Kafka's broker config names, values as strings or Python values. ``security=True``
(or a dict of :class:`kbroker.testing.security.BrokerSecurity` fields) adds SSL, mTLS and SASL
listeners with certificates and users made on start; ``kafka.security.client("SASL_SSL",
"SCRAM-SHA-512").librdkafka_config`` is then what a client needs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import io
import shutil
import sys
import tempfile
import threading
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Mapping

from kbroker.config.profile import warn_unknown, with_dev_profile


class AsyncKafkaBroker:
    """``async with AsyncKafkaBroker(settings) as kafka``; ``kafka.broker`` is the
    :class:`kbroker.server.broker.Broker` itself."""

    def __init__(self, settings: Mapping[str, object] | None = None, *,
                 data_dir: str | Path | None = None, dev: bool = True,
                 keep_data: bool = False, security=None) -> None:
        from kbroker.testing.security import BrokerSecurity

        self.settings = dict(settings or {})
        self.dev = dev
        self.security_options = BrokerSecurity.of(security)
        self._prepared = None  # PreparedSecurity: the certificates, once started
        self.security = None  # SecurityInfo once started with ``security``
        self._given_data_dir = data_dir
        self.keep_data = keep_data or data_dir is not None  # never delete a caller's directory
        self.data_dir: Path | None = None
        self.broker = None

    async def start(self) -> "AsyncKafkaBroker":
        from kbroker.config import BrokerConfig
        from kbroker.server.broker import Broker

        if self.security_options is not None:
            self.security_options.check_settings(self.settings)
        self.data_dir = Path(self._given_data_dir or tempfile.mkdtemp(prefix="kbroker-"))
        settings = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(self.data_dir)}
        if self.security_options is not None:
            self._prepared = self.security_options.prepare()
            settings.update(self._prepared.broker_settings())
        settings.update(self.settings)
        warn_unknown(settings)
        props = with_dev_profile(settings) if self.dev else {k: str(v) for k, v in settings.items()}
        try:
            broker = Broker(BrokerConfig(props))
        except BaseException:
            self._remove_data()
            raise
        try:
            await broker.start()
            self.broker = broker
            if self._prepared is not None:
                # kafka-python blocks: run it off this loop, which must keep serving it
                await asyncio.to_thread(self._prepared.create_scram_users,
                                        self._address("PLAINTEXT"))
                self.security = self._prepared.info(self.listeners)
        except BaseException:
            self.broker = None
            await broker.stop()
            self._remove_data()
            raise
        return self

    async def stop(self) -> None:
        if self.broker is not None:
            broker, self.broker = self.broker, None
            await broker.stop()
        self._remove_data()

    async def __aenter__(self) -> "AsyncKafkaBroker":
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    @property
    def listeners(self) -> dict[str, tuple[str, int]]:
        """Listener name -> the (host, port) clients should use; the port is the one bound."""
        self._require_started()
        return {name: self.broker.advertised_endpoint(name) for name in self.broker.bound}

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` of every listener, comma separated (one listener unless configured);
        with ``security``, of the PLAINTEXT listener (``security.client(...)`` for the others)."""
        if self.security_options is not None:
            return self._address("PLAINTEXT")
        return ",".join(f"{host}:{port}" for host, port in self.listeners.values())

    def _address(self, listener: str) -> str:
        host, port = self.listeners[listener]
        return f"{host}:{port}"

    @property
    def port(self) -> int:
        self._require_started()
        return self.broker.port()

    @property
    def schema_registry_url(self) -> str | None:
        """The schema registry's URL (on in the dev profile; ``schema.registry.listeners``)."""
        self._require_started()
        registry = self.broker.schema_registry
        return registry.url if registry is not None else None

    def _require_started(self) -> None:
        if self.broker is None:
            raise RuntimeError("the broker is not running: use it inside `async with` or after start()")

    def _remove_data(self) -> None:
        if self._prepared is not None:
            self._prepared.remove()
            self._prepared = None
        if self.data_dir is not None and not self.keep_data:
            shutil.rmtree(self.data_dir, ignore_errors=True)


async def _cancel_remaining_tasks() -> None:
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=2)


class KafkaBroker:
    """A broker for synchronous code: ``with KafkaBroker(settings) as kafka``. Its event loop runs
    in a daemon thread, so the caller's thread stays free for blocking clients."""

    def __init__(self, settings: Mapping[str, object] | None = None, *,
                 data_dir: str | Path | None = None, dev: bool = True,
                 keep_data: bool = False, start_timeout: float = 30.0, security=None) -> None:
        self._inner = AsyncKafkaBroker(settings, data_dir=data_dir, dev=dev, keep_data=keep_data,
                                       security=security)
        self.start_timeout = start_timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> "KafkaBroker":
        if self._loop is not None:
            raise RuntimeError("the broker is already running")
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="kbroker-loop", daemon=True)
        thread.start()
        self._loop, self._thread = loop, thread
        try:
            self.call(self._inner.start(), self.start_timeout)
        except BaseException:
            self._stop_loop()
            raise
        return self

    def stop(self, timeout: float = 30.0) -> None:
        if self._loop is None:
            return
        try:
            self.call(self._inner.stop(), timeout)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"the broker did not stop within {timeout} s; "
                               f"what it was doing:\n{self._whereabouts()}") from None
        finally:
            self._stop_loop()

    def _whereabouts(self) -> str:
        """The loop thread's stack and every unfinished task's, for a stop that hangs."""
        lines = ["loop thread:"]
        frame = sys._current_frames().get(self._thread.ident)
        lines += traceback.format_stack(frame) if frame is not None else ["  (gone)\n"]

        async def tasks():
            out = io.StringIO()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.print_stack(file=out)
            return [out.getvalue()]
        try:
            lines += self.call(tasks(), 2)
        except concurrent.futures.TimeoutError:
            lines.append("(the loop is blocked: no task list)\n")
        return "".join(lines)

    def call(self, coroutine, timeout: float | None = None):
        """Run ``coroutine`` on the broker's loop and return its result (for tests that reach
        into ``broker``: its state belongs to that loop's thread)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    def _stop_loop(self) -> None:
        loop, self._loop = self._loop, None
        # Connections closed by the stop may still have a parked request task (a long poll)
        # winding down: end them here, so none is destroyed pending when the loop closes.
        try:
            asyncio.run_coroutine_threadsafe(_cancel_remaining_tasks(), loop).result(5)
        except (concurrent.futures.TimeoutError, RuntimeError):
            pass
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join()
        loop.close()

    def __enter__(self) -> "KafkaBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    broker = property(lambda self: self._inner.broker)
    data_dir = property(lambda self: self._inner.data_dir)
    listeners = property(lambda self: self._inner.listeners)
    bootstrap_servers = property(lambda self: self._inner.bootstrap_servers)
    port = property(lambda self: self._inner.port)
    schema_registry_url = property(lambda self: self._inner.schema_registry_url)
    security = property(lambda self: self._inner.security)

    @property
    def keep_data(self) -> bool:
        return self._inner.keep_data

    @keep_data.setter
    def keep_data(self, value: bool) -> None:
        self._inner.keep_data = value


@contextmanager
def running_broker(settings: Mapping[str, object] | None = None, **options) -> Iterator[KafkaBroker]:
    """``with running_broker({"num.partitions": 3}) as kafka: kafka.bootstrap_servers``."""
    with KafkaBroker(settings, **options) as kafka:
        yield kafka
