"""Producer state of one partition (Kafka's ProducerStateManager and ProducerAppendInfo): the
idempotent sequences, epochs and open transaction of each producer, and the transactions v2
verifications in progress.

**What a producer may send next.** Per producer id the partition remembers its epoch, the
metadata of its last five batches (first/last sequence and offset, max timestamp), the
coordinator epoch of its last marker, the first offset of its open transaction and the time it
was last heard of (a batch or a marker). A batch from a client, checked before anything is
written, in Kafka's order:

1. **A retry.** Same epoch, same first and last sequence as one of the last five batches: a
   duplicate; the original offsets are answered and nothing is written.
2. **A zombie.** An epoch older than the producer's: INVALID_PRODUCER_EPOCH.
3. **A transactional batch that opens a transaction here** (no transaction of the producer open
   at this epoch) must carry the guard of a verification the coordinator confirmed (KIP-890,
   below); else INVALID_TXN_STATE "Record was not part of an ongoing transaction". Off with
   ``transaction.partition.verification.enable=false``.
4. **The sequence.** While a verification is pending (the producer has no open transaction
   here): a transactions v2 producer with no batch here must start at 0, and no batch may start
   above the lowest sequence that began the verification (the earlier batch goes first). Then:
   a new epoch must start at sequence 0; the same epoch continues at last sequence + 1
   (INT32_MAX wraps to 0), where a producer with no batch at this epoch (its epoch came from a
   marker) has last sequence -1. A violation is OUT_OF_ORDER_SEQUENCE_NUMBER. A producer the
   partition does not know at all (never seen, or expired, or its batches gone before a
   restart) may start at any sequence: modern Kafka no longer answers UNKNOWN_PRODUCER_ID.
5. **A plain batch inside a transaction.** A non-transactional batch while the producer's
   transaction is open: INVALID_TXN_STATE.

Pipelining: a client sends up to five batches in flight per partition, in sequence order on one
connection, and the broker handles a connection's produces in arrival order
(:mod:`kbroker.handlers.session`), so each arrives after the one before it; a retry after a
transport error resends the same batches (rule 1 answers those that were written).

Markers (COMMIT/ABORT from the transaction coordinator) close the producer's open transaction. A
marker's epoch older than the producer's is INVALID_PRODUCER_EPOCH; with transactions v2 the
coordinator bumps the epoch before every marker, so a marker must carry a *newer* epoch, except
a retry of the marker that already closed the transaction (same epoch, nothing open), which is
written again (KAFKA-19999). A marker from an older coordinator epoch is
TRANSACTION_COORDINATOR_FENCED. A marker moves the producer to its epoch (a new epoch forgets
the batches: the next transaction starts at sequence 0), and counts as activity for expiry.

**Verification (KIP-890).** Before a transactional batch opens a transaction on a partition, the
leader asks the transaction coordinator (transactions v1: is the partition in the transaction?
v2: add it). :meth:`ProducerStateManager.start_verification` records that under a fresh *guard*
(with the lowest sequence and newest epoch of the batches waiting for it); the append must hand
the same guard back. Any transactional write of the producer in between (its marker, or a batch
that opened the transaction) ends the verification, so a confirmation that arrives after an
abort marker cannot open a transaction nobody will close: the "hanging transaction" of KIP-890.
A v2 marker at the verification's own epoch leaves it be: the producer's next transaction has
already started it.

Expiry: a producer without an open transaction, not heard of for
``producer.id.expiration.ms``, is forgotten; so is a verification that old.

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
      timestamp                int64    when the producer was last heard of (batch or marker)
      coordinator_epoch        int32    epoch of the coordinator that wrote its last marker, or -1
      current_txn_first_offset int64    first offset of its open transaction, or -1

Like Kafka, a snapshot keeps only the *last* batch of each producer, so after a restart only a
retry of the last batch is recognised as a duplicate (the log replay after the snapshot restores
up to five). Snapshots are taken when a segment rolls (named after the new segment's base offset)
and at clean shutdown; recovery loads the newest snapshot at or below the log end offset and
replays batch headers after it. Verifications are not persisted (a restart forgets them; the
client's retry starts another).

Transactions: a transactional data batch opens a transaction for its producer at its first
offset (``current_txn_first_offset``) unless one is open; a marker closes it
(:meth:`ProducerStateManager.complete_txn`). The *first unstable offset* is the first offset of
the oldest open transaction: the last stable offset of the partition never passes it.
"""

from __future__ import annotations

import os
import struct
from collections import deque

from kbroker.protocol.crc import crc32c

from kbroker.log.checkpoint import write_atomic
from kbroker.protocol.errors import Errors, KafkaError

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
BATCHES_TO_RETAIN = 5
NO_SEQUENCE = -1
NO_EPOCH = -1
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
                 "current_txn_first_offset", "last_timestamp")

    def __init__(self, producer_id: int, producer_epoch: int = NO_EPOCH):
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=BATCHES_TO_RETAIN)
        self.coordinator_epoch = -1
        self.current_txn_first_offset = -1
        self.last_timestamp = -1  # the last batch's max timestamp, or the last marker's

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def move_to_epoch(self, epoch: int) -> None:
        """A different epoch forgets the batches: its sequences start again at 0."""
        if epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = epoch

    def add_batch(self, epoch: int, last_seq: int, last_offset: int, offset_delta: int,
                  timestamp: int) -> None:
        self.move_to_epoch(epoch)
        self.batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp


class Verification:
    """A transactional producer's batches waiting for the coordinator before they open a
    transaction on this partition (Kafka's VerificationStateEntry). ``guard`` is unique per
    verification: an append must bring back the one it started, so a confirmation cannot outlive
    a marker written meanwhile."""

    __slots__ = ("guard", "lowest_seq", "epoch", "supports_epoch_bump", "created_ms")

    def __init__(self, sequence: int, epoch: int, supports_epoch_bump: bool, now_ms: int):
        self.guard = object()
        self.lowest_seq = sequence
        self.epoch = epoch
        self.supports_epoch_bump = supports_epoch_bump
        self.created_ms = now_ms

    def include(self, sequence: int, epoch: int) -> None:
        """Another batch waits too: the lowest sequence of the newest epoch must go first."""
        if epoch == self.epoch and sequence < self.lowest_seq:
            self.lowest_seq = sequence
        elif epoch > self.epoch:
            self.epoch, self.lowest_seq = epoch, sequence


# ``verification`` arguments: the caller checked nothing (a transactional batch that would open a
# transaction is refused), or verification is switched off for it.
UNVERIFIED = None
VERIFICATION_OFF = object()


class CompletedTxn:
    __slots__ = ("producer_id", "first_offset", "last_offset", "is_aborted")

    def __init__(self, producer_id: int, first_offset: int, last_offset: int, is_aborted: bool):
        self.producer_id = producer_id
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.is_aborted = is_aborted


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerStateManager:
    def __init__(self, dir_path: str, topic_partition: str = ""):
        self.dir_path = dir_path
        self.topic_partition = topic_partition
        self.producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0   # the log end offset the in-memory state reflects
        self.ongoing_txns: dict[int, int] = {}  # producer id -> first offset of its open txn
        self.verifications: dict[int, Verification] = {}

    # --- transactions ----------------------------------------------------------------------

    @property
    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest open transaction, or None."""
        return min(self.ongoing_txns.values()) if self.ongoing_txns else None

    def _rebuild_ongoing(self) -> None:
        self.ongoing_txns = {pid: entry.current_txn_first_offset
                             for pid, entry in self.producers.items()
                             if entry.current_txn_first_offset >= 0}

    def has_ongoing_txn(self, producer_id: int, epoch: int) -> bool:
        entry = self.producers.get(producer_id)
        return (entry is not None and entry.current_txn_first_offset >= 0
                and entry.producer_epoch == epoch)

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int,
                     transaction_version: int = 0) -> None:
        """Kafka's ProducerAppendInfo.checkProducerEpoch / appendEndTxnMarker checks."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        current = entry.producer_epoch
        if transaction_version >= 2:
            # A v2 coordinator bumps the epoch before each marker; the same epoch again is the
            # retry of a marker already written (nothing open), written again.
            stale = epoch < current or (epoch == current and entry.current_txn_first_offset >= 0)
        else:
            stale = epoch < current
        if stale:
            raise KafkaError(Errors.INVALID_PRODUCER_EPOCH,
                             f"marker epoch {epoch} of producer {producer_id} in "
                             f"{self.topic_partition} is "
                             f"{'not newer than' if transaction_version >= 2 else 'older than'} "
                             f"{current} (TV{transaction_version})")
        if coordinator_epoch < entry.coordinator_epoch:
            raise KafkaError(Errors.TRANSACTION_COORDINATOR_FENCED,
                             f"marker of producer {producer_id} in {self.topic_partition} from "
                             f"coordinator epoch {coordinator_epoch}, older than "
                             f"{entry.coordinator_epoch}")

    def complete_txn(self, producer_id: int, epoch: int, coordinator_epoch: int,
                     marker_offset: int, aborted: bool,
                     timestamp: int = -1) -> CompletedTxn | None:
        """A marker at ``marker_offset`` closes the producer's open transaction (None if it had
        none: a marker for a partition the producer wrote nothing to)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerStateEntry(producer_id)
        if epoch > entry.producer_epoch:
            entry.move_to_epoch(epoch)
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp
        verification = self.verifications.get(producer_id)
        if verification is not None and not (verification.supports_epoch_bump
                                             and verification.epoch == epoch):
            del self.verifications[producer_id]
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

    # --- verification (KIP-890) ------------------------------------------------------------

    def start_verification(self, producer_id: int, sequence: int, epoch: int,
                           supports_epoch_bump: bool, now_ms: int):
        """A transactional batch is about to be confirmed with the coordinator: the guard its
        append must bring back, or None when the producer's transaction is already open here at
        this epoch (nothing to confirm). A zombie epoch is INVALID_PRODUCER_EPOCH at once."""
        entry = self.producers.get(producer_id)
        if entry is not None and epoch < entry.producer_epoch:
            raise KafkaError(Errors.INVALID_PRODUCER_EPOCH,
                             f"Epoch of producer {producer_id} is {epoch}, which is smaller "
                             f"than the last seen epoch {entry.producer_epoch}")
        if self.has_ongoing_txn(producer_id, epoch):
            return None
        verification = self.verifications.get(producer_id)
        if verification is None:
            verification = self.verifications[producer_id] = Verification(
                sequence, epoch, supports_epoch_bump, now_ms)
        else:
            verification.include(sequence, epoch)
        return verification.guard

    # --- the leader's check ----------------------------------------------------------------

    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int, offset: int,
              is_transactional: bool = False,
              verification=VERIFICATION_OFF) -> BatchMetadata | None:
        """Validate a client's data batch (rules 1-5 of the module docstring); return the
        original batch if it is a duplicate. ``offset`` is where it would be written;
        ``verification`` the guard its produce was confirmed under (or UNVERIFIED, or
        VERIFICATION_OFF)."""
        entry = self.producers.get(producer_id)
        if entry is not None:
            duplicate = entry.find_duplicate(epoch, first_seq, last_seq)
            if duplicate is not None:
                return duplicate
            if epoch < entry.producer_epoch:
                raise KafkaError(Errors.INVALID_PRODUCER_EPOCH,
                                 f"Epoch of producer {producer_id} at offset {offset} in "
                                 f"{self.topic_partition} is {epoch}, which is smaller than "
                                 f"the last seen epoch {entry.producer_epoch}")
        pending = self.verifications.get(producer_id)
        if is_transactional and not self.has_ongoing_txn(producer_id, epoch) \
                and verification is not VERIFICATION_OFF \
                and (pending is None or verification is not pending.guard):
            raise KafkaError(Errors.INVALID_TXN_STATE,
                             f"Record was not part of an ongoing transaction: producer "
                             f"{producer_id} at offset {offset} in {self.topic_partition}")
        self._check_sequence(entry, pending, producer_id, epoch, first_seq, offset)
        if (entry is not None and not is_transactional and entry.current_txn_first_offset >= 0
                and epoch == entry.producer_epoch):
            raise KafkaError(Errors.INVALID_TXN_STATE,
                             f"Expected transactional write from producer {producer_id} at "
                             f"offset {offset} in partition {self.topic_partition}")
        return None

    def _check_sequence(self, entry, pending, producer_id, epoch, first_seq, offset) -> None:
        has_batches = entry is not None and bool(entry.batches)
        if pending is not None:
            if pending.supports_epoch_bump and first_seq != 0 and not has_batches:
                raise KafkaError(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                 f"Invalid sequence number for producer {producer_id} at offset "
                                 f"{offset} in partition {self.topic_partition}: {first_seq} "
                                 f"(incoming seq. number). Expected sequence 0 for transactions "
                                 f"v2 idempotent producer with no existing state.")
            if first_seq > pending.lowest_seq:
                raise KafkaError(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                 f"Out of order sequence number for producer {producer_id} at "
                                 f"offset {offset} in partition {self.topic_partition}: "
                                 f"{first_seq} (incoming seq. number), {pending.lowest_seq} "
                                 f"(earliest seen sequence)")
        if entry is None or entry.producer_epoch == NO_EPOCH:
            return  # a producer this partition does not know may start anywhere
        if epoch != entry.producer_epoch:
            if first_seq != 0:
                raise KafkaError(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                 f"Invalid sequence number for new epoch of producer "
                                 f"{producer_id} at offset {offset} in {self.topic_partition}: "
                                 f"{epoch} (request epoch), {first_seq} (seq. number), "
                                 f"{entry.producer_epoch} (current producer epoch)")
        elif not _in_sequence(entry.last_seq, first_seq):
            raise KafkaError(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                             f"Out of order sequence number for producer {producer_id} at "
                             f"offset {offset} in {self.topic_partition}: {first_seq} "
                             f"(incoming seq. number), {entry.last_seq} (current end sequence "
                             f"number)")

    def update(self, producer_id: int, epoch: int, last_seq: int, first_offset: int,
               last_offset: int, timestamp: int, is_transactional: bool = False) -> None:
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerStateEntry(producer_id)
        entry.add_batch(epoch, last_seq, last_offset, last_offset - first_offset, timestamp)
        if is_transactional:
            self.verifications.pop(producer_id, None)  # written: the verification is over
            if entry.current_txn_first_offset < 0:
                entry.current_txn_first_offset = first_offset
                self.ongoing_txns[producer_id] = first_offset

    def replay(self, header, marker=None) -> CompletedTxn | None:
        """Apply a batch read back from the log (recovery) or replicated (a follower): no
        validation. ``marker`` is ``(aborted, coordinator_epoch)`` for a transaction marker
        (None for other control batches); returns the transaction a marker closed."""
        if header.producer_id < 0:
            return None
        if header.is_control:
            if marker is not None:
                return self.complete_txn(header.producer_id, header.producer_epoch, marker[1],
                                         header.base_offset, marker[0], header.max_timestamp)
            entry = self.producers.get(header.producer_id)
            if entry is None:
                entry = self.producers[header.producer_id] = ProducerStateEntry(header.producer_id)
            if header.producer_epoch > entry.producer_epoch:
                entry.move_to_epoch(header.producer_epoch)
            return None
        self.update(header.producer_id, header.producer_epoch, header.last_sequence,
                    header.base_offset, header.last_offset, header.max_timestamp,
                    header.is_transactional)
        return None

    def remove_expired(self, now_ms: int, expiration_ms: int) -> None:
        if not self.producers and not self.verifications:
            return  # most partitions, every retention round
        expired = [pid for pid, entry in self.producers.items()
                   if entry.current_txn_first_offset < 0
                   and now_ms - entry.last_timestamp >= expiration_ms]
        for pid in expired:
            del self.producers[pid]
        stale = [pid for pid, v in self.verifications.items()
                 if now_ms - v.created_ms >= expiration_ms]
        for pid in stale:
            del self.verifications[pid]

    def truncate(self) -> None:
        self.producers.clear()
        self.ongoing_txns.clear()
        self.verifications.clear()

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

    def take_snapshot(self, offset: int, into_dir: str | None = None) -> None:
        """Write the producers' state at ``offset``; ``into_dir``: into another log's dir (a
        log moved to another log dir takes its current log's state)."""
        path = self.snapshot_path(offset)
        if into_dir is not None:
            path = os.path.join(into_dir, os.path.basename(path))
        write_atomic(path, encode_snapshot(self.producers.values()))

    def delete_snapshot(self, offset: int) -> None:
        try:
            os.unlink(self.snapshot_path(offset))
        except FileNotFoundError:
            pass

    def delete_snapshots_above(self, offset: int) -> None:
        for snap in self.snapshot_offsets():
            if snap > offset:
                self.delete_snapshot(snap)

    def delete_snapshots_at_or_below(self, offset: int) -> None:
        for snap in self.snapshot_offsets():
            if snap <= offset:
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
            fields = (last.last_seq, last.last_offset, last.offset_delta, entry.last_timestamp)
        else:
            fields = (NO_SEQUENCE, -1, 0, entry.last_timestamp)
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
        entry.last_timestamp = timestamp
        entry.coordinator_epoch = coordinator_epoch
        entry.current_txn_first_offset = txn_first_offset
        entries.append(entry)
    return entries
