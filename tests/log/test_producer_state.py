import os

import pytest

from kbroker.log import LogConfig
from kbroker.log.producer_state import decode_snapshot
from kbroker.protocol.errors import Errors, KafkaError

from .conftest import append, make_batch

PID = 1000


def idempotent(seq, count=2, epoch=0, pid=PID):
    return make_batch(count, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def test_duplicates_of_the_last_five_batches(open_log):
    log = open_log()
    results = [append(log, idempotent(seq)) for seq in range(0, 14, 2)]   # 7 batches
    end = log.log_end_offset
    for original, seq in zip(results[2:], range(4, 14, 2)):
        dup = append(log, idempotent(seq))
        assert dup.duplicate
        assert (dup.first_offset, dup.last_offset) == (original.first_offset,
                                                        original.last_offset)
    assert log.log_end_offset == end
    # Older than the last five: an out-of-order sequence, not a duplicate.
    with pytest.raises(KafkaError) as e:
        log.append_as_leader(idempotent(2), 0)
    assert e.value.error == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert append(log, idempotent(14)).first_offset == end


def test_sequence_gap_and_epochs(open_log):
    log = open_log()
    append(log, idempotent(0, epoch=3))
    with pytest.raises(KafkaError) as e:
        log.append_as_leader(idempotent(5, epoch=3), 0)
    assert e.value.error == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    with pytest.raises(KafkaError) as e:
        log.append_as_leader(idempotent(2, epoch=2), 0)
    assert e.value.error == Errors.INVALID_PRODUCER_EPOCH
    with pytest.raises(KafkaError) as e:   # a new epoch must start at 0
        log.append_as_leader(idempotent(2, epoch=4), 0)
    assert e.value.error == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert not append(log, idempotent(0, epoch=4)).duplicate
    assert log.log_end_offset == 4
    # Unknown producers may start anywhere (Kafka 4 no longer answers UNKNOWN_PRODUCER_ID).
    assert append(log, idempotent(77, pid=5)).first_offset == 4


def test_sequence_wraps_at_int32_max(open_log):
    log = open_log()
    append(log, idempotent(2**31 - 2, count=2))      # sequences 2147483646, 2147483647
    assert append(log, idempotent(0)).first_offset == 2
    append(log, idempotent(2**31 - 1, count=3, pid=9))  # 2147483647, 0, 1
    assert append(log, idempotent(2, pid=9)).first_offset == 7
    assert append(log, idempotent(2**31 - 1, count=3, pid=9)).duplicate


def test_state_survives_restart(open_log, log_dir):
    config = LogConfig(segment_bytes=400)
    log = open_log(config)
    originals = [append(log, idempotent(seq)) for seq in range(0, 20, 2)]
    log.close()
    log = open_log(config, clean_shutdown=True)
    dup = append(log, idempotent(18))
    assert dup.duplicate and dup.first_offset == originals[-1].first_offset
    assert append(log, idempotent(20)).first_offset == 20
    # A snapshot keeps only each producer's last batch (Kafka's format)...
    log.flush()
    log = open_log(config, recovery_point=0)
    assert append(log, idempotent(20)).duplicate
    with pytest.raises(KafkaError):
        log.append_as_leader(idempotent(16), 0)
    # ...while a replay of the log restores the last five.
    for name in os.listdir(log_dir):
        if name.endswith(".snapshot"):
            os.unlink(os.path.join(log_dir, name))
    log = open_log(config, recovery_point=0)
    for seq in (12, 14, 16, 18, 20):
        assert append(log, idempotent(seq)).duplicate
    with pytest.raises(KafkaError) as e:
        log.append_as_leader(idempotent(30), 0)
    assert e.value.error == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_snapshot_file_format(open_log, log_dir):
    log = open_log()
    append(log, idempotent(0, count=3, epoch=2))
    append(log, idempotent(0, pid=7))
    log.close()
    with open(f"{log_dir}/{5:020d}.snapshot", "rb") as f:
        data = f.read()
    assert data[:2] == b"\x00\x01"
    assert len(data) == 2 + 4 + 4 + 2 * 46
    entries = {e.producer_id: e for e in decode_snapshot(data)}
    entry = entries[PID]
    assert entry.producer_epoch == 2
    batch = entry.batches[-1]
    assert (batch.first_seq, batch.last_seq, batch.first_offset, batch.last_offset) == (0, 2, 0, 2)
    assert entries[7].batches[-1].last_offset == 4
    corrupted = bytearray(data)
    corrupted[-1] ^= 1
    with pytest.raises(Exception):
        decode_snapshot(bytes(corrupted))
