"""The log cleaner over real partition logs in a temp dir (kbroker.log.cleaner*)."""

import asyncio
import os
import shutil
import subprocess
from types import SimpleNamespace

import pytest

from kbroker.log import LogConfig, LogManager, PartitionLog
from kbroker.log.checkpoint import read_offset_checkpoint
from kbroker.config import BrokerConfig
from kbroker.log import cleaner as cleaner_module
from kbroker.log.cleaner import CLEANER_OFFSET_CHECKPOINT, LogCleaner
from kbroker.protocol.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from kbroker.protocol.records import RecordBatchBuilder, decode_records, iter_batches
from tests.log.conftest import NOW, append, kafka_java

DAY = 24 * 3600 * 1000


def compact_config(**overrides):
    settings = dict(cleanup_policy=["compact"], segment_bytes=2048,
                    min_cleanable_dirty_ratio=0.01, index_interval_bytes=256)
    settings.update(overrides)
    return LogConfig(**settings)


@pytest.fixture
def data_dir(tmp_path):
    return str(tmp_path / "data")


@pytest.fixture
def manager(data_dir):
    managers = []

    def make():
        m = LogManager([data_dir], 1, "cluster-1")
        m.open(now_ms=NOW)
        managers.append(m)
        return m

    yield make
    for m in managers:
        m._unlock()


def keyed_batch(pairs, ts=NOW, compression=NONE, producer_id=-1, producer_epoch=-1,
                base_sequence=-1):
    builder = RecordBatchBuilder(compression=compression, producer_id=producer_id,
                                 producer_epoch=producer_epoch, base_sequence=base_sequence)
    for key, value in pairs:
        builder.append(ts, key, value, [("h", b"x")])
    return builder.build()


def produce_updates(log, keys=20, rounds=10, per_batch=5, ts=NOW, compression=NONE):
    """``rounds`` updates of every key; returns {(key, value): offset}."""
    offsets = {}
    pairs = [(f"key-{k}".encode(), f"value-{k}-{r}".encode() * 3)
             for r in range(rounds) for k in range(keys)]
    for i in range(0, len(pairs), per_batch):
        chunk = pairs[i:i + per_batch]
        result = append(log, keyed_batch(chunk, ts, compression), now=ts)
        for n, pair in enumerate(chunk):
            offsets[pair] = result.first_offset + n
    return offsets


def records_of(log):
    """Every record as (offset, key, value), checking batches on the way."""
    out = []
    previous_end = log.log_start_offset
    for header in iter_batches(read_all_segments(log)):
        assert header.is_valid_crc()
        assert header.base_offset >= previous_end
        previous_end = header.next_offset
        for record in decode_records(header, 1 << 30):
            offset = record.offset(header)
            assert header.base_offset <= offset <= header.last_offset
            out.append((offset, record.key, record.value))
    offsets = [o for o, _, _ in out]
    assert offsets == sorted(set(offsets))
    return out


def read_all_segments(log):
    data = b""
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        result = log.read(offset, 1 << 30)
        chunk = b"".join(region.read() for region in result.regions)
        if not chunk:
            break
        data += chunk
        offset = list(iter_batches(chunk))[-1].next_offset
    return data


def check_segments(log):
    """Segments keep their order; a cleaned one may end before the next begins (a gap)."""
    for segment, following in zip(log.segments, log.segments[1:]):
        assert segment.base_offset <= segment.next_offset <= following.base_offset


def latest(records):
    values = {}
    for offset, key, value in records:
        values[key] = (offset, value)
    return values


def test_keeps_the_latest_record_per_key(manager, data_dir):
    m = manager()
    log = m.create("t", 0, compact_config())
    offsets = produce_updates(log)
    log.roll(NOW)
    before = records_of(log)
    size_before = log.size_in_bytes
    segments_before = len(log.segments)
    cleaner = LogCleaner(m)
    assert cleaner.clean_once(NOW)
    after = records_of(log)
    assert len(after) == 20
    assert latest(after) == latest(before)
    for offset, key, value in after:
        assert offsets[(key, value)] == offset
    assert log.size_in_bytes < size_before / 5
    assert len(log.segments) == segments_before   # groups are formed from the sizes before
    assert log.log_end_offset == 200
    check_segments(log)
    # Nothing left to clean, and the checkpoint says so.
    assert not cleaner.clean_once(NOW)
    checkpoint = read_offset_checkpoint(os.path.join(data_dir, CLEANER_OFFSET_CHECKPOINT))
    assert checkpoint == {("t", 0): 200}
    # The indexes of the cleaned segments work: reads from every offset find the right batch.
    for offset, key, value in after:
        result = log.read(offset, 1)
        header = next(iter_batches(result.regions[0].read()))
        assert header.base_offset <= offset <= header.last_offset


def test_small_cleaned_segments_are_grouped_in_the_next_round(manager):
    m = manager()
    log = m.create("t", 0, compact_config())
    produce_updates(log)
    log.roll(NOW)
    cleaner = LogCleaner(m)
    assert cleaner.clean_once(NOW)
    assert len(log.segments) == 7
    produce_updates(log, rounds=2)
    log.roll(NOW)
    assert cleaner.clean_once(NOW)
    # The six small cleaned segments form one group; the new dirty ones are too big to join.
    assert [s.base_offset for s in log.segments] == [0, 200, 235, 240]
    assert len(records_of(log)) == 20
    check_segments(log)


def test_reopened_log_reads_the_same(manager, data_dir):
    m = manager()
    log = m.create("t", 0, compact_config())
    produce_updates(log)
    log.roll(NOW)
    LogCleaner(m).clean_once(NOW)
    after = records_of(log)
    m.close()
    m2 = manager()
    reopened = m2.get("t", 0)
    reopened.config = compact_config()
    assert records_of(reopened) == after
    # The restarted cleaner finds its checkpoint: nothing is dirty.
    assert not LogCleaner(m2).clean_once(NOW)


def test_truncation_below_the_checkpoint_makes_the_rest_dirty(manager, data_dir):
    m = manager()
    log = m.create("t", 0, compact_config())
    produce_updates(log)
    log.roll(NOW)
    cleaner = LogCleaner(m)
    assert cleaner.clean_once(NOW)
    assert cleaner.first_dirty_offset(log) == 200
    cleaner.maybe_truncate_checkpoint(log, 150)
    assert cleaner.first_dirty_offset(log) == 150
    assert read_offset_checkpoint(os.path.join(data_dir, CLEANER_OFFSET_CHECKPOINT)) == {
        ("t", 0): 150}
    cleaner.maybe_truncate_checkpoint(log, 180)
    assert cleaner.first_dirty_offset(log) == 150


def test_only_non_active_segments_are_cleaned(manager):
    m = manager()
    log = m.create("t", 0, compact_config(segment_bytes=1 << 20))
    produce_updates(log, rounds=5)
    assert not LogCleaner(m).clean_once(NOW)   # one active segment only
    assert len(records_of(log)) == 100


def test_dirty_ratio_threshold(manager):
    m = manager()
    log = m.create("t", 0, compact_config(min_cleanable_dirty_ratio=0.5))
    produce_updates(log, rounds=10)
    log.roll(NOW)
    cleaner = LogCleaner(m)
    assert cleaner.clean_once(NOW)
    clean_size = log.size_in_bytes
    # A little dirty data: the ratio stays below 0.5.
    produce_updates(log, keys=3, rounds=1)
    log.roll(NOW)
    ltc = cleaner.grab_filthiest(NOW)
    assert ltc is None
    assert not cleaner.clean_once(NOW)
    # Much more dirty data than clean: cleaned.
    produce_updates(log, rounds=5)
    log.roll(NOW)
    ltc = cleaner.grab_filthiest(NOW)
    assert ltc is not None and ltc.cleanable_ratio > 0.5
    assert cleaner.clean_once(NOW)
    assert log.size_in_bytes < clean_size * 2
    assert len(records_of(log)) == 20


def test_never_cleans_past_the_high_watermark(manager):
    m = manager()
    log = m.create("t", 0, compact_config())
    produce_updates(log)
    log.roll(NOW)
    log.high_watermark = 50
    cleaner = LogCleaner(m)
    cleaner.clean_once(NOW)
    records = records_of(log)
    assert [o for o, _, _ in records if o >= 50] == list(range(50, 200))
    log.high_watermark = log.log_end_offset
    assert cleaner.clean_once(NOW)
    assert len(records_of(log)) == 20


def test_tombstones_kept_until_delete_retention_then_removed(manager):
    m = manager()
    log = m.create("t", 0, compact_config(delete_retention_ms=DAY))
    produce_updates(log, keys=5, rounds=4)
    append(log, keyed_batch([(b"key-1", None), (b"key-2", None)]))
    log.roll(NOW)
    cleaner = LogCleaner(m)
    assert cleaner.clean_once(NOW)
    records = records_of(log)
    assert {k: v for _, k, v in records} == {
        b"key-0": b"value-0-3" * 3, b"key-1": None, b"key-2": None,
        b"key-3": b"value-3-3" * 3, b"key-4": b"value-4-3" * 3}
    horizons = {header.delete_horizon_ms for header in iter_batches(read_all_segments(log))
                if header.has_delete_horizon}
    assert horizons == {NOW + DAY}
    # More dirty data before the horizon: the tombstones stay.
    produce_updates(log, keys=1, rounds=10)
    log.roll(NOW)
    assert cleaner.clean_once(NOW + DAY - 1)
    assert sum(v is None for _, _, v in records_of(log)) == 2
    # After the horizon the next round drops them.
    produce_updates(log, keys=1, rounds=10)
    log.roll(NOW)
    assert cleaner.clean_once(NOW + DAY)
    assert {k for _, k, _ in records_of(log)} == {b"key-0", b"key-3", b"key-4"}
    check_segments(log)


def test_min_compaction_lag(manager):
    m = manager()
    log = m.create("t", 0, compact_config(min_compaction_lag_ms=3600_000))
    produce_updates(log)
    log.roll(NOW)
    cleaner = LogCleaner(m)
    assert not cleaner.clean_once(NOW + 1000)
    assert len(records_of(log)) == 200
    assert cleaner.clean_once(NOW + 3600_001)
    assert len(records_of(log)) == 20


def test_min_compaction_lag_splits_the_dirty_section(manager):
    m = manager()
    log = m.create("t", 0, compact_config(min_compaction_lag_ms=3600_000))
    produce_updates(log, ts=NOW)
    log.roll(NOW)
    boundary = log.log_end_offset
    produce_updates(log, ts=NOW + 3600_000)
    log.roll(NOW + 3600_000)
    assert LogCleaner(m).clean_once(NOW + 3600_001)
    records = records_of(log)
    old = [r for r in records if r[0] < boundary]
    assert len(old) == 20
    assert [r[0] for r in records if r[0] >= boundary] == list(range(boundary, boundary + 200))


def test_max_compaction_lag_forces_cleaning(manager):
    m = manager()
    log = m.create("t", 0, compact_config(min_cleanable_dirty_ratio=0.99,
                                          max_compaction_lag_ms=60_000))
    produce_updates(log)
    log.roll(NOW)
    cleaner = LogCleaner(m)
    assert cleaner.clean_once(NOW)   # the first round: everything is dirty (ratio 1.0 > 0.99)
    produce_updates(log, keys=2, rounds=2)
    log.roll(NOW)
    assert not cleaner.clean_once(NOW + 1000)
    assert cleaner.clean_once(NOW + 60_001)
    assert len(records_of(log)) == 20


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_compressed_batches_are_recompressed_with_their_codec(manager, codec):
    m = manager()
    log = m.create("t", 0, compact_config())
    produce_updates(log, per_batch=7, compression=codec)
    log.roll(NOW)
    before = latest(records_of(log))
    assert LogCleaner(m).clean_once(NOW)
    after = records_of(log)
    assert len(after) == 20 and latest(after) == before
    for header in iter_batches(read_all_segments(log)):
        # A batch kept empty has no records to compress (Kafka's writeEmptyHeader).
        assert header.compression == (codec if header.record_count else NONE)


def test_offsets_and_batch_boundaries_are_kept(manager):
    m = manager()
    log = m.create("t", 0, compact_config())
    produce_updates(log)
    log.roll(NOW)
    before = {(h.base_offset, h.last_offset) for h in iter_batches(read_all_segments(log))}
    assert LogCleaner(m).clean_once(NOW)
    after = {(h.base_offset, h.last_offset) for h in iter_batches(read_all_segments(log))}
    # Every batch left is one of the originals with its base and last offset.
    assert after <= before
    assert max(last for _, last in after) == 199


def test_idempotent_producer_keeps_its_last_batch_and_state(manager, data_dir):
    m = manager()
    log = m.create("t", 0, compact_config())
    sequence = 0
    for r in range(6):
        pairs = [(b"a", b"%d" % r), (b"b", b"%d" % r)]
        append(log, keyed_batch(pairs, producer_id=7, producer_epoch=0, base_sequence=sequence))
        sequence += 2
    # Another writer supersedes everything the producer wrote.
    append(log, keyed_batch([(b"a", b"last"), (b"b", b"last")]))
    log.roll(NOW)
    last_batch_offsets = (10, 11)
    assert LogCleaner(m).clean_once(NOW)
    headers = list(iter_batches(read_all_segments(log)))
    kept = [h for h in headers if h.producer_id == 7]
    assert [(h.base_offset, h.last_offset, h.record_count, h.base_sequence) for h in kept] == [
        (last_batch_offsets[0], last_batch_offsets[1], 0, 10)]
    assert kept[0].is_valid_crc()
    # After a restart the producer state is rebuilt from the log (no snapshot): the next
    # sequence is accepted and a retry of the last batch is still a duplicate.
    m.close()
    for name in os.listdir(log.dir_path):
        if name.endswith(".snapshot"):
            os.unlink(os.path.join(log.dir_path, name))
    reopened = PartitionLog.open(log.dir_path, "t", 0, compact_config(), now_ms=NOW)
    retry = reopened.append_as_leader(
        keyed_batch([(b"a", b"5"), (b"b", b"5")], producer_id=7, producer_epoch=0,
                    base_sequence=10), 0, NOW)
    assert retry.duplicate and retry.first_offset == 10
    result = reopened.append_as_leader(
        keyed_batch([(b"a", b"6")], producer_id=7, producer_epoch=0, base_sequence=12), 0, NOW)
    assert not result.duplicate
    reopened.close()


def test_regions_of_replaced_segments_stay_readable(manager):
    m = manager()
    log = m.create("t", 0, compact_config())
    produce_updates(log)
    log.roll(NOW)
    region = log.read(0, 1 << 20).regions[0]
    expected = region.read()
    assert LogCleaner(m).clean_once(NOW)
    assert region.read() == expected


def test_log_changed_during_cleaning_abandons_the_round(manager):
    m = manager()
    log = m.create("t", 0, compact_config(cleanup_policy=["compact", "delete"]))
    produce_updates(log)
    log.roll(NOW)
    cleaner = LogCleaner(m)
    steps = cleaner._clean_filthiest(NOW)
    while not [n for n in os.listdir(log.dir_path) if n.endswith(".cleaned")]:
        next(steps)
    log.delete_records_before(100)      # deletes the segment being cleaned
    for _ in steps:
        pass
    assert not cleaner._cleaned
    assert not [n for n in os.listdir(log.dir_path) if n.endswith((".cleaned", ".swap"))]
    assert cleaner.clean_once(NOW)
    assert {k for _, k, _ in records_of(log)} == {f"key-{k}".encode() for k in range(20)}


def test_async_cleaning_gives_the_event_loop_back(manager, monkeypatch):
    monkeypatch.setattr(cleaner_module, "TIME_SLICE_S", 0)
    m = manager()
    log = m.create("t", 0, compact_config())
    produce_updates(log)
    log.roll(NOW)

    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        cleaned = await LogCleaner(m).clean_once_async(NOW)
        task.cancel()
        return cleaned, ticks

    cleaned, ticks = asyncio.run(main())
    assert cleaned and ticks > 50   # about one per batch
    assert len(records_of(log)) == 20


def test_topic_configs_reach_the_log_config():
    from kbroker.replica.log_settings import log_config_factory

    broker = BrokerConfig({"log.cleaner.min.cleanable.ratio": "0.2",
                           "log.cleaner.delete.retention.ms": "1000"})
    config = log_config_factory(broker)(SimpleNamespace(configs={
        "cleanup.policy": "compact", "min.compaction.lag.ms": "5",
        "max.compaction.lag.ms": "60000"}))
    assert config.cleanup_policy == ["compact"]
    assert config.min_cleanable_dirty_ratio == 0.2
    assert config.delete_retention_ms == 1000
    assert config.min_compaction_lag_ms == 5
    assert config.max_compaction_lag_ms == 60000


def test_kafka_dump_log_segments_reads_cleaned_segments(manager):
    m = manager()
    log = m.create("t", 0, compact_config())
    produce_updates(log, compression=ZSTD)
    for sequence in (0, 1):
        append(log, keyed_batch([(b"key-3", b"from-producer-%d" % sequence)], producer_id=5,
                                producer_epoch=0, base_sequence=sequence))
    append(log, keyed_batch([(b"key-1", None), (b"key-3", b"after")], compression=GZIP))
    log.roll(NOW)
    assert LogCleaner(m).clean_once(NOW)
    headers = list(iter_batches(read_all_segments(log)))
    assert any(h.has_delete_horizon for h in headers)
    assert any(h.record_count == 0 and h.producer_id == 5 for h in headers)
    for segment in log.segments:
        segment.flush()
    names = sorted(n for n in os.listdir(log.dir_path) if n.endswith((".log", ".index",
                                                                      ".timeindex")))
    paths = ",".join(os.path.join(log.dir_path, n) for n in names)
    out = subprocess.run([*kafka_java("org.apache.kafka.tools.DumpLogSegments"),
                          "--index-sanity-check",
                          "--files", paths], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Exception" not in out.stderr and "mismatch" not in out.stdout.lower()
    for name in names:
        if name.endswith((".index", ".timeindex")):
            assert f"{name} passed sanity check" in out.stdout or f"{name} is empty" in out.stdout
    out = subprocess.run([*kafka_java("org.apache.kafka.tools.DumpLogSegments"),
                          "--deep-iteration",
                          "--print-data-log", "--files", paths],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "Exception" not in out.stderr, out.stderr
    assert "isvalid: false" not in out.stdout
    assert out.stdout.count("baseOffset:") == len(headers)
    assert out.stdout.count("| offset:") == sum(h.record_count for h in headers)
    assert "deleteHorizonMs" in out.stdout or "DeleteHorizon" in out.stdout.replace(" ", "")


# --- crash safety ---------------------------------------------------------------------------

class SimulatedCrash(Exception):
    pass


def test_crash_at_each_step_recovers_to_before_or_after(manager, data_dir, monkeypatch,
                                                        tmp_path):
    m = manager()
    log = m.create("t", 0, compact_config(segment_bytes=1500))
    produce_updates(log, keys=10)
    log.roll(NOW)
    before = records_of(log)
    m.close()
    pristine = str(tmp_path / "pristine")
    shutil.copytree(log.dir_path, pristine)

    reference = PartitionLog.open(log.dir_path, "t", 0, compact_config(segment_bytes=1500),
                                  now_ms=NOW)
    ref_manager = _OneLog(reference, data_dir)
    LogCleaner(ref_manager).clean_once(NOW)
    after = records_of(reference)
    reference.close()
    assert len(after) == 10

    real_replace, real_unlink = os.replace, os.unlink
    outcomes = set()
    step = 0
    while True:
        shutil.rmtree(log.dir_path)
        shutil.copytree(pristine, log.dir_path)
        if os.path.exists(os.path.join(data_dir, CLEANER_OFFSET_CHECKPOINT)):
            os.unlink(os.path.join(data_dir, CLEANER_OFFSET_CHECKPOINT))
        victim = PartitionLog.open(log.dir_path, "t", 0, compact_config(segment_bytes=1500),
                                   now_ms=NOW)
        calls = 0

        def crashing(real):
            def call(*args, **kwargs):
                nonlocal calls
                calls += 1
                if calls > step:
                    raise SimulatedCrash()
                return real(*args, **kwargs)
            return call

        monkeypatch.setattr(os, "replace", crashing(real_replace))
        monkeypatch.setattr(os, "unlink", crashing(real_unlink))
        try:
            assert LogCleaner(_OneLog(victim, data_dir)).clean_once(NOW)
            crashed = False
        except SimulatedCrash:
            crashed = True
        finally:
            monkeypatch.setattr(os, "replace", real_replace)
            monkeypatch.setattr(os, "unlink", real_unlink)
        recovered = PartitionLog.open(log.dir_path, "t", 0, compact_config(segment_bytes=1500),
                                      now_ms=NOW, clean_shutdown=False)
        records = records_of(recovered)
        # Each group is swapped atomically: a crash between groups leaves some groups cleaned,
        # which is a valid compacted state too.
        assert set(after) <= set(records) <= set(before), f"crash after {step} renames/unlinks"
        assert latest(records) == latest(before)
        outcomes.add("before" if records == before else "after" if records == after
                     else "between")
        check_segments(recovered)
        leftovers = [n for n in os.listdir(log.dir_path)
                     if n.endswith((".cleaned", ".swap", ".deleted"))]
        assert not leftovers
        recovered.close()
        if not crashed:
            break
        step += 1
    assert step > 10 and outcomes == {"before", "between", "after"}, (step, outcomes)


class _OneLog:
    """The part of LogManager the cleaner uses, for one log."""

    def __init__(self, partition_log, data_dir):
        self.log = partition_log
        self.log_dirs = [data_dir]

    def all_logs(self):
        return [self.log]

    def get(self, topic, partition):
        return self.log

    def log_dir_of(self, topic, partition):
        return self.log_dirs[0]
