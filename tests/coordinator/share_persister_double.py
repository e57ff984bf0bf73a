"""An in-memory persister for tests only (the contract of
kbroker.coordinator.share.persister.Persister): never wired into the broker; a test hands it to
the group coordinator to stand in for the share coordinator."""

from __future__ import annotations

from kbroker.coordinator.share.persister import (NO_OFFSET, ReadResult, SummaryResult,
                                                  WriteResult)
from kbroker.protocol.errors import Errors


class InMemoryPersister:
    def __init__(self):
        self.state: dict = {}       # SharePartitionKey -> [state_epoch, start_offset, batches]
        self.calls: list = []       # (name, key, ...) in call order
        self.fail_initialize: Errors | None = None

    async def initialize(self, key, state_epoch, start_offset):
        self.calls.append(("initialize", key, state_epoch, start_offset))
        if self.fail_initialize is not None:
            return WriteResult(self.fail_initialize, "refused by the test")
        self.state[key] = [state_epoch, start_offset, []]
        return WriteResult()

    async def read(self, key, leader_epoch):
        self.calls.append(("read", key, leader_epoch))
        entry = self.state.get(key)
        if entry is None:
            return ReadResult(start_offset=NO_OFFSET)
        return ReadResult(state_epoch=entry[0], start_offset=entry[1], batches=list(entry[2]))

    async def write(self, key, state_epoch, leader_epoch, start_offset, batches,
                    delivery_complete_count=-1):
        self.calls.append(("write", key, state_epoch, start_offset))
        self.state[key] = [state_epoch, start_offset, list(batches)]
        return WriteResult()

    async def delete(self, key):
        self.calls.append(("delete", key))
        self.state.pop(key, None)
        return WriteResult()

    async def read_summary(self, key, leader_epoch):
        self.calls.append(("read_summary", key, leader_epoch))
        entry = self.state.get(key)
        if entry is None:
            return SummaryResult(start_offset=NO_OFFSET)
        # nothing delivered yet in this double: every record from the start offset is lag
        return SummaryResult(state_epoch=entry[0], start_offset=entry[1],
                             delivery_complete_count=0)
