"""Producer ids for idempotent producers, handed out from blocks reserved through the controller.

As Kafka's ``RPCProducerIdManager``: ids come from a block reserved durably in the metadata
store (``/latest_producer_id_block`` in a cluster, shared by every broker), and the next block
is reserved in the background once 90% of the current one is used, so handing out an id never
waits for the store. :meth:`ready` waits for a block when none is in hand (the first id after
start-up, or a burst faster than a reservation); :meth:`next_id` is synchronous, for the
transaction coordinator's pure operations, and raises COORDINATOR_LOAD_IN_PROGRESS (retriable)
in the rare case that no id is in hand.

Concurrency: owned by the event loop; one reservation in flight at a time (``_reserving``).
"""

from __future__ import annotations

import asyncio
import logging

from kbroker.protocol.errors import Errors, KafkaError

BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
PREFETCH_AT = 0.9  # Kafka reserves the next block when 90% of the current one is used

log = logging.getLogger("kbroker.producer_ids")


class ProducerIdManager:
    def __init__(self, controller, block_size: int = BLOCK_SIZE):
        self._controller = controller
        self._block_size = block_size
        self._blocks: list[tuple[int, int]] = []  # [next, end) ranges in hand, oldest first
        self._reserving: asyncio.Task | None = None

    @property
    def available(self) -> int:
        return sum(end - first for first, end in self._blocks)

    async def ready(self) -> None:
        """At least one id in hand (waits for a reservation if needed)."""
        while not self._blocks:
            await asyncio.shield(self._reserve())

    def next_id(self) -> int:
        if not self._blocks:
            self._reserve()
            raise KafkaError(Errors.COORDINATOR_LOAD_IN_PROGRESS,
                             "no producer id block is reserved yet; retry")
        first, end = self._blocks[0]
        if first + 1 >= end:
            self._blocks.pop(0)
        else:
            self._blocks[0] = (first + 1, end)
        if self.available < self._block_size * (1 - PREFETCH_AT):
            self._reserve()
        return first

    def _reserve(self) -> asyncio.Task:
        if self._reserving is None or self._reserving.done():
            self._reserving = asyncio.ensure_future(self._reserve_block())
            self._reserving.add_done_callback(_log_failure)
        return self._reserving

    async def _reserve_block(self) -> None:
        first = await self._controller.allocate_producer_ids(self._block_size)
        self._blocks.append((first, first + self._block_size))

    async def close(self) -> None:
        if self._reserving is not None:
            await asyncio.gather(self._reserving, return_exceptions=True)


def _log_failure(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("reserving a producer id block failed: %s", task.exception())
