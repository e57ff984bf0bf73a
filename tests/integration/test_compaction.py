"""Log compaction end to end: a real broker cleans a cleanup.policy=compact topic in the
background, real clients see the latest value of every key (kbroker.log.cleaner)."""

from __future__ import annotations

import time

from kbroker.log.checkpoint import read_offset_checkpoint
from tests.integration.clients import (CONSUMERS, ensure_topic, parse_batches, partition_dir,
                                       produce_confluent, running_broker, segment_files,
                                       wait_until)

KEYS = 40
UPDATES = 30
SEGMENT_BYTES = 4096


def _disk_bytes(broker, topic):
    return sum(path.stat().st_size for path in segment_files(broker, topic, 0))


def _consume_to(bootstrap, topic, last_offset, timeout=20.0):
    """Every record of partition 0 from the beginning through ``last_offset`` (confluent)."""
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    from tests.integration.clients import confluent_consumer

    consumer = confluent_consumer(bootstrap)
    got = []
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + timeout
        while (not got or got[-1][0] < last_offset) and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=1000, timeout=0.2):
                assert msg.error() is None, msg.error()
                got.append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()
    assert got and got[-1][0] == last_offset, f"consumed up to {got[-1:]} of {last_offset}"
    return got


def test_compaction_keeps_the_latest_value_per_key(tmp_path):
    overrides = {"num.partitions": 1, "log.cleaner.backoff.ms": 200}
    with running_broker(tmp_path / "data", overrides) as broker:
        topic = "compacted"
        ensure_topic(broker.bootstrap, topic, 1, {
            "cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES),
            "min.cleanable.dirty.ratio": "0.01"})
        records = [(f"key-{k:03d}".encode(), f"value-{k}-{u}-".encode() + b"x" * 60)
                   for u in range(UPDATES) for k in range(KEYS)]
        records += [(b"key-000", None), (b"key-001", None)]   # tombstones: kept for a day
        acks = produce_confluent(broker.bootstrap, topic, records, batch_size=800)
        last_offset = max(ack.offset for ack in acks)
        latest = {}
        for key, value in records:
            latest[key] = value
        produced_bytes = len(records) * 90

        # The cleaner works in the background until every non-active segment is clean.
        checkpoint = broker.data_dir / "cleaner-offset-checkpoint"

        def cleaned_up_to_active_segment():
            if not checkpoint.exists():
                return None
            cleaned = read_offset_checkpoint(str(checkpoint)).get((topic, 0), 0)
            active_base = int(segment_files(broker, topic, 0)[-1].stem)
            return cleaned if cleaned >= active_base > 0 else None

        cleaned_up_to = wait_until(cleaned_up_to_active_segment, 20, 0.2,
                                   "the cleaner to reach the active segment")
        assert _disk_bytes(broker, topic) < produced_bytes / 4

        got = _consume_to(broker.bootstrap, topic, last_offset)
        offsets = [offset for offset, _, _ in got]
        assert offsets == sorted(set(offsets))
        seen = {}
        for _, key, value in got:
            seen[key] = value
        assert seen == latest
        # Below the cleaned offset there is one record per key; above it (the active segment
        # and what the cleaner has not reached) a few more.
        cleaned_keys = [key for offset, key, _ in got if offset < cleaned_up_to]
        assert len(cleaned_keys) == len(set(cleaned_keys))
        assert len(got) <= KEYS + 2 + SEGMENT_BYTES // 80

        # Each offset kept its original record; every batch on disk is well formed.
        by_offset = {ack.offset: records[i] for i, ack in enumerate(acks)}
        assert all(by_offset[offset] == (key, value) for offset, key, value in got)
        for path in segment_files(broker, topic, 0):
            for batch in parse_batches(path.read_bytes()):
                assert batch.crc_ok
        assert not [p for p in partition_dir(broker, topic, 0).iterdir()
                    if p.suffix in (".cleaned", ".swap", ".deleted")]

        # Other clients read the compacted log (record gaps, empty batches) the same way.
        for consumer in ("kafka-python", "aiokafka"):
            other = CONSUMERS[consumer](broker.bootstrap, topic, len(got), partitions=[0])
            assert [(g.offset, g.key, g.value) for g in other] == got, consumer

    # After a clean restart the compacted log reads the same.
    with running_broker(tmp_path / "data", overrides) as broker:
        assert _consume_to(broker.bootstrap, topic, last_offset) == got
