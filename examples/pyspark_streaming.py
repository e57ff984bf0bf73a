"""PySpark Structured Streaming against kbroker: read a topic, aggregate, write to a topic.

The input topic holds page views as JSON, e.g. ``{"page": "/home", "ms": 120}``, or, with
``--input debezium``, the change events Debezium's PostgreSQL connector writes for a table
``page_views(id, page, ms)`` (JSON converter without schemas: each insert's row is in ``after``,
``op`` is ``r`` for a snapshot row and ``c`` for an insert; updates and deletes are not views).
That makes the pipeline our users run: PostgreSQL -> Debezium (Kafka Connect) -> kbroker ->
Spark -> kbroker (docs/pipeline.md). The query
counts the views of each page and averages their latency, and writes one JSON record per page
whose numbers changed (output mode ``update``, the page as the key) to the output topic. Spark
keeps its offsets and the running aggregates in the checkpoint directory, so a second run picks
up where the first stopped: every view is counted exactly once.

    make run                                        # a broker on localhost:9092
    .venv/bin/python examples/pyspark_streaming.py --bootstrap 127.0.0.1:9092 \\
        --source page-views --sink page-stats --checkpoint /tmp/page-stats-checkpoint

By default it processes what is in the topic and exits (``trigger(availableNow=True)``);
``--forever`` keeps it running with a micro-batch every few seconds.

Spark needs its Kafka connector on the class path: ``scripts/install-test-deps.sh`` puts
``spark-sql-kafka-0-10`` and its dependencies in ``compat_tests/spark/target/jars`` (the default
of ``--jars``), and ``pip install pyspark==4.0.0`` provides Spark itself (Java 17 needed).
``tests/test_pyspark_example.py`` runs this script against kbroker.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_JARS = ROOT / "compat_tests" / "spark" / "target" / "jars"


def spark_session(jars_dir: Path):
    from pyspark.sql import SparkSession

    jars = sorted(str(j) for j in jars_dir.glob("*.jar"))
    if not any("spark-sql-kafka" in j for j in jars):
        raise SystemExit(f"no spark-sql-kafka connector jar in {jars_dir}: run "
                         "`bash scripts/install-test-deps.sh` or pass --jars")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = (SparkSession.builder
               .master("local[2]")
               .appName("kbroker-page-stats")
               .config("spark.jars", ",".join(jars))      # the connector, without Ivy downloads
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")  # a laptop, not a cluster
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .getOrCreate())
    session.sparkContext.setLogLevel("WARN")
    return session


VIEW = "page STRING, ms INT"
CHANGE_EVENT = "op STRING, after STRUCT<id: INT, page: STRING, ms: INT>"


def page_stats(spark, bootstrap: str, source: str, input_format: str = "json"):
    """The streaming DataFrame of per-page statistics, as Kafka key/value columns."""
    from pyspark.sql import functions as F

    records = (spark.readStream.format("kafka")
               .option("kafka.bootstrap.servers", bootstrap)
               .option("subscribe", source)
               .option("startingOffsets", "earliest")     # the first run reads the whole topic
               .load())
    if input_format == "debezium":  # a row inserted (or snapshotted) is a view
        views = (records.selectExpr(f"from_json(CAST(value AS STRING), '{CHANGE_EVENT}') AS event")
                 .where("event.op IN ('c', 'r')")
                 .selectExpr("event.after AS view"))
    else:
        views = records.selectExpr(f"from_json(CAST(value AS STRING), '{VIEW}') AS view")
    return (views
            .where("view.page IS NOT NULL")             # skip records that are not page views
            .groupBy("view.page")
            .agg(F.count("*").alias("views"), F.avg("view.ms").alias("avg_ms"))
            .selectExpr("page AS key",
                        "to_json(named_struct('page', page, 'views', views, "
                        "'avg_ms', round(avg_ms, 1))) AS value"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--source", default="page-views", help="topic of JSON page views")
    parser.add_argument("--sink", default="page-stats", help="topic the statistics go to")
    parser.add_argument("--checkpoint", required=True, help="Spark's checkpoint directory")
    parser.add_argument("--input", choices=("json", "debezium"), default="json",
                        help="page views as JSON, or Debezium change events of a page_views "
                             "table")
    parser.add_argument("--jars", type=Path, default=DEFAULT_JARS,
                        help="directory of the Kafka connector jars")
    parser.add_argument("--forever", action="store_true",
                        help="keep running (a micro-batch every 5 s) instead of exiting when "
                             "the topic is drained")
    args = parser.parse_args()

    spark = spark_session(args.jars)
    writer = (page_stats(spark, args.bootstrap, args.source, args.input).writeStream
              .format("kafka")
              .option("kafka.bootstrap.servers", args.bootstrap)
              .option("topic", args.sink)
              .option("checkpointLocation", args.checkpoint)
              .outputMode("update"))
    writer = (writer.trigger(processingTime="5 seconds") if args.forever
              else writer.trigger(availableNow=True))
    query = writer.start()
    query.awaitTermination()
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    print(f"processed {rows} page views from {args.source} into {args.sink}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
