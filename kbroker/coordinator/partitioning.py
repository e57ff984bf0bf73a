"""Which shard of an internal topic holds a key: Kafka's ``Utils.abs(key.hashCode()) %
numPartitions``, the same rule for group ids (``__consumer_offsets``), transactional ids
(``__transaction_state``) and share-partition keys (``__share_group_state``). A home of its own so
that the three coordinators share it without depending on one another."""

from __future__ import annotations

import functools


# Every group, transaction and share request hashes its key to find its shard: a Python loop
# over the key's UTF-16 code units (~5 us for a 40-character group id, ~8% of a heartbeat's
# broker time). The hash of a string never changes, so the recent ones are kept (bounded, so
# clients making up new ids cost memory only up to the bound).
@functools.lru_cache(maxsize=16384)
def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units, int32 overflow)."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(key: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(key.hashCode()) % numPartitions`` (abs(MIN_VALUE) is 0)."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions
