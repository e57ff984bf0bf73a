"""Producer ids for idempotent producers, handed out from blocks reserved in the metadata store."""

from __future__ import annotations

BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE


class ProducerIdManager:
    def __init__(self, controller):
        self._controller = controller  # blocks are reserved through it, durably
        self._next = 0
        self._end = 0

    def next_id(self) -> int:
        if self._next >= self._end:
            self._next = self._controller.allocate_producer_id_block(BLOCK_SIZE)
            self._end = self._next + BLOCK_SIZE
        producer_id = self._next
        self._next += 1
        return producer_id
