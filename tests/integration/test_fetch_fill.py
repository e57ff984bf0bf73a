"""A fetch fills the response: every whole batch that fits in the partition's max bytes.

Batches of ~16 KiB (a Java or kafka-python producer's default ``batch.size``) are larger than
``index.interval.bytes`` (4 KiB), so nearly every batch has an offset index entry; the broker once
answered every fetch of such a log with one batch (15 KB per fetch where Kafka sends ~1 MB).
Here a real client (kafka-python) produces with 16 KiB batches and consumes with its default
``max_partition_fetch_bytes`` (1 MiB), and its own ``fetch-size-max`` / ``fetch-size-avg``
metrics say how many bytes each fetch brought; a raw Fetch checks the cut is at a batch boundary.
"""

from __future__ import annotations

from tests.integration.clients import (Wire, ensure_topic, partition_dir, running_broker,
                                       segment_batches, segment_files)

RECORDS = 4000
VALUE = b"v" * 1000
MAX_PARTITION_FETCH_BYTES = 1024 * 1024  # kafka-python's (and Kafka's) consumer default


def test_fetch_returns_every_batch_that_fits(tmp_path):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    with running_broker(tmp_path / "data") as broker:
        topic = "fetch-fill"
        ensure_topic(broker.bootstrap, topic)
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, batch_size=16384,
                                 linger_ms=50, acks=1)
        for _ in range(RECORDS):
            producer.send(topic, VALUE, partition=0)
        producer.flush(30)
        producer.close(timeout=5)

        (log_file,) = segment_files(broker, topic, 0)
        sizes = [batch.batch_length + 12 for batch in segment_batches(log_file)]
        assert min(sizes[:-1]) > 4096, "the producer did not make batches above the interval"
        index = partition_dir(broker, topic, 0) / log_file.with_suffix(".index").name
        assert index.stat().st_size >= 8 * (len(sizes) // 2)  # most batches are indexed
        batches_per_fetch = MAX_PARTITION_FETCH_BYTES // max(sizes)

        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None,
                                 enable_auto_commit=False, fetch_max_wait_ms=100)
        try:
            consumer.assign([TopicPartition(topic, 0)])
            consumer.seek_to_beginning()
            seen = 0
            for _ in range(200):
                for records in consumer.poll(timeout_ms=200, max_records=RECORDS).values():
                    seen += len(records)
                if seen >= RECORDS:
                    break
            metrics = consumer.metrics()["consumer-fetch-manager-metrics"]
        finally:
            consumer.close()
        assert seen == RECORDS
        # kafka-python counts a little less than the wire bytes per batch; one batch per fetch
        # (the old fault) would read ~16 KB here.
        assert metrics["fetch-size-max"] > 0.9 * MAX_PARTITION_FETCH_BYTES
        assert metrics["fetch-size-avg"] > 10 * max(sizes)

        # One raw fetch from the middle: as many whole batches as fit, cut at a boundary.
        with Wire(broker.bootstrap) as wire:
            data, batches = wire.fetch(topic, 0, RECORDS // 3,
                                       max_bytes=MAX_PARTITION_FETCH_BYTES)
        size = len(bytes(data.records))
        assert size == sum(batch.batch_length + 12 for batch in batches)  # whole batches only
        assert len(batches) >= batches_per_fetch
        assert size <= MAX_PARTITION_FETCH_BYTES
        assert batches[0].base_offset <= RECORDS // 3 <= batches[0].last_offset
