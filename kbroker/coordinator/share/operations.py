"""The five share-coordinator operations on one shard (Kafka 4.4's ShareCoordinatorShard).

Each is ``op(shard) -> CoordinatorResult`` whose response is the persister's result
(:mod:`kbroker.coordinator.share.persister`); a refusal is a result with an error and no
records. Checks, in Kafka's order: a negative partition, leader epoch or state epoch is
INVALID_REQUEST (Kafka 4.4 no longer takes -1 as "any epoch"); reading or writing a partition
never initialized is INVALID_REQUEST; a leader epoch below the highest recorded is
FENCED_LEADER_EPOCH, a state epoch below the highest recorded FENCED_STATE_EPOCH; a topic or
partition the metadata does not know is UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from kbroker.coordinator.runtime import CoordinatorResult, now_ms
from kbroker.coordinator.share import records as rec
from kbroker.coordinator.share.combiner import combine
from kbroker.coordinator.share.persister import (NO_OFFSET, ReadResult, SharePartitionKey,
                                                 StateBatch, SummaryResult, WriteResult)
from kbroker.coordinator.share.records import ShareState
from kbroker.protocol.errors import Errors

log = logging.getLogger("kbroker.coordinator.share")

NEGATIVE_PARTITION = "The partition id cannot be a negative number."
WRITE_UNINITIALIZED = "Write operation on uninitialized share partition not allowed."
READ_UNINITIALIZED = "Read operation on uninitialized share partition not allowed."
NEGATIVE_LEADER_EPOCH = "The leader epoch cannot be a negative number."
NEGATIVE_STATE_EPOCH = "The state epoch cannot be a negative number."


def _refused(result_cls, error: Errors, message: str | None = None) -> CoordinatorResult:
    return CoordinatorResult([], result_cls(error, message or error.message))


def _unknown_topic(shard, key: SharePartitionKey) -> bool:
    topic = shard.runtime.controller.image.topic_by_id(key.topic_id)
    return topic is None or topic.num_partitions <= key.partition


def _common_error(shard, key: SharePartitionKey, result_cls, leader_epoch: int = 0,
                  state_epoch: int = 0) -> CoordinatorResult | None:
    if key.partition < 0:
        return _refused(result_cls, Errors.INVALID_REQUEST, NEGATIVE_PARTITION)
    if leader_epoch < 0:
        return _refused(result_cls, Errors.INVALID_REQUEST, NEGATIVE_LEADER_EPOCH)
    if state_epoch < 0:
        return _refused(result_cls, Errors.INVALID_REQUEST, NEGATIVE_STATE_EPOCH)
    return None


def initialize(key: SharePartitionKey, state_epoch: int, start_offset: int):
    def op(shard) -> CoordinatorResult:
        refused = _common_error(shard, key, WriteResult, state_epoch=state_epoch)
        if refused is not None:
            return refused
        known = shard.state_epochs.get(key)
        if known is not None and known > state_epoch:
            log.info("initialize of %s refused: state epoch %d is below %d",
                     key.coordinator_key(), state_epoch, known)
            return _refused(WriteResult, Errors.FENCED_STATE_EPOCH)
        if _unknown_topic(shard, key):
            return _refused(WriteResult, Errors.UNKNOWN_TOPIC_OR_PARTITION)
        current = shard.states.get(key)
        now = now_ms()
        # A fresh start: nothing of the previous state is kept but its snapshot epoch, bumped.
        state = ShareState(
            snapshot_epoch=current.snapshot_epoch + 1 if current is not None else 0,
            state_epoch=state_epoch, leader_epoch=0, start_offset=start_offset,
            # Lag is measurable from a known start offset on (Kafka's ShareGroupOffset).
            delivery_complete_count=-1 if start_offset == NO_OFFSET else 0,
            batches=(), create_timestamp=now, write_timestamp=now)
        return CoordinatorResult([rec.snapshot_record(key, state)], WriteResult())
    return op


def write(key: SharePartitionKey, state_epoch: int, leader_epoch: int, start_offset: int,
          batches: list[StateBatch], delivery_complete_count: int):
    def op(shard) -> CoordinatorResult:
        refused = _common_error(shard, key, WriteResult, leader_epoch, state_epoch)
        if refused is not None:
            return refused
        current = shard.states.get(key)
        if current is None:
            return _refused(WriteResult, Errors.INVALID_REQUEST, WRITE_UNINITIALIZED)
        known_leader = shard.leader_epochs.get(key)
        if known_leader is not None and known_leader > leader_epoch:
            log.warning("write of %s refused: leader epoch %d is below %d",
                        key.coordinator_key(), leader_epoch, known_leader)
            return _refused(WriteResult, Errors.FENCED_LEADER_EPOCH)
        known_state = shard.state_epochs.get(key)
        if known_state is not None and known_state > state_epoch:
            log.info("write of %s refused: state epoch %d is below %d",
                     key.coordinator_key(), state_epoch, known_state)
            return _refused(WriteResult, Errors.FENCED_STATE_EPOCH)
        if _unknown_topic(shard, key):
            return _refused(WriteResult, Errors.UNKNOWN_TOPIC_OR_PARTITION)
        record = _state_record(shard, key, current, current.leader_epoch, start_offset,
                               batches, delivery_complete_count)
        return CoordinatorResult([record], WriteResult())
    return op


def _state_record(shard, key, current: ShareState, leader_epoch: int, start_offset: int,
                  batches, delivery_complete_count: int):
    """A snapshot once enough updates followed the last one, else an update of the changes.

    As Kafka 4.4: the start offset never moves back (the higher of the stored and the written
    one); the delivery complete count written stands when the start offset moved forward, the
    higher of the two when it stayed, and the stored one when the write's start is behind."""
    start = max(start_offset, current.start_offset)
    if start_offset == current.start_offset:
        delivery_complete_count = max(delivery_complete_count, current.delivery_complete_count)
    elif start_offset < current.start_offset:
        delivery_complete_count = current.delivery_complete_count
    if shard.update_counts.get(key, 0) >= shard.updates_per_snapshot:
        now = now_ms()
        return rec.snapshot_record(key, ShareState(
            current.snapshot_epoch + 1, current.state_epoch, leader_epoch, start,
            delivery_complete_count, tuple(combine(current.batches, batches, start)), now, now))
    return rec.update_record(key, current.snapshot_epoch, leader_epoch, start,
                             delivery_complete_count, combine((), batches, start))


def read(key: SharePartitionKey, leader_epoch: int):
    """ReadShareGroupState; a newer leader epoch than recorded is written down (an update), so
    the older leader is fenced from then on."""
    def op(shard) -> CoordinatorResult:
        refused = _common_error(shard, key, ReadResult, leader_epoch)
        if refused is not None:
            return refused
        current = shard.states.get(key)
        if current is None:
            return _refused(ReadResult, Errors.INVALID_REQUEST, READ_UNINITIALIZED)
        known = shard.leader_epochs.get(key)
        if known is not None and known > leader_epoch:
            log.warning("read of %s refused: leader epoch %d is below %d",
                        key.coordinator_key(), leader_epoch, known)
            return _refused(ReadResult, Errors.FENCED_LEADER_EPOCH)
        if _unknown_topic(shard, key):
            return _refused(ReadResult, Errors.UNKNOWN_TOPIC_OR_PARTITION)
        result = ReadResult(state_epoch=current.state_epoch, start_offset=current.start_offset,
                            batches=list(current.batches))
        if known == leader_epoch:
            return CoordinatorResult([], result)
        log.info("share partition %s read by leader epoch %d: recording it",
                 key.coordinator_key(), leader_epoch)
        record = _state_record(shard, key, current, leader_epoch, current.start_offset, [],
                               current.delivery_complete_count)
        return CoordinatorResult([record], result)
    return op


def read_summary(key: SharePartitionKey, leader_epoch: int):
    def op(shard) -> CoordinatorResult:
        refused = _common_error(shard, key, SummaryResult)
        if refused is not None:
            return refused
        if _unknown_topic(shard, key):
            return _refused(SummaryResult, Errors.UNKNOWN_TOPIC_OR_PARTITION)
        current = shard.states.get(key)
        if current is None:
            return CoordinatorResult([], SummaryResult())
        return CoordinatorResult([], SummaryResult(
            state_epoch=current.state_epoch, leader_epoch=current.leader_epoch,
            start_offset=current.start_offset,
            delivery_complete_count=current.delivery_complete_count))
    return op


def delete(key: SharePartitionKey):
    def op(shard) -> CoordinatorResult:
        refused = _common_error(shard, key, WriteResult)
        if refused is not None:
            return refused
        if _unknown_topic(shard, key):
            return _refused(WriteResult, Errors.UNKNOWN_TOPIC_OR_PARTITION)
        if key not in shard.states:
            log.debug("delete of %s: no state to delete", key.coordinator_key())
            return CoordinatorResult([], WriteResult())
        return CoordinatorResult([rec.tombstone(key)], WriteResult())
    return op


def forget_topics(topic_ids: frozenset):
    """Tombstones for every share partition state of the deleted topics (Kafka's
    maybeCleanupShareState, run when the metadata drops a topic)."""
    def op(shard) -> CoordinatorResult:
        keys = sorted((k for k in shard.states if k.topic_id in topic_ids),
                      key=lambda k: (k.group_id, str(k.topic_id), k.partition))
        return CoordinatorResult([rec.tombstone(k) for k in keys], len(keys))
    return op


def snapshot_cold(interval_ms: int):
    """A fresh snapshot of every share partition not snapshotted for ``interval_ms`` (Kafka's
    snapshotColdPartitions): an idle share partition would otherwise hold pruning back at its
    old snapshot forever. Skipped when every state here is already such a cold snapshot (its
    write timestamp differs from its creation), as Kafka does: then nothing is moving."""
    def op(shard) -> CoordinatorResult:
        states = shard.states
        if all(s.create_timestamp != s.write_timestamp for s in states.values()):
            return CoordinatorResult([], 0)
        now = now_ms()
        records = [rec.snapshot_record(key, replace(s, snapshot_epoch=s.snapshot_epoch + 1,
                                                    write_timestamp=now))
                   for key, s in states.items() if now - s.write_timestamp >= interval_ms]
        return CoordinatorResult(records, len(records))
    return op
