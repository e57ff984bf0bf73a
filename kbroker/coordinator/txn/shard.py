"""TxnShard: the transactional ids of one ``__transaction_state`` partition.

Durable state (``txns``, a timeline map of immutable TxnMetadata) changes only in
:meth:`TxnShard.replay`. The shard tells its coordinator when it has loaded, so the
markers of transactions left in PrepareCommit/PrepareAbort are written (Kafka does the same when
it loads a partition).
"""

from __future__ import annotations

from kbroker.coordinator.runtime import Shard
from kbroker.coordinator.txn import records as rec
from kbroker.coordinator.txn.state import TxnMetadata


class TxnShard(Shard):
    def __init__(self, runtime, partition_index: int, coordinator):
        super().__init__(runtime, partition_index)
        self.coordinator = coordinator
        self.txns: dict[str, TxnMetadata] = self.timeline_dict()
        # In memory only, as in Kafka: the epoch before the coordinator's last bump of an id that
        # a producer may still present (KIP-360 retries, KIP-588 recovery after a timeout).
        self.last_epochs: dict[str, int] = {}

    def replay(self, offset: int, key: bytes, value: bytes | None) -> None:
        transactional_id = rec.decode_key(key)
        if transactional_id is None:
            return
        if value is None:
            self.txns.pop(transactional_id, None)
            return
        self.txns[transactional_id] = rec.decode_value(transactional_id, value)

    def durable_state(self):
        return dict(self.txns)

    def on_loaded(self) -> None:
        self.coordinator.shard_loaded(self)

    @property
    def coordinator_epoch(self) -> int:
        """The leader epoch of this shard's partition (Kafka's coordinator epoch)."""
        partition = self.runtime.partitions.get(self.runtime.topic, self.partition_index)
        return partition.leader_epoch if partition is not None else 0
