"""Produce and consume over real sockets with confluent-kafka, kafka-python, aiokafka and kcat.

Covers: every codec with every client (each producer's data read back by all four consumers, and
the codec checked in the segment file on disk), keys / null keys / headers, CreateTime kept as
produced and LogAppendTime set by the broker (topic config and broker default), a 10-partition
topic whose partitions each round-trip in order, a record just under / just over
``message.max.bytes``, ListOffsets by timestamp / earliest / latest, and retention deleting old
segments by size and by time.
"""

from __future__ import annotations

import time

import pytest

from tests.integration.clients import (
    CLIENTS, CODEC_IDS, CODECS, CONSUMERS, CREATE_TOPICS, EARLIEST, LATEST,
    PRODUCERS, ProduceFailed, Rec, Wire, build_batch, confluent_consumer, ensure_topic, now_ms,
    partition_dir, running_broker, segment_batches, segment_files, skip_reason, wait_until,
)

N_RECORDS = 30


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One broker for the tests that only need topics of their own."""
    with running_broker(tmp_path_factory.mktemp("produce-consume") / "data",
                        {"num.partitions": 1}) as broker:
        yield broker


def _records(producer: str, n: int = N_RECORDS, base_ts: int | None = None) -> list[Rec]:
    """Compressible text values (kcat speaks lines), every 4th key null, headers with a repeated
    name and an empty value. kcat sends one header set for all records and no timestamps."""
    out = []
    for i in range(n):
        key = None if i % 4 == 3 else f"key-{i}".encode()
        value = (f"value-{i:04d}-" + "abcdefgh" * 24).encode()
        if producer == "kcat":
            headers = (("h-client", b"kcat"), ("h-dup", b"a"), ("h-dup", b"b"))
            ts = None
        else:
            headers = () if i % 2 == 0 else (("h-index", str(i).encode()), ("h-dup", b"a"),
                                             ("h-dup", b"b"), ("h-empty", b""))
            ts = base_ts + i if base_ts is not None else None
        out.append(Rec(value=value, key=key, headers=headers, timestamp=ts))
    return out


def _check_consumed(got, sent: list[Rec], partition: int, consumer: str,
                    ts_window: tuple[int, int] | None = None, ts_type: str = "create"):
    assert len(got) == len(sent), f"{consumer} read {len(got)} records, expected {len(sent)}"
    for offset, (g, rec) in enumerate(zip(got, sent)):
        where = f"{consumer} offset {offset}"
        assert (g.partition, g.offset) == (partition, offset), where
        assert g.key == rec.key, where
        assert g.value == rec.value, where
        assert tuple(g.headers) == tuple(rec.headers), where
        assert g.timestamp_type == ts_type, where
        if rec.timestamp is not None and ts_type == "create":
            assert g.timestamp == rec.timestamp, where
        elif ts_window is not None:
            assert ts_window[0] <= g.timestamp <= ts_window[1], \
                f"{where}: timestamp {g.timestamp} outside {ts_window}"


def _disk_codecs(broker, topic: str, partition: int = 0) -> set[int]:
    codecs = set()
    for path in segment_files(broker, topic, partition):
        for batch in segment_batches(path):
            codecs.add(batch.codec)
    return codecs


# --- every codec, every client ------------------------------------------------------------------

@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("producer", CLIENTS)
def test_roundtrip_every_codec(shared, producer, codec):
    reason = skip_reason(producer, codec)
    if reason:
        pytest.skip(reason)
    topic = f"rt-{producer}-{codec}"
    ensure_topic(shared.bootstrap, topic, 1)
    base_ts = now_ms() - 60_000
    sent = _records(producer, base_ts=base_ts)
    before = now_ms()
    acks = PRODUCERS[producer](shared.bootstrap, topic, sent, codec=codec)
    after = now_ms()
    if producer != "kcat":
        assert [(a.partition, a.offset) for a in acks] == [(0, i) for i in range(len(sent))]

    for consumer in CLIENTS:
        if consumer == "kafka-python" and skip_reason(consumer, codec):
            continue  # it cannot decompress this codec here (see skip_reason)
        got = CONSUMERS[consumer](shared.bootstrap, topic, len(sent), partitions=[0])
        _check_consumed(got, sent, 0, consumer, ts_window=(before - 1000, after + 1000))

    on_disk = _disk_codecs(shared, topic)
    assert on_disk == {CODEC_IDS[codec]}, f"batches on disk should be {codec}-compressed"


# --- timestamps ---------------------------------------------------------------------------------

def _log_append_time_roundtrip(broker, topic):
    old = now_ms() - 3_600_000  # CreateTime an hour ago: the broker must replace it
    sent = [Rec(value=f"lat-{i}".encode(), key=b"k", timestamp=old + i) for i in range(10)]
    before = now_ms()
    acks = PRODUCERS["confluent"](broker.bootstrap, topic, sent)
    after = now_ms()
    for ack in acks:
        assert before - 1000 <= ack.timestamp <= after + 1000, \
            "the produce response should carry the broker's LogAppendTime"
    batches = [b for p in segment_files(broker, topic, 0) for b in segment_batches(p)]
    assert batches and all(b.log_append_time for b in batches), \
        "batches on disk should have the LogAppendTime attribute"
    for consumer in CLIENTS:
        got = CONSUMERS[consumer](broker.bootstrap, topic, len(sent), partitions=[0])
        _check_consumed(got, sent, 0, consumer, ts_window=(before - 1000, after + 1000),
                        ts_type="append")


def test_log_append_time_topic_config(shared):
    with Wire(shared.bootstrap) as wire:
        wire.api_versions()
        if CREATE_TOPICS not in wire.versions:
            pytest.skip("CreateTopics is not served yet; see test_log_append_time_broker_default")
    topic = "log-append-time-topic"
    ensure_topic(shared.bootstrap, topic, 1, {"message.timestamp.type": "LogAppendTime"})
    _log_append_time_roundtrip(shared, topic)


def test_log_append_time_broker_default(tmp_path):
    with running_broker(tmp_path / "data", {"log.message.timestamp.type": "LogAppendTime",
                                            "num.partitions": 1}) as broker:
        ensure_topic(broker.bootstrap, "log-append-time-default", 1)
        _log_append_time_roundtrip(broker, "log-append-time-default")


# --- ten partitions -----------------------------------------------------------------------------

PARTITIONS = 10
PER_PARTITION = 12


def _partitioned_records(producer: str) -> list[Rec]:
    out = []
    for seq in range(PER_PARTITION):
        for p in range(PARTITIONS):
            headers = (("h", b"kcat"),) if producer == "kcat" else (("seq", str(seq).encode()),)
            out.append(Rec(value=f"p{p}-seq{seq:03d}".encode(), key=f"k{p}".encode(),
                           headers=headers, partition=p))
    return out


def _check_partitions(got, sent: list[Rec], consumer: str):
    by_partition: dict[int, list] = {}
    for g in got:
        by_partition.setdefault(g.partition, []).append(g)
    assert sorted(by_partition) == list(range(PARTITIONS)), f"{consumer}: partitions read"
    for p in range(PARTITIONS):
        expected = [r.value for r in sent if r.partition == p]
        records = by_partition[p]
        assert [g.offset for g in records] == list(range(len(expected))), f"{consumer} p{p}"
        assert [g.value for g in records] == expected, f"{consumer} p{p}: out of order or lost"


@pytest.mark.parametrize("producer", CLIENTS)
def test_ten_partitions_produce(shared, producer):
    topic = f"ten-{producer}"
    ensure_topic(shared.bootstrap, topic, PARTITIONS)
    sent = _partitioned_records(producer)
    if producer == "kcat":  # one kcat run per partition (-p)
        for p in range(PARTITIONS):
            PRODUCERS[producer](shared.bootstrap, topic, [r for r in sent if r.partition == p])
    else:
        acks = PRODUCERS[producer](shared.bootstrap, topic, sent, codec="none")
        for rec, ack in zip(sent, acks):
            assert ack.partition == rec.partition
    got = CONSUMERS["confluent"](shared.bootstrap, topic, len(sent))
    _check_partitions(got, sent, "confluent")


@pytest.fixture(scope="module")
def ten_partition_topic(shared):
    topic = "ten-consumers"
    ensure_topic(shared.bootstrap, topic, PARTITIONS)
    sent = _partitioned_records("confluent")
    PRODUCERS["confluent"](shared.bootstrap, topic, sent, codec="lz4")
    return topic, sent


@pytest.mark.parametrize("consumer", CLIENTS)
def test_ten_partitions_consume(shared, ten_partition_topic, consumer):
    topic, sent = ten_partition_topic
    got = CONSUMERS[consumer](shared.bootstrap, topic, len(sent))
    _check_partitions(got, sent, consumer)


def test_keyed_records_stay_on_one_partition(shared):
    """The client's partitioner decides; the broker must keep each key's records in order."""
    topic = "keyed"
    ensure_topic(shared.bootstrap, topic, PARTITIONS)
    sent = [Rec(value=f"{k}-{i}".encode(), key=f"user-{k}".encode())
            for i in range(10) for k in range(20)]
    acks = PRODUCERS["confluent"](shared.bootstrap, topic, sent)
    partition_of: dict[bytes, set] = {}
    for rec, ack in zip(sent, acks):
        partition_of.setdefault(rec.key, set()).add(ack.partition)
    assert all(len(ps) == 1 for ps in partition_of.values())
    assert len({next(iter(ps)) for ps in partition_of.values()}) > 1, "keys should spread"
    got = CONSUMERS["kafka-python"](shared.bootstrap, topic, len(sent))
    for key in partition_of:
        values = [g.value for g in got if g.key == key]
        assert values == [r.value for r in sent if r.key == key]


# --- message.max.bytes --------------------------------------------------------------------------

MAX_MESSAGE = 100_000


@pytest.fixture(scope="module")
def size_broker(tmp_path_factory):
    with running_broker(tmp_path_factory.mktemp("size") / "data",
                        {"num.partitions": 1, "message.max.bytes": MAX_MESSAGE}) as broker:
        yield broker


def _is_too_large(client: str, error) -> bool:
    if client == "confluent":
        from confluent_kafka import KafkaError

        return error.code() == KafkaError.MSG_SIZE_TOO_LARGE
    if client == "kafka-python":
        from kafka.errors import MessageSizeTooLargeError

        return isinstance(error, MessageSizeTooLargeError)
    from aiokafka.errors import MessageSizeTooLargeError

    return isinstance(error, MessageSizeTooLargeError)


@pytest.mark.parametrize("client", ["confluent", "kafka-python", "aiokafka"])
def test_message_just_under_and_over_max_bytes(size_broker, client):
    topic = f"size-{client}"
    ensure_topic(size_broker.bootstrap, topic, 1)
    produce = PRODUCERS[client]
    under = Rec(value=b"u" * (MAX_MESSAGE - 300), key=b"under")
    over = Rec(value=b"o" * (MAX_MESSAGE + 300), key=b"over")
    assert produce(size_broker.bootstrap, topic, [under])[0].offset == 0
    with pytest.raises(ProduceFailed) as failure:
        produce(size_broker.bootstrap, topic, [over])
    (index, error), = failure.value.errors
    assert _is_too_large(client, error), f"expected MSG_SIZE_TOO_LARGE, got {error!r}"
    # The broker keeps serving, on this and on new connections.
    assert produce(size_broker.bootstrap, topic, [Rec(value=b"after", key=b"k")])[0].offset == 1
    got = CONSUMERS["confluent"](size_broker.bootstrap, topic, 2, partitions=[0])
    assert [g.key for g in got] == [b"under", b"k"]
    assert got[0].value == under.value


def test_batch_size_boundary_is_exact(size_broker):
    """A batch of exactly message.max.bytes is accepted, one byte more is MESSAGE_TOO_LARGE with a
    message that names the limit (Kafka compares the whole batch, log overhead included)."""
    topic = "size-boundary"
    ensure_topic(size_broker.bootstrap, topic, 1)
    ts = now_ms()

    def batch_of(size: int) -> bytes:
        probe = build_batch([Rec(value=b"", key=None)], base_timestamp=ts)
        value_len = size - len(probe)
        # The record's length varints grow with the value; adjust until the size is exact.
        for extra in range(0, 8):
            batch = build_batch([Rec(value=b"x" * (value_len - extra))], base_timestamp=ts)
            if len(batch) == size:
                return batch
        raise AssertionError(f"cannot build a batch of exactly {size} bytes")

    with Wire(size_broker.bootstrap) as wire:
        exact = wire.produce(topic, 0, batch_of(MAX_MESSAGE))
        assert exact.error_code == 0, exact
        too_big = wire.produce(topic, 0, batch_of(MAX_MESSAGE + 1))
        assert too_big.error_code == 10, too_big  # MESSAGE_TOO_LARGE
        assert too_big.error_message and str(MAX_MESSAGE) in too_big.error_message, \
            f"the error should say what the limit is: {too_big.error_message!r}"
        assert wire.list_offset(topic, 0, LATEST).offset == 1


# --- ListOffsets by timestamp -------------------------------------------------------------------

@pytest.fixture(scope="module")
def timed_topic(shared):
    """Offsets 0-19: one batch each, timestamps t0 + 1000 * i. Offsets 20-29: one batch, record
    timestamps t1 + 10 * j. Offset 30: a record with an earlier timestamp (t0 + 500)."""
    topic = "timed"
    ensure_topic(shared.bootstrap, topic, 1)
    t0 = now_ms() - 1_000_000
    t1 = t0 + 100_000
    with Wire(shared.bootstrap) as wire:
        for i in range(20):
            r = wire.produce(topic, 0, build_batch([Rec(value=f"v{i}".encode(),
                                                        timestamp=t0 + 1000 * i)]))
            assert (r.error_code, r.base_offset) == (0, i)
        r = wire.produce(topic, 0, build_batch([Rec(value=f"w{j}".encode(), timestamp=t1 + 10 * j)
                                                for j in range(10)]))
        assert (r.error_code, r.base_offset) == (0, 20)
        r = wire.produce(topic, 0, build_batch([Rec(value=b"late", timestamp=t0 + 500)]))
        assert (r.error_code, r.base_offset) == (0, 30)
    return topic, t0, t1


def _expected_offsets(t0, t1):
    """(target timestamp, offset Kafka returns: the first offset whose timestamp is >= target)."""
    return [
        (t0 - 5000, 0),
        (t0, 0),
        (t0 + 1, 1),
        (t0 + 5000, 5),
        (t0 + 5500, 6),
        (t0 + 19_000, 19),
        (t0 + 19_001, 20),
        (t1 + 55, 26),  # inside one multi-record batch: the record's own offset
        (t1 + 90, 29),
        (t1 + 91, None),  # after every timestamp
    ]


def test_list_offsets_raw(shared, timed_topic):
    topic, t0, t1 = timed_topic
    with Wire(shared.bootstrap) as wire:
        for target, offset in _expected_offsets(t0, t1):
            r = wire.list_offset(topic, 0, target)
            assert r.error_code == 0
            if offset is None:
                assert (r.offset, r.timestamp) == (-1, -1), target - t0
            else:
                assert r.offset == offset, f"timestamp t0+{target - t0}"
                assert r.timestamp >= target
        assert wire.list_offset(topic, 0, EARLIEST).offset == 0
        assert wire.list_offset(topic, 0, LATEST).offset == 31
        if wire.version(2) >= 7:  # -3: the offset of the largest timestamp (KIP-734)
            r = wire.list_offset(topic, 0, -3)
            assert (r.offset, r.timestamp) == (29, t1 + 90)


def test_list_offsets_confluent(shared, timed_topic):
    from confluent_kafka import TopicPartition

    topic, t0, t1 = timed_topic
    consumer = confluent_consumer(shared.bootstrap)
    try:
        for target, offset in _expected_offsets(t0, t1):
            (tp,) = consumer.offsets_for_times([TopicPartition(topic, 0, target)], timeout=10)
            assert tp.error is None
            assert tp.offset == (offset if offset is not None else -1), target - t0
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        assert (low, high) == (0, 31)
    finally:
        consumer.close()


def test_list_offsets_kafka_python(shared, timed_topic):
    from kafka import KafkaConsumer, TopicPartition

    topic, t0, t1 = timed_topic
    tp = TopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=shared.bootstrap, group_id=None,
                             enable_auto_commit=False, request_timeout_ms=15000)
    try:
        for target, offset in _expected_offsets(t0, t1):
            found = consumer.offsets_for_times({tp: target})[tp]
            if offset is None:
                assert found is None, target - t0
            else:
                assert found is not None and found.offset == offset, target - t0
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 31}
    finally:
        consumer.close()


def test_list_offsets_aiokafka(shared, timed_topic):
    import asyncio

    from aiokafka import AIOKafkaConsumer, TopicPartition

    topic, t0, t1 = timed_topic
    tp = TopicPartition(topic, 0)

    async def run():
        consumer = AIOKafkaConsumer(bootstrap_servers=shared.bootstrap, group_id=None,
                                    enable_auto_commit=False, request_timeout_ms=15000)
        await consumer.start()
        try:
            for target, offset in _expected_offsets(t0, t1):
                found = (await consumer.offsets_for_times({tp: target}))[tp]
                if offset is None:
                    assert found is None, target - t0
                else:
                    assert found is not None and found.offset == offset, target - t0
            assert await consumer.beginning_offsets([tp]) == {tp: 0}
            assert await consumer.end_offsets([tp]) == {tp: 31}
        finally:
            await consumer.stop()

    asyncio.run(asyncio.wait_for(run(), 60))


# --- retention ----------------------------------------------------------------------------------

SEGMENT_BYTES = 2000


def _produce_one_batch_each(bootstrap, topic, values, timestamp=None):
    with Wire(bootstrap) as wire:
        offsets = []
        for value in values:
            r = wire.produce(topic, 0, build_batch([Rec(value=value, key=b"k",
                                                        timestamp=timestamp)]))
            assert r.error_code == 0, r
            offsets.append(r.base_offset)
        return offsets


def _check_log_start_moved(broker, topic, total: int, values):
    """The earliest offset moved up to the first remaining segment, and consuming from the
    beginning starts there and reads every remaining record intact."""
    with Wire(broker.bootstrap) as wire:
        start = wire.list_offset(topic, 0, EARLIEST).offset
        assert wire.list_offset(topic, 0, LATEST).offset == total
    first_segment = int(segment_files(broker, topic, 0)[0].stem)
    assert start == first_segment, "log start offset should be the first remaining segment's base"
    for consumer in ("confluent", "kafka-python"):
        got = CONSUMERS[consumer](broker.bootstrap, topic, total - start, partitions=[0])
        assert [g.offset for g in got] == list(range(start, total)), consumer
        assert [g.value for g in got] == values[start:], consumer
    return start


def test_retention_by_size_deletes_old_segments(tmp_path):
    overrides = {"num.partitions": 1, "log.segment.bytes": SEGMENT_BYTES,
                 "log.retention.bytes": 3 * SEGMENT_BYTES,
                 "log.retention.check.interval.ms": 200}
    with running_broker(tmp_path / "data", overrides) as broker:
        topic = "retained-by-size"
        ensure_topic(broker.bootstrap, topic, 1)
        values = [f"r{i:04d}-".encode() + b"z" * 150 for i in range(80)]
        _produce_one_batch_each(broker.bootstrap, topic, values)
        pdir = partition_dir(broker, topic, 0)

        def old_segments_gone():
            files = segment_files(broker, topic, 0)
            return files and int(files[0].stem) > 0 and \
                sum(f.stat().st_size for f in files) <= 4 * SEGMENT_BYTES
        wait_until(old_segments_gone, 10, 0.1, "retention.bytes to delete old segments")
        assert not (pdir / "00000000000000000000.log").exists()
        assert not (pdir / "00000000000000000000.index").exists()
        assert not (pdir / "00000000000000000000.timeindex").exists()
        start = _check_log_start_moved(broker, topic, len(values), values)
        assert start > 0
        # The broker keeps appending after the log start moved.
        assert _produce_one_batch_each(broker.bootstrap, topic, [b"tail"]) == [len(values)]


def test_retention_by_time_deletes_old_segments(tmp_path):
    overrides = {"num.partitions": 1, "log.segment.bytes": SEGMENT_BYTES,
                 "log.retention.ms": 600_000, "log.retention.check.interval.ms": 200}
    with running_broker(tmp_path / "data", overrides) as broker:
        topic = "retained-by-time"
        ensure_topic(broker.bootstrap, topic, 1)
        old = [f"old{i:04d}-".encode() + b"y" * 150 for i in range(40)]
        new = [f"new{i:04d}-".encode() + b"y" * 150 for i in range(12)]
        _produce_one_batch_each(broker.bootstrap, topic, old, timestamp=now_ms() - 3_600_000)
        _produce_one_batch_each(broker.bootstrap, topic, new, timestamp=now_ms())
        values = old + new

        def expired_segments_gone():
            files = segment_files(broker, topic, 0)
            return files and int(files[0].stem) > 0
        wait_until(expired_segments_gone, 10, 0.1, "retention.ms to delete expired segments")
        time.sleep(0.5)  # let every due check run
        start = _check_log_start_moved(broker, topic, len(values), values)
        # Every segment holding only hour-old records is gone; no segment with a new one is.
        assert start <= len(old), "a segment holding fresh records was deleted"
        for path in segment_files(broker, topic, 0)[:-1]:
            batches = segment_batches(path)
            assert max(b.max_timestamp for b in batches) >= now_ms() - 600_000, \
                f"{path.name} holds only expired records but was kept"


# --- fetching from inside a batch ---------------------------------------------------------------

@pytest.fixture(scope="module")
def one_big_batch(shared):
    topic = "mid-batch"
    ensure_topic(shared.bootstrap, topic, 1)
    values = [f"mid-{i:03d}".encode() for i in range(40)]
    with Wire(shared.bootstrap) as wire:
        r = wire.produce(topic, 0, build_batch([Rec(value=v) for v in values], codec="gzip"))
        assert (r.error_code, r.base_offset) == (0, 0)
    return topic, values


@pytest.mark.parametrize("consumer", CLIENTS)
def test_consume_from_an_offset_inside_a_compressed_batch(shared, one_big_batch, consumer):
    """The broker returns the whole batch holding the offset; the client skips what is before."""
    topic, values = one_big_batch
    got = CONSUMERS[consumer](shared.bootstrap, topic, 15, partitions=[0], start_offset=25)
    assert [g.offset for g in got] == list(range(25, 40))
    assert [g.value for g in got] == values[25:]
