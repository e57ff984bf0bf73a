"""``__transaction_state`` records in Kafka's formats, and the partition of a transactional id.

Key: int16 record type 0, then TransactionLogKey v0 (transactional id). Value: int16 version 1,
then TransactionLogValue v1 (flexible), as Apache Kafka 4.3 and 4.4 write for every client: producer id
and epoch, timeout, status code, partitions (null for Empty, as Kafka writes), last update and
start timestamps, and the tagged fields previous producer id (the id before this change: the same
id unless it rotated), next producer id (set while a transactions v2 epoch bump rotates it) and
the client's transaction version. A null value is a tombstone. Version 0 values are read too.
"""

from __future__ import annotations

import struct

from kbroker.coordinator.partitioning import partition_for as _partition_for
from kbroker.coordinator.txn.state import TxnMetadata, TxnState
from kbroker.protocol.messages.transaction_log_key import TransactionLogKey
from kbroker.protocol.messages.transaction_log_value import TransactionLogValue

_INT16 = struct.Struct(">h")
KEY_TYPE = 0
VALUE_VERSION = 1


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(transactionalId.hashCode()) % transactionTopicPartitionCount``."""
    return _partition_for(transactional_id, num_partitions)


def key(transactional_id: str) -> bytes:
    return _INT16.pack(KEY_TYPE) + TransactionLogKey(transactional_id=transactional_id).to_bytes(0)


def value(m: TxnMetadata) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(m.partitions):
        by_topic.setdefault(topic, []).append(partition)
    partitions = None if m.state is TxnState.EMPTY else [
        TransactionLogValue.PartitionsSchema(topic=topic, partition_ids=ids)
        for topic, ids in by_topic.items()]
    v = TransactionLogValue(
        producer_id=m.producer_id, producer_epoch=m.producer_epoch,
        previous_producer_id=m.prev_producer_id, next_producer_id=m.next_producer_id,
        client_transaction_version=m.client_transaction_version,
        transaction_timeout_ms=m.timeout_ms, transaction_status=m.state.value,
        transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=m.txn_last_update_timestamp,
        transaction_start_timestamp_ms=m.txn_start_timestamp)
    return _INT16.pack(VALUE_VERSION) + v.to_bytes(VALUE_VERSION)


def decode_key(data: bytes) -> str | None:
    """The transactional id, or None for a record type this coordinator does not know."""
    view = memoryview(data)
    (record_type,) = _INT16.unpack_from(view, 0)
    if record_type != KEY_TYPE:
        return None
    return TransactionLogKey.decode(view[2:], 0).transactional_id


def decode_value(transactional_id: str, data: bytes) -> TxnMetadata:
    view = memoryview(data)
    (version,) = _INT16.unpack_from(view, 0)
    v = TransactionLogValue.decode(view[2:], min(version, TransactionLogValue.VALID_VERSIONS[1]))
    partitions = frozenset((p.topic, i) for p in (v.transaction_partitions or ())
                           for i in p.partition_ids)
    return TxnMetadata(transactional_id, v.producer_id, v.producer_epoch,
                       v.transaction_timeout_ms, TxnState(v.transaction_status), partitions,
                       v.transaction_start_timestamp_ms, v.transaction_last_update_timestamp_ms,
                       v.client_transaction_version, v.previous_producer_id, v.next_producer_id)
