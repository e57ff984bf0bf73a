"""Run as a process by test_persister_broker: a broker on ``argv[1]`` that initializes and writes
one share partition's state, prints ``WRITTEN <topic id>`` once every write is acknowledged, and
then waits to be killed (``kill -9``)."""

from __future__ import annotations

import asyncio
import sys

from tests.coordinator.share.test_persister_broker import GROUP, write_state


async def main(data_dir: str) -> None:
    from kbroker.testing.inprocess import AsyncKafkaBroker

    kafka = AsyncKafkaBroker(data_dir=data_dir)
    await kafka.start()
    topic_id = await write_state(kafka.broker)
    print(f"WRITTEN {topic_id} {GROUP}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
