"""A real broker in this process (its own event loop in a thread) with the in-memory persister,
for wire tests of ShareFetch/ShareAcknowledge before the share coordinator is wired in."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
from contextlib import contextmanager

from tests.share.memory_persister import MemoryPersister


@contextmanager
def share_broker(settings: dict | None = None):
    from kbroker.config import BrokerConfig
    from kbroker.config.profile import with_dev_profile
    from kbroker.server.broker import Broker

    data_dir = tempfile.mkdtemp(prefix="kbroker-share-")
    props = with_dev_profile({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": data_dir,
                              **(settings or {})})
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    persister = MemoryPersister()

    async def start():
        broker = Broker(BrokerConfig(props))
        await broker.start()
        # Before any share partition exists: they all take the manager's persister.
        broker.share_partitions.persister = persister
        return broker

    broker = asyncio.run_coroutine_threadsafe(start(), loop).result(60)
    host, port = broker.advertised_endpoint(next(iter(broker.bound)))
    broker.bootstrap = f"{host}:{port}"
    broker.persister = persister
    broker.loop = loop  # to run a coroutine on the broker's loop
    try:
        yield broker
    finally:
        asyncio.run_coroutine_threadsafe(broker.stop(), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        shutil.rmtree(data_dir, ignore_errors=True)
