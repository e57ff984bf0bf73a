#!/usr/bin/env python3
"""Spark against kbroker and Apache Kafka 4.4.0, in one run: the same PySpark workloads, one
broker after the other, each on a fresh broker with the same topic.

Workloads (local[2] Spark, PySpark 4.0.0 with its Kafka connector, ``spark.sql.shuffle.partitions``
2), on a topic of ``--records`` records of 100 bytes in 4 partitions, loaded by Kafka's
ProducerPerformance (not timed):

- ``batch read``: ``spark.read.format("kafka")`` of the whole topic, summing the value lengths
  (every record fetched and decoded);
- ``streaming``: the README example's shape, a Structured Streaming query counting records per
  group (the value's first letter) with ``availableNow`` over the first ``--stream-records``
  records (``maxOffsetsPerTrigger`` splits them into micro-batches), writing the counts to a topic
  with a checkpoint (output mode update);
- ``foreachBatch write``: a streaming query over the first ``--stream-records`` records whose
  ``foreachBatch`` writes each micro-batch to another topic with ``df.write.format("kafka")``.

Each time is wall-clock seconds from the query's start to its end, after a warm-up run of every
workload on a small topic in the same Spark session (JVM start, class loading and most of the JIT
are not measured). Whichever broker runs second still gains from a warmer JVM: run both orders
(``--targets kafka,kbroker`` then the default) and compare the sums.

    .venv/bin/python tools/bench_spark.py                        # 10 M records, ~3 min quiet
    .venv/bin/python tools/bench_spark.py --records 1000000 --stream-records 500000   # quick
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools" / "kafka_ref"))

import run_kafka  # noqa: E402

from examples.pyspark_streaming import DEFAULT_JARS, spark_session  # noqa: E402

PARTITIONS, RECORD_SIZE = 4, 100


def create_topic(bootstrap: str, name: str, partitions: int = PARTITIONS) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(60)


def load(bootstrap: str, topic: str, records: int) -> float:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "kafka_ref" / "run_kafka.py"), "run-class",
         "org.apache.kafka.tools.ProducerPerformance", "--", "--topic", topic, "--num-records",
         str(records), "--record-size", str(RECORD_SIZE), "--throughput", "-1",
         "--command-property", f"bootstrap.servers={bootstrap}", "acks=1", "linger.ms=20",
         "batch.size=262144"], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"loading {topic} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return time.monotonic() - started


def _progress(query) -> tuple[int, dict]:
    """Rows a finished query read, and where its micro-batches spent their time: Spark's own
    ``durationMs`` phases (``latestOffset``: the broker's offsets; ``addBatch``: reading and
    writing the batch; ``walCommit``/``commitOffsets``: the checkpoint), summed, in seconds."""
    progress = query.recentProgress
    phases: dict[str, float] = {}
    for report in progress:
        for phase, ms in (report.get("durationMs") or {}).items():
            phases[phase] = phases.get(phase, 0) + ms / 1000
    phases["micro-batches"] = len(progress)
    return sum(report["numInputRows"] for report in progress), phases


def offsets_json(topic: str, end: int) -> str:
    """Per-partition ending offsets covering the first ``end`` records (spread evenly)."""
    per = -(-end // PARTITIONS)
    return json.dumps({topic: {str(p): per for p in range(PARTITIONS)}})


def batch_read(spark, bootstrap: str, topic: str) -> tuple[float, int]:
    from pyspark.sql import functions as F

    started = time.monotonic()
    row = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
           .option("subscribe", topic).option("startingOffsets", "earliest")
           .option("endingOffsets", "latest").load()
           .agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("bytes")).collect()[0])
    return time.monotonic() - started, row["n"]


def streaming(spark, bootstrap: str, topic: str, sink: str, records: int, work: Path):
    create_topic(bootstrap, sink, 1)
    frame = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", max(records // 5, 1)).load()
             .where(f"offset < {-(-records // PARTITIONS)}")
             .selectExpr("substring(CAST(value AS STRING), 1, 1) AS letter")
             .groupBy("letter").count()
             .selectExpr("letter AS key", "CAST(count AS STRING) AS value"))
    started = time.monotonic()
    query = (frame.writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", sink).option("checkpointLocation", str(work / "ckpt-stream"))
             .outputMode("update").trigger(availableNow=True).start())
    query.awaitTermination()
    return time.monotonic() - started, *_progress(query)


def foreach_batch(spark, bootstrap: str, topic: str, sink: str, records: int, work: Path):
    create_topic(bootstrap, sink, PARTITIONS)

    def write(batch, _batch_id):
        (batch.selectExpr("key", "value").write.format("kafka")
         .option("kafka.bootstrap.servers", bootstrap).option("topic", sink).save())

    frame = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", max(records // 5, 1)).load()
             .where(f"offset < {-(-records // PARTITIONS)}"))
    started = time.monotonic()
    query = (frame.writeStream.foreachBatch(write)
             .option("checkpointLocation", str(work / "ckpt-foreach"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    return time.monotonic() - started, *_progress(query)


def start_kbroker(work: Path):
    from tests.broker_process import BrokerProcess

    return BrokerProcess(work / "kbroker-data", {
        "offsets.topic.num.partitions": "1", "group.initial.rebalance.delay.ms": "0"}).start()


def run_one(name: str, spark, args, work: Path) -> dict:
    if name == "kbroker":
        broker = start_kbroker(work)
        bootstrap, stop = broker.bootstrap, broker.stop
    else:
        kafka = run_kafka.start_kafka(port=run_kafka.free_port(), heap="1G", extra_props={
            "offsets.topic.num.partitions": "1", "group.initial.rebalance.delay.ms": "0"})
        bootstrap, stop = kafka.bootstrap, kafka.stop
    try:
        create_topic(bootstrap, "warmup")
        subprocess.run([sys.executable, str(ROOT / "tools" / "kafka_ref" / "run_kafka.py"),
                        "run-class", "org.apache.kafka.tools.ProducerPerformance", "--",
                        "--topic", "warmup", "--num-records", "10000", "--record-size", "100",
                        "--throughput", "-1", "--command-property",
                        f"bootstrap.servers={bootstrap}"], capture_output=True)
        # Every workload once on the small topic: Spark's JIT then warms the same code paths for
        # both brokers, and the one that runs second no longer wins for that alone.
        batch_read(spark, bootstrap, "warmup")
        streaming(spark, bootstrap, "warmup", "warmup-counts", 10_000, work / name / "warmup")
        foreach_batch(spark, bootstrap, "warmup", "warmup-copy", 10_000, work / name / "warmup")
        create_topic(bootstrap, "bench")
        loaded = load(bootstrap, "bench", args.records)
        out = {"load_s": round(loaded, 1)}
        seconds, rows = batch_read(spark, bootstrap, "bench")
        assert rows == args.records, (name, rows)
        out["batch read"] = (seconds, rows)
        seconds, rows, phases = streaming(spark, bootstrap, "bench", "bench-counts",
                                          args.stream_records, work / name)
        out["streaming"] = (seconds, rows, phases)
        seconds, rows, phases = foreach_batch(spark, bootstrap, "bench", "bench-copy",
                                              args.stream_records, work / name)
        out["foreachBatch write"] = (seconds, rows, phases)
        return out
    finally:
        stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--stream-records", type=int, default=2_000_000)
    parser.add_argument("--targets", default="kbroker,kafka",
                        help="the brokers, in the order they run (kafka,kbroker runs Kafka first "
                             "to alternate the order between runs; one name runs that one alone)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kbroker-bench-spark-"))
    spark = spark_session(DEFAULT_JARS)
    results = {}
    try:
        for name in args.targets.split(","):
            results[name] = run_one(name, spark, args, work)
            print(name, results[name], flush=True)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    if set(results) != {"kbroker", "kafka"}:
        return
    print("\n| workload | records | kbroker s | Kafka 4.4.0 s | kbroker rec/s | Kafka rec/s "
          "| kbroker / Kafka |\n| --- | --: | --: | --: | --: | --: | --: |")
    for workload in ("batch read", "streaming", "foreachBatch write"):
        (ks, krows, *_), (fs, frows, *_) = results["kbroker"][workload], results["kafka"][workload]
        print(f"| {workload} | {krows:,} | {ks:.1f} | {fs:.1f} | {krows / ks:,.0f} | "
              f"{frows / fs:,.0f} | {fs / ks:.2f}x |")
    print(f"\nloading (ProducerPerformance, not part of the comparison): kbroker "
          f"{results['kbroker']['load_s']} s, Kafka {results['kafka']['load_s']} s")
    for workload in ("streaming", "foreachBatch write"):
        kphases, fphases = results["kbroker"][workload][2], results["kafka"][workload][2]
        print(f"\n{workload}, Spark's micro-batch phases summed (s), kbroker / Kafka:")
        for phase in sorted(set(kphases) | set(fphases)):
            print(f"  {phase}: {kphases.get(phase, 0):.1f} / {fphases.get(phase, 0):.1f}")


if __name__ == "__main__":
    main()
