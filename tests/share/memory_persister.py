"""An in-memory :class:`~kbroker.coordinator.share.persister.Persister` for tests: what the share
coordinator keeps in ``__share_group_state``, in a dict. It applies writes as the coordinator does
(state epoch fencing, batches merged over the stored ones, offsets below the start offset
dropped) and records every call so tests can check what was persisted and when."""

from __future__ import annotations

from kbroker.coordinator.share.persister import (NO_OFFSET, ReadResult, StateBatch,
                                                 SummaryResult, WriteResult)
from kbroker.protocol.errors import Errors


class MemoryPersister:
    def __init__(self):
        self.state: dict = {}  # key -> (state_epoch, start_offset, {offset: (state, count)})
        self.writes: list = []
        self.fail_writes: Errors | None = None
        self.fail_reads: Errors | None = None

    async def initialize(self, key, state_epoch, start_offset):
        self.state[key] = (state_epoch, start_offset, {})
        return WriteResult()

    async def read(self, key, leader_epoch):
        if self.fail_reads is not None:
            return ReadResult(error=self.fail_reads, error_message="injected")
        if key not in self.state:
            # Kafka's share coordinator refuses to read a partition no group initialized.
            return ReadResult(error=Errors.INVALID_REQUEST, error_message="Read operation on "
                              "uninitialized share partition not allowed.")
        epoch, start, offsets = self.state[key]
        return ReadResult(state_epoch=epoch, start_offset=start, batches=_batches(offsets))

    async def write(self, key, state_epoch, leader_epoch, start_offset, batches,
                    delivery_complete_count=-1):
        self.writes.append((key, start_offset, list(batches)))
        if self.fail_writes is not None:
            return WriteResult(error=self.fail_writes, error_message="injected")
        epoch, _, offsets = self.state.get(key, (state_epoch, NO_OFFSET, {}))
        if state_epoch < epoch:
            return WriteResult(error=Errors.FENCED_STATE_EPOCH)
        for batch in batches:
            for offset in range(batch.first_offset, batch.last_offset + 1):
                offsets[offset] = (batch.delivery_state, batch.delivery_count)
        offsets = {o: v for o, v in offsets.items() if o >= start_offset}
        self.state[key] = (state_epoch, start_offset, offsets)
        return WriteResult()

    async def delete(self, key):
        self.state.pop(key, None)
        return WriteResult()

    async def read_summary(self, key, leader_epoch):
        epoch, start, _ = self.state.get(key, (0, NO_OFFSET, {}))
        return SummaryResult(state_epoch=epoch, start_offset=start)


def _batches(offsets: dict) -> list[StateBatch]:
    out: list[StateBatch] = []
    for offset in sorted(offsets):
        state, count = offsets[offset]
        if out and out[-1].last_offset + 1 == offset \
                and (out[-1].delivery_state, out[-1].delivery_count) == (state, count):
            out[-1] = StateBatch(out[-1].first_offset, offset, state, count)
        else:
            out.append(StateBatch(offset, offset, state, count))
    return out
