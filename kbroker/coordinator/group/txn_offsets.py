"""Transactional offset commits (TxnOffsetCommit, KIP-98 / KIP-447).

A TxnOffsetCommit writes ordinary OffsetCommit records in a *transactional* batch of the
producer; replayed, they are held per producer as pending (``GroupShard.pending_txn_offsets``)
and OffsetFetch does not see them. The transaction's marker settles them: COMMIT moves each
pending offset into the committed offsets unless a later non-transactional commit of that
partition was written after it (Kafka's rule: the offset with the higher position in the log
wins), ABORT drops them. OffsetFetch with ``require_stable`` (v7+) answers
UNSTABLE_OFFSET_COMMIT for a partition with a pending offset, so a consumer does not start from
an offset a transaction may still change.
"""

from __future__ import annotations

from kbroker.coordinator.group import records as rec


def replay_transactional(shard, offset: int, producer_id: int, key: bytes,
                         value: bytes | None) -> None:
    record_type, k = rec.decode_key(key)
    if k is None or record_type != rec.OFFSET_COMMIT_TYPE or value is None:
        return
    groups = shard.pending_txn_offsets.get(producer_id)
    if groups is None:
        groups = shard.pending_txn_offsets[producer_id] = shard.timeline_dict()
    pending = groups.get(k.group)
    if pending is None:
        pending = groups[k.group] = shard.timeline_dict()
    pending[(k.topic, k.partition)] = rec.decode_offset_commit_value(value, offset)


def replay_end_txn(shard, producer_id: int, commit: bool) -> None:
    pending = shard.pending_txn_offsets.pop(producer_id, None)
    if not pending or not commit:
        return
    for group_id, offsets in pending.items():
        committed = shard.offsets.get(group_id)
        if committed is None:
            committed = shard.offsets[group_id] = shard.timeline_dict()
        for tp, offset in offsets.items():
            current = committed.get(tp)
            if current is None or current.record_offset < offset.record_offset:
                committed[tp] = offset


def has_pending(shard, group_id: str, topic: str, partition: int) -> bool:
    return any((topic, partition) in groups.get(group_id, {})
               for groups in shard.pending_txn_offsets.values())


def copy_pending(pending: dict) -> dict:
    return {pid: {group: dict(offsets) for group, offsets in groups.items()}
            for pid, groups in pending.items()}
