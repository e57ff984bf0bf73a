"""Spark's Kafka connector (``spark-sql-kafka-0-10``) against kbroker, driven from PySpark.

Spark is the one client of the matrix that does not fit the produce/consume driver contract: it
reads and writes DataFrames. So it has this module instead of a driver, and reports its results as
the ``spark`` client through ``conftest.py`` (see there).

- **batch read**: ``spark.read.format("kafka")`` of a 3-partition topic produced by confluent-kafka,
  with ``startingOffsets``/``endingOffsets`` as "earliest"/"latest" and as per-partition JSON
  (including -2/-1), by timestamp, and with ``includeHeaders``; the rows are compared exactly
  (key, value, topic, partition, offset, timestamp, timestampType, headers).
- **streaming**: a Structured Streaming query reads a topic, counts per key, and writes the counts
  to another topic with a checkpoint; it runs twice (``availableNow``) with more input in between,
  the second time resuming from the checkpoint. Every input record must be counted exactly once,
  and the output topic's last value per key must be the total count.
- **read_committed**: ``kafka.isolation.level=read_committed`` over a transactional producer's
  committed and aborted transactions reads exactly the committed rows.
- **batch write**: ``df.write.format("kafka")`` with keys, null keys, headers and explicit
  partitions, read back with confluent-kafka.

What the connector does on the wire: the driver resolves offsets with the AdminClient
(Metadata, ListOffsets; Spark 4 default ``useDeprecatedOffsetFetching=false``), executors read
with ``assign()`` + ``seek()`` (Fetch, ListOffsets) and never commit; the sink is an idempotent
KafkaProducer (InitProducerId, Produce). Nothing here needs consumer groups.

One SparkSession (one JVM, C1 only) for the module: local[2], no UI, 2 shuffle partitions. The connector
jars come from Maven Central through ``compat_tests/spark/pom.xml``
(``scripts/install-test-deps.sh`` copies them to ``target/jars``) and reach Spark with
``spark.jars``; Spark's own ``--packages`` resolution is not used.
"""

from __future__ import annotations

import collections
import json
import os
import re
import time
import types
import urllib.request
import uuid
from pathlib import Path

import pytest

from compat_tests import security
from kbroker.cluster.processes import free_port
from tests.integration.clients import (CODEC_IDS, Rec, Wire, confluent_consumer, consume_confluent,
                                       ensure_topic, produce_confluent, running_broker,
                                       segment_batches, segment_files)

HERE = Path(__file__).resolve().parent
JARS_DIR = HERE / "target" / "jars"
REQUIRED_JARS = ("spark-sql-kafka-0-10_", "spark-token-provider-kafka-0-10_", "kafka-clients-",
                 "commons-pool2-")
BASE_TS = 1_700_000_000_000  # CreateTime of produced records (ms), far from "now" on purpose
# What a classic consumer group needs from the broker (FindCoordinator, JoinGroup, Heartbeat,
# LeaveGroup, SyncGroup, OffsetCommit, OffsetFetch).
GROUP_APIS = {10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup",
              14: "SyncGroup", 8: "OffsetCommit", 9: "OffsetFetch"}


def pom_spark_version() -> str:
    match = re.search(r"<spark\.version>([^<]+)</spark\.version>", (HERE / "pom.xml").read_text())
    assert match, "compat_tests/spark/pom.xml has no <spark.version>"
    return match.group(1)


def connector_jars() -> list[Path]:
    jars = sorted(JARS_DIR.glob("*.jar"))
    missing = [p for p in REQUIRED_JARS if not any(j.name.startswith(p) for j in jars)]
    if missing:
        pytest.fail(f"Spark's Kafka connector jars are missing from {JARS_DIR} ({missing}): run "
                    f"`bash scripts/install-test-deps.sh` (mvn dependency:copy-dependencies)",
                    pytrace=False)
    return jars


# --- fixtures -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    # Topics are created explicitly; auto-creation stays off so a connector that relied on it
    # would show up as a failure rather than silently work. Groups (the deprecated offset
    # fetching) rebalance at once: one member per group, nobody to wait for.
    # The schema registry is on for the from_avro cell (issue 37).
    registry = f"http://127.0.0.1:{free_port()}"
    with running_broker(tmp_path_factory.mktemp("spark-broker") / "data",
                        {"auto.create.topics.enable": "false",
                         "group.initial.rebalance.delay.ms": "0",
                         "schema.registry.listeners": registry}) as process:
        process.registry = registry
        yield process


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    try:
        import pyspark
        from pyspark.sql import SparkSession
    except ImportError:
        pytest.fail("pyspark is not installed: run `bash scripts/install-test-deps.sh`",
                    pytrace=False)
    jars = connector_jars()
    assert pyspark.__version__ == pom_spark_version(), (
        f"pyspark {pyspark.__version__} but the connector in pom.xml is {pom_spark_version()}: "
        "they must match exactly")
    scratch = tmp_path_factory.mktemp("spark")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no hostname lookup, no warning
    session = (SparkSession.builder
               .master("local[2]")
               .appName("kbroker-compat")
               .config("spark.jars", ",".join(str(j) for j in jars))
               .config("spark.driver.memory", "768m")
               # C1 only and the serial collector, as the tests' other client JVMs: a module of
               # small queries is mostly the JVM warming up, and C2 compiling hot Spark code it
               # will not run long enough to pay back (93 -> 42 s of CPU for this module,
               # 85 -> 75 s of wall time, measured one after the other)
               .config("spark.driver.extraJavaOptions",
                       "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.local.dir", str(scratch / "local"))
               .config("spark.sql.warehouse.dir", str(scratch / "warehouse"))
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.sql.streaming.stopTimeout", "30s")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def new_topic(broker, prefix: str, partitions: int) -> str:
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    ensure_topic(broker.bootstrap, topic, partitions)
    return topic


def kafka_options(broker) -> dict:
    # Short timeouts so a broker problem fails the test in seconds, not minutes.
    return {"kafka.bootstrap.servers": broker.bootstrap,
            "kafka.request.timeout.ms": "15000",
            "kafka.default.api.timeout.ms": "20000"}


def read_batch(spark, broker, topic: str, **options):
    reader = spark.read.format("kafka").options(**kafka_options(broker)).option("subscribe", topic)
    for name, value in options.items():
        reader = reader.option(name, value if isinstance(value, str) else json.dumps(value))
    return reader.load()


# The rows Spark reads, as plain tuples; the timestamp in ms (UTC session) to compare exactly.
ROW_SQL = ["key", "value", "topic", "partition", "offset", "unix_millis(timestamp) AS ts",
           "timestampType"]


def rows_of(df, with_headers: bool = False) -> list[tuple]:
    cols = ROW_SQL + (["headers"] if with_headers else [])
    out = []
    for row in df.selectExpr(*cols).collect():
        item = (None if row.key is None else bytes(row.key),
                None if row.value is None else bytes(row.value),
                row.topic, row.partition, row.offset, row.ts, row.timestampType)
        if with_headers:
            item += (tuple((h.key, None if h.value is None else bytes(h.value))
                           for h in (row.headers or ())),)
        out.append(item)
    return sorted(out, key=lambda r: (r[3], r[4]))


def codecs_on_disk(broker, topic: str, partition: int) -> set[int]:
    return {b.codec for path in segment_files(broker, topic, partition)
            for b in segment_batches(path)}


# --- batch read -----------------------------------------------------------------------------------

PARTITIONS = 3
PER_PARTITION = 6
CODECS_BY_PARTITION = ("zstd", "lz4", "snappy")


@pytest.fixture(scope="module")
def produced(broker):
    """A 3-partition topic with 6 records per partition, produced by confluent-kafka in zstd, lz4
    and snappy batches: keys (one null per partition), values, CreateTime timestamps
    BASE_TS + 1000*i, headers including a repeated key and a null value. Returns (topic, expected
    rows with headers)."""
    topic = new_topic(broker, "spark-batch", PARTITIONS)
    records = []
    for p in range(PARTITIONS):
        for i in range(PER_PARTITION):
            n = p * PER_PARTITION + i
            headers = ((("h-index", str(n).encode()), ("h-dup", b"a"), ("h-dup", b"b"),
                        ("h-null", None)) if i % 2 == 0 else ())
            # Compressible values: librdkafka sends a batch uncompressed when the codec does not
            # make it smaller, which a lone tiny record (a batch split under load) would not be.
            records.append(Rec(value=f"value-{n}-".encode() + b"x" * 200,
                               key=None if i == 3 else f"key-{n}".encode(),
                               headers=headers, partition=p, timestamp=BASE_TS + 1000 * n))
    # Each partition in its own codec: Spark's kafka-clients decompresses what the broker kept.
    acks = []
    for p, codec in enumerate(CODECS_BY_PARTITION):
        acks += produce_confluent(broker.bootstrap, topic,
                                  [r for r in records if r.partition == p], codec=codec)
    expected = []
    for rec, ack in zip(records, acks):
        assert (ack.partition, ack.timestamp) == (rec.partition, rec.timestamp)
        expected.append((rec.key, rec.value, topic, ack.partition, ack.offset, rec.timestamp, 0,
                         tuple(rec.headers)))
    expected.sort(key=lambda r: (r[3], r[4]))
    assert [r[4] for r in expected if r[3] == 0] == list(range(PER_PARTITION))
    for p, codec in enumerate(CODECS_BY_PARTITION):
        assert codecs_on_disk(broker, topic, p) == {CODEC_IDS[codec]}
    return topic, expected


@pytest.mark.compat("spark: batch read, earliest to latest, headers")
def test_batch_read_earliest_latest_with_headers(spark, broker, produced):
    topic, expected = produced
    df = read_batch(spark, broker, topic, startingOffsets="earliest", endingOffsets="latest",
                    includeHeaders="true")
    assert rows_of(df, with_headers=True) == expected
    # minPartitions splits each partition's range: several tasks fetch from inside one batch.
    split = read_batch(spark, broker, topic, includeHeaders="true", minPartitions="9")
    assert split.rdd.getNumPartitions() > PARTITIONS
    assert rows_of(split, with_headers=True) == expected


@pytest.mark.compat("spark: batch read, default offsets")
def test_batch_read_default_offsets_without_headers(spark, broker, produced):
    # Batch defaults are earliest..latest; without includeHeaders there is no headers column.
    topic, expected = produced
    df = read_batch(spark, broker, topic)
    assert "headers" not in df.columns
    assert rows_of(df) == [r[:7] for r in expected]


@pytest.mark.compat("spark: batch read, per-partition offsets")
def test_batch_read_json_offsets(spark, broker, produced):
    # -2 = earliest, -1 = latest in the JSON forms.
    topic, expected = produced
    starting = {topic: {"0": 2, "1": -2, "2": 5}}
    ending = {topic: {"0": 4, "1": 3, "2": -1}}
    df = read_batch(spark, broker, topic, startingOffsets=starting, endingOffsets=ending,
                    includeHeaders="true")
    bounds = {0: (2, 4), 1: (0, 3), 2: (5, PER_PARTITION)}
    want = [r for r in expected if bounds[r[3]][0] <= r[4] < bounds[r[3]][1]]
    assert rows_of(df, with_headers=True) == want


@pytest.mark.compat("spark: batch read, by timestamp")
def test_batch_read_by_timestamp(spark, broker, produced):
    # startingOffsetsByTimestamp/endingOffsetsByTimestamp go through ListOffsets with a timestamp:
    # the first offset whose timestamp is >= the given one.
    topic, expected = produced
    def ts(p, i):
        return BASE_TS + 1000 * (p * PER_PARTITION + i)
    starting = {topic: {"0": ts(0, 1), "1": ts(1, 0) - 500, "2": ts(2, 4) - 1}}
    ending = {topic: {"0": ts(0, 3) + 1, "1": ts(1, 2), "2": ts(2, 5) + 10_000_000}}
    df = read_batch(spark, broker, topic, startingOffsetsByTimestamp=starting,
                    endingOffsetsByTimestamp=ending)
    # ending: first offset with timestamp >= t (exclusive bound); past the last record = latest.
    bounds = {0: (1, 4), 1: (0, 2), 2: (4, PER_PARTITION)}
    want = [r[:7] for r in expected if bounds[r[3]][0] <= r[4] < bounds[r[3]][1]]
    assert rows_of(df) == want


@pytest.mark.compat("spark: batch read, assign and SQL")
def test_batch_read_assign_and_sql(spark, broker, produced):
    # "assign" instead of "subscribe", then plain Spark SQL over the result.
    topic, expected = produced
    df = (spark.read.format("kafka").options(**kafka_options(broker))
          .option("assign", json.dumps({topic: [0, 2]})).load())
    df.createOrReplaceTempView("kbroker_assigned")
    got = spark.sql("SELECT partition, count(*) AS n, min(offset) AS lo, max(offset) AS hi, "
                    "count(key) AS keyed FROM kbroker_assigned GROUP BY partition "
                    "ORDER BY partition").collect()
    assert [tuple(r) for r in got] == [(0, PER_PARTITION, 0, PER_PARTITION - 1, PER_PARTITION - 1),
                                       (2, PER_PARTITION, 0, PER_PARTITION - 1, PER_PARTITION - 1)]


@pytest.mark.compat("spark: batch read, subscribePattern")
def test_batch_read_subscribe_pattern(spark, broker, produced):
    # subscribePattern lists every topic (Metadata for all topics) and keeps the matching ones;
    # a second topic with the same prefix must be read too, and nothing else.
    topic, expected = produced
    prefix = topic + "-also"
    other = new_topic(broker, prefix, 1)
    produce_confluent(broker.bootstrap, other, [Rec(value=b"other", key=b"o")])
    df = (spark.read.format("kafka").options(**kafka_options(broker))
          .option("subscribePattern", re.escape(topic) + ".*").load())
    got = rows_of(df)
    assert [r for r in got if r[2] == topic] == [r[:7] for r in expected]
    assert [(r[0], r[1], r[3], r[4]) for r in got if r[2] == other] == [(b"o", b"other", 0, 0)]
    assert {r[2] for r in got} == {topic, other}


@pytest.mark.compat("spark: batch read after delete records")
def test_batch_read_after_delete_records(spark, broker, cell):
    # The log start offset moves to 4: "earliest" must start there (ListOffsets), and a read from
    # offset 1 meets OFFSET_OUT_OF_RANGE on Fetch, which Spark reports or skips (failOnDataLoss).
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    topic = new_topic(broker, "spark-deleted", 1)
    produce_confluent(broker.bootstrap, topic,
                      [Rec(value=f"v{i}".encode(), key=f"k{i}".encode()) for i in range(10)])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.delete_records([TopicPartition(topic, 0, 4)], request_timeout=15)
    for future in futures.values():
        assert future.result(timeout=20).low_watermark == 4

    def offsets(df):
        return [r.offset for r in df.select("offset").orderBy("offset").collect()]

    assert offsets(read_batch(spark, broker, topic)) == list(range(4, 10))
    from_one = {topic: {"0": 1}}
    assert offsets(read_batch(spark, broker, topic, startingOffsets=from_one,
                              failOnDataLoss="false")) == list(range(4, 10))
    with pytest.raises(Exception) as raised:
        read_batch(spark, broker, topic, startingOffsets=from_one, failOnDataLoss="true").collect()
    message = str(raised.value)
    found = re.search(r"[^\n]*(data (may have been|was) lost|out of range|OffsetOutOfRange)[^\n]*",
                      message, re.I)
    assert found, message[:2000]
    cell.note(f"failOnDataLoss=true reports: {found.group(0).strip()[:300]}")


# --- batch write ----------------------------------------------------------------------------------

@pytest.mark.compat("spark: batch write")
def test_batch_write(spark, broker):
    from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, StringType, StructField,
                                   StructType)

    topic = new_topic(broker, "spark-write", 2)
    header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    schema = StructType([StructField("key", StringType()), StructField("value", StringType()),
                         StructField("partition", IntegerType()),
                         StructField("headers", ArrayType(header))])
    data = []
    for i in range(20):
        data.append((None if i % 5 == 4 else f"k{i}", f"v{i}", i % 2,
                     [("h-index", str(i).encode()), ("h-null", None)] if i % 3 == 0 else []))
    df = spark.createDataFrame(data, schema)
    (df.write.format("kafka").options(**kafka_options(broker)).option("topic", topic)
     .option("kafka.linger.ms", "5").option("kafka.compression.type", "gzip").save())

    got = consume_confluent(broker.bootstrap, topic, len(data), timeout=30)
    assert len(got) == len(data), f"read back {len(got)} of {len(data)} records"
    seen = sorted(((g.partition, None if g.key is None else g.key.decode(), g.value.decode(),
                    tuple(g.headers)) for g in got), key=lambda r: r[2])
    want = sorted(((p, k, v, tuple((hk, hv) for hk, hv in h)) for k, v, p, h in data),
                  key=lambda r: r[2])
    assert seen == want
    # Offsets are dense per partition; timestamps are the producer's CreateTime ("now").
    for p in (0, 1):
        assert [g.offset for g in got if g.partition == p] == list(range(10))
    now = int(time.time() * 1000)
    assert all(g.timestamp_type == "create" and now - 600_000 < g.timestamp <= now + 1000
               for g in got)
    # The sink's KafkaProducer compresses as asked and is idempotent (kafka-clients' default).
    for p in (0, 1):
        batches = [b for path in segment_files(broker, topic, p) for b in segment_batches(path)]
        assert {b.codec for b in batches} == {CODEC_IDS["gzip"]}
        assert all(b.producer_id >= 0 for b in batches), "expected idempotent batches"


# --- structured streaming -------------------------------------------------------------------------

def run_counting_query(spark, broker, source: str, sink: str, checkpoint: Path,
                       source_options: dict | None = None) -> int:
    """Run the count-per-key query once over everything available (trigger availableNow), writing
    update-mode counts to ``sink``; returns the number of input rows its batches processed."""
    counts = (spark.readStream.format("kafka").options(**kafka_options(broker))
              .option("subscribe", source).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "25")  # several micro-batches per run
              .options(**(source_options or {}))
              .load()
              .selectExpr("CAST(key AS STRING) AS k")
              .groupBy("k").count()
              .selectExpr("k AS key", "CAST(count AS STRING) AS value"))
    query = (counts.writeStream.format("kafka").options(**kafka_options(broker))
             .option("topic", sink).option("checkpointLocation", str(checkpoint))
             .outputMode("update").trigger(availableNow=True).queryName(f"count-{sink}")
             .start())
    try:
        finished = query.awaitTermination(120)
        assert finished, "the availableNow query did not finish within 120 s"
        if query.exception() is not None:
            raise AssertionError(f"streaming query failed: {query.exception()}")
        return sum(p["numInputRows"] for p in query.recentProgress)
    finally:
        query.stop()


def produce_keyed(broker, topic: str, counts: dict[str, int], start: int) -> None:
    records = []
    for key, n in counts.items():
        records += [Rec(value=f"{key}-{start + i}".encode(), key=key.encode()) for i in range(n)]
    produce_confluent(broker.bootstrap, topic, records)


def latest_per_key(broker, topic: str) -> dict[str, int]:
    """The last value per key of the 1-partition ``topic`` (update mode emits a key each time its
    count changes, so the last one is the current count)."""
    from confluent_kafka import TopicPartition

    consumer = confluent_consumer(broker.bootstrap)
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        consumer.close()
    got = consume_confluent(broker.bootstrap, topic, high - low, partitions=[0], timeout=20)
    assert len(got) == high - low, f"read {len(got)} of {high - low} records of {topic}"
    return {g.key.decode(): int(g.value) for g in got}  # in offset order: the last one wins


@pytest.mark.compat("spark: streaming count, restart from checkpoint")
def test_streaming_count_restart_from_checkpoint(spark, broker, tmp_path):
    source = new_topic(broker, "spark-stream-in", 2)
    sink = new_topic(broker, "spark-stream-out", 1)
    checkpoint = tmp_path / "checkpoint"

    first = {"alpha": 17, "beta": 9, "gamma": 30}
    produce_keyed(broker, source, first, 0)
    processed = run_counting_query(spark, broker, source, sink, checkpoint)
    assert processed == sum(first.values())
    assert latest_per_key(broker, sink) == first

    second = {"alpha": 4, "delta": 12, "gamma": 1}
    produce_keyed(broker, source, second, 1000)
    processed = run_counting_query(spark, broker, source, sink, checkpoint)
    # Resumed from the checkpoint: only the new records are read, each exactly once.
    assert processed == sum(second.values())
    total = collections.Counter(first) + collections.Counter(second)
    assert latest_per_key(broker, sink) == dict(total)

    # A third run with no new input reads nothing and changes nothing.
    assert run_counting_query(spark, broker, source, sink, checkpoint) == 0
    assert latest_per_key(broker, sink) == dict(total)


@pytest.mark.compat("spark: streaming with consumer-group offset fetching")
def test_streaming_deprecated_offset_fetching(spark, broker, tmp_path):
    # spark.sql.streaming.kafka.useDeprecatedOffsetFetching=true: the driver finds offsets with a
    # KafkaConsumer that subscribe()s under a generated group id (JoinGroup/SyncGroup/Heartbeat/
    # LeaveGroup), as Spark < 3.4 always did; executors still assign().
    with Wire(broker.bootstrap) as wire:
        wire.api_versions()
        missing = [name for key, name in GROUP_APIS.items() if key not in wire.versions]
    if missing:
        pytest.skip("pending: consumer groups not implemented in broker (ApiVersions does not "
                    f"advertise {', '.join(missing)})")
    source = new_topic(broker, "spark-group-in", 2)
    sink = new_topic(broker, "spark-group-out", 1)
    checkpoint = tmp_path / "checkpoint"
    conf = "spark.sql.streaming.kafka.useDeprecatedOffsetFetching"
    spark.conf.set(conf, "true")
    try:
        first = {"alpha": 11, "beta": 30}
        produce_keyed(broker, source, first, 0)
        assert run_counting_query(spark, broker, source, sink, checkpoint,
                                  {"kafka.session.timeout.ms": "10000"}) == sum(first.values())
        assert latest_per_key(broker, sink) == first
        second = {"beta": 5, "gamma": 7}
        produce_keyed(broker, source, second, 1000)
        assert run_counting_query(spark, broker, source, sink, checkpoint,
                                  {"kafka.session.timeout.ms": "10000"}) == sum(second.values())
        assert latest_per_key(broker, sink) == dict(collections.Counter(first)
                                                    + collections.Counter(second))
    finally:
        spark.conf.unset(conf)


@pytest.mark.compat("spark: batch read, read_committed")
def test_batch_read_committed_hides_aborted_transactions(spark, broker):
    """``kafka.isolation.level=read_committed``: rows of a committed transaction are read, rows of
    an aborted one are not (read_uncommitted still sees both); the control markers between them
    are skipped."""
    topic = new_topic(broker, "spark-txn", 2)
    write_then_read_transactions(spark, broker, topic, f"spark-{topic}")


def write_then_read_transactions(spark, broker, topic: str, transactional_id: str,
                                 partitions: int = 2) -> None:
    """confluent-kafka commits, aborts and commits a transaction of 6 records over
    ``partitions``; Spark reads exactly the committed ones read_committed, all 18
    read_uncommitted."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap,
                         "transactional.id": transactional_id, "log_level": 0})
    producer.init_transactions(30)
    for round_, outcome in enumerate(("commit", "abort", "commit")):
        producer.begin_transaction()
        for i in range(6):
            producer.produce(topic, value=f"{outcome}-{round_}-{i}".encode(),
                             partition=i % partitions)
        if outcome == "commit":
            producer.commit_transaction(30)
        else:
            producer.flush(30)  # librdkafka drops unsent records on abort; these must reach the log
            producer.abort_transaction(30)

    committed = read_batch(spark, broker, topic, startingOffsets="earliest",
                           **{"kafka.isolation.level": "read_committed"})
    values = sorted(bytes(r.value).decode() for r in committed.select("value").collect())
    assert values == sorted(f"commit-{r}-{i}" for r in (0, 2) for i in range(6))
    everything = read_batch(spark, broker, topic, startingOffsets="earliest",
                            **{"kafka.isolation.level": "read_uncommitted"})
    got = sorted((r.partition, r.offset, bytes(r.value).decode()) for r in everything.collect())
    assert len(got) == 18, got


# --- security -------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", security.MODES, ids=[m.name.replace(" ", "-")
                                                       for m in security.MODES])
@pytest.mark.compat("security: {mode}", client="spark")
def test_secured_write_then_read(spark, secure_broker, mode):
    """The security columns for Spark: the connector passes ``kafka.``-prefixed settings to its
    kafka-clients, so each mode is Kafka's own client settings with that prefix (PEM stores,
    sasl.jaas.config). A batch write then a batch read of the same rows on the mode's listener."""
    topic = f"spark-sec-{uuid.uuid4().hex[:8]}"
    ensure_topic(secure_broker.plaintext, topic, 1)
    if mode.client_cert:
        secure_broker.grant_only(topic, security.MTLS_PRINCIPAL)
    options = {"kafka.bootstrap.servers": secure_broker.bootstrap(mode),
               "kafka.request.timeout.ms": "15000", "kafka.default.api.timeout.ms": "20000",
               **{f"kafka.{k}": v for k, v in
                  security.settings("java", mode, secure_broker.ca).items()}}
    data = [(f"k{i}", f"v{i}") for i in range(6)]
    (spark.createDataFrame(data, "key string, value string").write.format("kafka")
     .options(**options).option("topic", topic).save())
    rows = (spark.read.format("kafka").options(**options).option("subscribe", topic)
            .option("startingOffsets", "earliest").load()
            .selectExpr("CAST(key AS STRING) AS k", "CAST(value AS STRING) AS v", "offset")
            .collect())
    # Two write tasks share the producer, so the rows' order in the log is not the data's.
    assert sorted((r.k, r.v) for r in rows) == data
    assert sorted(r.offset for r in rows) == list(range(len(data)))


# --- the cluster column ---------------------------------------------------------------------------
# Spark against the three-broker cluster of compat_tests/test_cluster.py (RF 3, min.insync.replicas
# 2): the connector finds every partition's leader from Metadata and reads from it.

@pytest.fixture
def on_cluster(cluster):
    """The cluster where this module's helpers take a broker (they use ``.bootstrap``)."""
    return types.SimpleNamespace(bootstrap=cluster.bootstrap_servers)


@pytest.mark.compat("cluster: produce acks=all idempotent, consume", client="spark")
def test_cluster_batch_write_then_read(spark, cluster, on_cluster, cell):
    """A batch write (the sink's KafkaProducer: acks=all, idempotent by kafka-clients' defaults)
    of 12 keyed rows to a 3-partition topic whose leaders are spread over the brokers, then a
    batch read of it, earliest to latest."""
    from compat_tests.test_cluster import create_topic

    topic = f"cl-spark-pc-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, topic, partitions=3)
    data = [(f"k{i}", f"v{i}") for i in range(12)]
    (spark.createDataFrame(data, "key string, value string").write.format("kafka")
     .options(**kafka_options(on_cluster)).option("topic", topic).save())
    rows = (read_batch(spark, on_cluster, topic, startingOffsets="earliest",
                       endingOffsets="latest")
            .selectExpr("CAST(key AS STRING) AS k", "CAST(value AS STRING) AS v", "partition")
            .collect())
    assert sorted((r.k, r.v) for r in rows) == sorted(data)
    spread = {r.partition for r in rows}
    assert len(spread) > 1, f"12 keyed rows all landed in partitions {spread} of 3"


@pytest.mark.compat("cluster: groups: commit and resume", client="spark")
def test_cluster_streaming_count_resumes_from_checkpoint(spark, cluster, on_cluster, cell,
                                                        tmp_path):
    """Spark's way to resume: its offsets live in the query's checkpoint, not in a consumer group
    (the connector assigns partitions and never commits). The streaming count of this module,
    run on the cluster, then restarted from its checkpoint with more input."""
    from compat_tests.test_cluster import create_topic

    source, sink = (f"cl-spark-{name}-{uuid.uuid4().hex[:8]}" for name in ("in", "out"))
    create_topic(cluster, source, partitions=2)
    create_topic(cluster, sink, partitions=1)
    checkpoint = tmp_path / "checkpoint"
    first = {"alpha": 17, "beta": 9, "gamma": 30}
    produce_keyed(on_cluster, source, first, 0)
    assert run_counting_query(spark, on_cluster, source, sink, checkpoint) == sum(first.values())
    second = {"alpha": 4, "delta": 12}
    produce_keyed(on_cluster, source, second, 1000)
    assert run_counting_query(spark, on_cluster, source, sink, checkpoint) == \
        sum(second.values())
    assert latest_per_key(on_cluster, sink) == dict(collections.Counter(first)
                                                    + collections.Counter(second))
    cell.note(f"Spark keeps offsets in its checkpoint, not a group: {sum(first.values())} rows, "
              f"then {sum(second.values())} more after the restart, each counted once")


@pytest.mark.compat("cluster: transactions", client="spark")
def test_cluster_read_committed_across_brokers(spark, cluster, on_cluster, cell):
    """Spark has no transactional writer; this is the reading side. confluent-kafka's
    transactions go to a partition led by a broker that is not their coordinator (so the markers
    cross brokers), and Spark reads them read_committed and read_uncommitted."""
    from compat_tests.test_cluster import create_topic, transaction_coordinator

    topic = f"cl-spark-txn-{uuid.uuid4().hex[:8]}"
    transactional_id = f"spark-{topic}"
    coordinator = transaction_coordinator(cluster, transactional_id)
    leader = next(b["id"] for b in cluster.brokers if b["id"] != coordinator)
    create_topic(cluster, topic, partitions=1, leader=leader)
    write_then_read_transactions(spark, on_cluster, topic, transactional_id, partitions=1)
    cell.note(f"read side only (Spark writes no transactions): coordinator broker {coordinator}, "
              f"partition leader broker {leader}")


# --- from_avro with the schema registry (issue 37) ------------------------------------------------
# Spark reads Avro records in Confluent's wire format with ``from_avro`` (spark-avro), using the
# writers' schemas from kbroker's schema registry (issue 37).
#
# confluent-kafka's ``AvroSerializer`` registers two versions of a schema (the second adds a field
# with a default) under ``<topic>-value`` and writes records with each to a 2-partition topic of a
# broker whose registry is on. Spark reads the topic with its Kafka source, takes the schema id
# from each value's 5-byte header (magic byte 0, big-endian id), fetches that id's schema from the
# registry over HTTP, strips the header and decodes the rest with ``from_avro``, as a Spark job
# reading CDC or Confluent-serialized topics does. Every decoded row must equal the value written,
# under the id it was written with.

FIELDS_V1 = [{"name": "index", "type": "long"},
             {"name": "name", "type": "string"},
             {"name": "tags", "type": {"type": "array", "items": "string"}},
             {"name": "note", "type": ["null", "string"], "default": None}]
V1 = {"type": "record", "name": "Reading", "namespace": "dev.kbroker.spark",
      "fields": FIELDS_V1}
V2 = {**V1, "fields": [*FIELDS_V1, {"name": "unit", "type": "string", "default": "none"}]}
PER_VERSION = 8


def values(version: int) -> list[dict]:
    out = []
    for i in range(PER_VERSION):
        value = {"index": 1_700_000_000_000 + 1000 * version + i,
                 "name": f"reading-{version}-{i}-é", "tags": [f"t{j}" for j in range(i % 3)],
                 "note": None if i % 2 else f"note {i}"}
        if version == 2:
            value["unit"] = f"unit-{i}"
        out.append(value)
    return out


def schema_by_id(registry: str, ident: int) -> str:
    with urllib.request.urlopen(f"{registry}/schemas/ids/{ident}", timeout=10) as response:
        return json.load(response)["schema"]


@pytest.mark.compat("spark: from_avro of Confluent wire-format records, schemas from the registry")
def test_from_avro_with_registry_schemas(spark, broker):
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from pyspark.sql.avro.functions import from_avro
    from pyspark.sql.functions import col, expr

    topic = new_topic(broker, "spark-avro", 2)
    client = SchemaRegistryClient({"url": broker.registry})
    context = SerializationContext(topic, MessageField.VALUE)
    written = {}  # key -> (schema id, value)
    records = []
    for version, schema in ((1, V1), (2, V2)):
        serializer = AvroSerializer(client, json.dumps(schema))
        for i, value in enumerate(values(version)):
            wire = serializer(value, context)
            key = f"v{version}-{i}"
            written[key] = (int.from_bytes(wire[1:5], "big"), value)
            records.append(Rec(value=wire, key=key.encode(), partition=i % 2))
    produce_confluent(broker.bootstrap, topic, records)
    ids = sorted({ident for ident, _ in written.values()})
    assert len(ids) == 2, f"two schema versions, ids {ids}"

    raw = (spark.read.format("kafka").options(**kafka_options(broker))
           .option("subscribe", topic).load()
           .select(col("key").cast("string").alias("key"),
                   expr("substring(value, 1, 1)").alias("magic"),
                   expr("conv(hex(substring(value, 2, 4)), 16, 10)").cast("int").alias("id"),
                   expr("substring(value, 6, length(value) - 5)").alias("payload")))
    assert {bytes(r.magic) for r in raw.select("magic").distinct().collect()} == {b"\0"}
    assert sorted(r.id for r in raw.select("id").distinct().collect()) == ids
    got = {}
    for ident in ids:
        decoded = (raw.where(col("id") == ident)
                   .select("key", from_avro(col("payload"), schema_by_id(broker.registry, ident),
                                            {"mode": "FAILFAST"}).alias("value")))
        for row in decoded.collect():
            assert row.key not in got, f"{row.key} read twice"
            got[row.key] = (ident, row.value.asDict(recursive=True))
    assert got == written
