"""Producer state of one partition (Kafka's ProducerStateManager): idempotent sequences and the
open transaction of each transactional producer.

Per producer id the partition remembers the producer epoch and the metadata of its last five
batches (first/last sequence, first/last offset, max timestamp). A batch with a producer id is
checked against it before it is written (Kafka's ``ProducerAppendInfo`` rules):

* same epoch and the same first and last sequence as one of the five: a *duplicate* (a producer
  retry); the original offsets are returned and nothing is written;
* an epoch older than the producer's: INVALID_PRODUCER_EPOCH;
* a newer epoch must start at sequence 0: else OUT_OF_ORDER_SEQUENCE_NUMBER;
* the same epoch must continue at last sequence + 1 (INT32_MAX wraps to 0): else
  OUT_OF_ORDER_SEQUENCE_NUMBER;
* an unknown producer (never seen, or its state expired or was lost) may start at any sequence:
  modern Kafka no longer answers UNKNOWN_PRODUCER_ID for data batches.

Snapshot file ``<offset, 20 digits>.snapshot`` (in the partition dir; ``offset`` is the log end
offset the state reflects) is Kafka's format, version 1, all integers big-endian::

    version                    int16    1
    crc                        uint32   CRC32C of every byte after this field
    producer entry count       int32
    per producer (46 bytes):
      producer_id              int64
      epoch                    int16
      last_sequence            int32    -1 when the producer has no data batch
      last_offset              int64    -1 when the producer has no data batch
      offset_delta             int32    last_offset - first offset of its last batch
      timestamp                int64    max timestamp of its last batch
      coordinator_epoch        int32    epoch of the coordinator that wrote its last marker, or -1
      current_txn_first_offset int64    first offset of its open transaction, or -1

Like Kafka, a snapshot keeps only the *last* batch of each producer, so after a restart only a
retry of the last batch is recognised as a duplicate (the log replay after the snapshot restores
up to five). Snapshots are taken when a segment rolls (named after the new segment's base offset)
and at clean shutdown; recovery loads the newest snapshot at or below the log end offset and
replays batch headers after it.

Transactions: a transactional data batch opens a transaction for its producer at its first
offset (``current_txn_first_offset``) unless one is open; a COMMIT or ABORT marker closes it
(:meth:`ProducerStateManager.complete_txn`). The *first unstable offset* is the first offset of
the oldest open transaction: the last stable offset of the partition never passes it. A marker
with an older producer epoch is INVALID_PRODUCER_EPOCH, one from an older coordinator epoch
TRANSACTION_COORDINATOR_FENCED; a non-transactional batch while the producer's transaction is open
is INVALID_TXN_STATE (Kafka's ProducerAppendInfo).
"""

from __future__ import annotations

import os
import struct
from collections import deque

from crc32c import crc32c

from kbroker.log.checkpoint import write_atomic
from kbroker.protocol.errors import Errors, KafkaError

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
BATCHES_TO_RETAIN = 5
NO_SEQUENCE = -1
INT32_MAX = 2**31 - 1

_HEAD = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")


class CorruptSnapshotError(Exception):
    pass


def _decrement_sequence(sequence: int, decrement: int) -> int:
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


class BatchMetadata:
    __slots__ = ("last_seq", "last_offset", "offset_delta", "timestamp")

    def __init__(self, last_seq: int, last_offset: int, offset_delta: int, timestamp: int):
        self.last_seq = last_seq
        self.last_offset = last_offset
        self.offset_delta = offset_delta
        self.timestamp = timestamp

    @property
    def first_seq(self) -> int:
        return _decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta

    def __repr__(self) -> str:
        return (f"BatchMetadata(seq {self.first_seq}..{self.last_seq}, "
                f"offsets {self.first_offset}..{self.last_offset}, ts {self.timestamp})")


class ProducerStateEntry:
    __slots__ = ("producer_id", "producer_epoch", "batches", "coordinator_epoch",
                 "current_txn_first_offset")

    def __init__(self, producer_id: int, producer_epoch: int = -1):
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=BATCHES_TO_RETAIN)
        self.coordinator_epoch = -1
        self.current_txn_first_offset = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_timestamp(self) -> int:
        return self.batches[-1].timestamp if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def add_batch(self, epoch: int, last_seq: int, last_offset: int, offset_delta: int,
                  timestamp: int) -> None:
        if epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = epoch
        self.batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))


class CompletedTxn:
    __slots__ = ("producer_id", "first_offset", "last_offset", "is_aborted")

    def __init__(self, producer_id: int, first_offset: int, last_offset: int, is_aborted: bool):
        self.producer_id = producer_id
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.is_aborted = is_aborted


class ProducerStateManager:
    def __init__(self, dir_path: str, topic_partition: str = ""):
        self.dir_path = dir_path
        self.topic_partition = topic_partition
        self.producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0   # the log end offset the in-memory state reflects
        self.ongoing_txns: dict[int, int] = {}  # producer id -> first offset of its open txn

    # --- transactions ----------------------------------------------------------------------

    @property
    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest open transaction, or None."""
        return min(self.ongoing_txns.values()) if self.ongoing_txns else None

    def _rebuild_ongoing(self) -> None:
        self.ongoing_txns = {pid: entry.current_txn_first_offset
                             for pid, entry in self.producers.items()
                             if entry.current_txn_first_offset >= 0}

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> None:
        """Kafka's ProducerAppendInfo.checkProducerEpoch / appendEndTxnMarker checks."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if epoch < entry.producer_epoch:
            raise KafkaError(Errors.INVALID_PRODUCER_EPOCH,
                             f"marker epoch {epoch} of producer {producer_id} in "
                             f"{self.topic_partition} is older than {entry.producer_epoch}")
        if coordinator_epoch < entry.coordinator_epoch:
            raise KafkaError(Errors.TRANSACTION_COORDINATOR_FENCED,
                             f"marker of producer {producer_id} in {self.topic_partition} from "
                             f"coordinator epoch {coordinator_epoch}, older than "
                             f"{entry.coordinator_epoch}")

    def complete_txn(self, producer_id: int, epoch: int, coordinator_epoch: int,
                     marker_offset: int, aborted: bool) -> CompletedTxn | None:
        """A marker at ``marker_offset`` closes the producer's open transaction (None if it had
        none: a marker for a partition the producer wrote nothing to)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerStateEntry(producer_id)
        if epoch > entry.producer_epoch:
            entry.batches.clear()
            entry.producer_epoch = epoch
        entry.coordinator_epoch = coordinator_epoch
        first = entry.current_txn_first_offset
        entry.current_txn_first_offset = -1
        self.ongoing_txns.pop(producer_id, None)
        if first < 0:
            return None
        return CompletedTxn(producer_id, first, marker_offset, aborted)

    def last_stable_offset_after(self, completed: CompletedTxn) -> int:
        """The LSO once ``completed`` is closed (Kafka's ProducerStateManager.lastStableOffset):
        the first offset of another open transaction, else the marker's next offset."""
        others = [first for pid, first in self.ongoing_txns.items()
                  if pid != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    # --- the leader's check ----------------------------------------------------------------

    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int,
              offset: int) -> BatchMetadata | None:
        """Validate an incoming client batch; return the original batch if it is a duplicate.

        ``offset`` is where the batch would be written (for messages only)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return None
        duplicate = entry.find_duplicate(epoch, first_seq, last_seq)
        if duplicate is not None:
            return duplicate
        current_epoch = entry.producer_epoch
        if epoch < current_epoch:
            raise KafkaError(Errors.INVALID_PRODUCER_EPOCH,
                             f"Epoch of producer {producer_id} at offset {offset} in "
                             f"{self.topic_partition} is {epoch}, which is smaller than the last "
                             f"seen epoch {current_epoch}")
        if epoch != current_epoch:
            if first_seq != 0 and current_epoch != -1:
                raise KafkaError(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                 f"Invalid sequence number for new epoch of producer "
                                 f"{producer_id} at offset {offset} in {self.topic_partition}: "
                                 f"{epoch} (request epoch), {first_seq} (seq. number), "
                                 f"{current_epoch} (current producer epoch)")
        elif current_epoch != -1:
            last = entry.last_seq
            if not (first_seq == last + 1 or (first_seq == 0 and last == INT32_MAX)):
                raise KafkaError(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                 f"Out of order sequence number for producer {producer_id} at "
                                 f"offset {offset} in {self.topic_partition}: {first_seq} "
                                 f"(incoming seq. number), {last} (current end sequence number)")
        return None

    def check_transactional(self, producer_id: int, epoch: int, is_transactional: bool) -> None:
        """A non-transactional batch while the producer's transaction is open (same epoch)."""
        entry = self.producers.get(producer_id)
        if (entry is not None and not is_transactional and entry.current_txn_first_offset >= 0
                and epoch == entry.producer_epoch):
            raise KafkaError(Errors.INVALID_TXN_STATE,
                             f"expected a transactional write from producer {producer_id} in "
                             f"{self.topic_partition}: its transaction is open")

    def update(self, producer_id: int, epoch: int, last_seq: int, first_offset: int,
               last_offset: int, timestamp: int, is_transactional: bool = False) -> None:
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerStateEntry(producer_id)
        entry.add_batch(epoch, last_seq, last_offset, last_offset - first_offset, timestamp)
        if is_transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = first_offset
            self.ongoing_txns[producer_id] = first_offset

    def replay(self, header, marker=None) -> CompletedTxn | None:
        """Apply a batch read back from the log (recovery): no validation. ``marker`` is
        ``(aborted, coordinator_epoch)`` for a transaction marker (None for other control
        batches); returns the transaction a marker closed."""
        if header.producer_id < 0:
            return None
        if header.is_control:
            if marker is not None:
                return self.complete_txn(header.producer_id, header.producer_epoch, marker[1],
                                         header.base_offset, marker[0])
            entry = self.producers.get(header.producer_id)
            if entry is None:
                entry = self.producers[header.producer_id] = ProducerStateEntry(header.producer_id)
            if header.producer_epoch > entry.producer_epoch:
                entry.batches.clear()
                entry.producer_epoch = header.producer_epoch
            return None
        self.update(header.producer_id, header.producer_epoch, header.last_sequence,
                    header.base_offset, header.last_offset, header.max_timestamp,
                    header.is_transactional)
        return None

    def remove_expired(self, now_ms: int, expiration_ms: int) -> None:
        expired = [pid for pid, entry in self.producers.items()
                   if entry.current_txn_first_offset < 0
                   and now_ms - entry.last_timestamp >= expiration_ms]
        for pid in expired:
            del self.producers[pid]

    def truncate(self) -> None:
        self.producers.clear()
        self.ongoing_txns.clear()

    # --- snapshots -------------------------------------------------------------------------

    def snapshot_path(self, offset: int) -> str:
        return os.path.join(self.dir_path, f"{offset:020d}{SNAPSHOT_SUFFIX}")

    def snapshot_offsets(self) -> list[int]:
        offsets = []
        for name in os.listdir(self.dir_path):
            if name.endswith(SNAPSHOT_SUFFIX):
                stem = name[:-len(SNAPSHOT_SUFFIX)]
                if stem.isdigit():
                    offsets.append(int(stem))
        return sorted(offsets)

    def take_snapshot(self, offset: int) -> None:
        write_atomic(self.snapshot_path(offset), encode_snapshot(self.producers.values()))

    def delete_snapshot(self, offset: int) -> None:
        try:
            os.unlink(self.snapshot_path(offset))
        except FileNotFoundError:
            pass

    def delete_snapshots_above(self, offset: int) -> None:
        for snap in self.snapshot_offsets():
            if snap > offset:
                self.delete_snapshot(snap)

    def delete_snapshots_below(self, offset: int) -> None:
        """Drop snapshots below ``offset``, always keeping the newest one."""
        snaps = self.snapshot_offsets()
        for snap in snaps[:-1]:
            if snap < offset:
                self.delete_snapshot(snap)

    def load_latest_snapshot(self, max_offset: int) -> int | None:
        """Replace the state with the newest readable snapshot at or below ``max_offset``;
        corrupt snapshots are deleted. Returns the snapshot's offset, or None."""
        for snap in reversed(self.snapshot_offsets()):
            if snap > max_offset:
                continue
            try:
                with open(self.snapshot_path(snap), "rb") as f:
                    entries = decode_snapshot(f.read())
            except (OSError, CorruptSnapshotError):
                self.delete_snapshot(snap)
                continue
            self.producers = {entry.producer_id: entry for entry in entries}
            self._rebuild_ongoing()
            return snap
        self.producers = {}
        self.ongoing_txns = {}
        return None


def encode_snapshot(entries) -> bytes:
    body = bytearray()
    entries = list(entries)
    body += _COUNT.pack(len(entries))
    for entry in entries:
        if entry.batches:
            last = entry.batches[-1]
            fields = (last.last_seq, last.last_offset, last.offset_delta, last.timestamp)
        else:
            fields = (NO_SEQUENCE, -1, 0, -1)
        body += _ENTRY.pack(entry.producer_id, entry.producer_epoch, fields[0], fields[1],
                            fields[2], fields[3], entry.coordinator_epoch,
                            entry.current_txn_first_offset)
    return _HEAD.pack(SNAPSHOT_VERSION, crc32c(body)) + bytes(body)


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    if len(data) < _HEAD.size + _COUNT.size:
        raise CorruptSnapshotError("snapshot is truncated")
    version, crc = _HEAD.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"unsupported snapshot version {version}")
    body = memoryview(data)[_HEAD.size:]
    if crc32c(body) != crc:
        raise CorruptSnapshotError("snapshot CRC mismatch")
    (count,) = _COUNT.unpack_from(body, 0)
    if count < 0 or _COUNT.size + count * _ENTRY.size != len(body):
        raise CorruptSnapshotError(f"snapshot declares {count} entries in {len(body)} bytes")
    entries = []
    for (pid, epoch, last_seq, last_offset, offset_delta, timestamp, coordinator_epoch,
         txn_first_offset) in _ENTRY.iter_unpack(body[_COUNT.size:]):
        entry = ProducerStateEntry(pid, epoch)
        if last_offset >= 0:
            entry.batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        entry.coordinator_epoch = coordinator_epoch
        entry.current_txn_first_offset = txn_first_offset
        entries.append(entry)
    return entries
