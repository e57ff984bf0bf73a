"""Report the Spark tests as the ``spark`` client of the compatibility matrix.

``compat_tests/conftest.py`` turns each test marked ``@pytest.mark.compat(scenario)`` into a cell
whose client is the test's ``driver`` parameter, and writes ``COMPATIBILITY.md`` from the cells and
the versions of the registered drivers. Spark has no driver: it reads and writes DataFrames, and a
JVM start per driver command would not fit the cross-client matrix. So its tests take no
``driver``, and this plugin

- names their cells ``spark`` (after the matrix plugin has recorded them),
- adds ``spark`` to the session's clients with the PySpark, connector and kafka-clients versions,
  and the Spark scenarios to its scenario list (the matrix plugin carries both to the report,
  from whichever xdist worker ran the Spark tests),
- honours ``COMPAT_CLIENTS``: a narrowed run without ``spark`` in it deselects the Spark tests.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
COMPAT = HERE.parent
ROOT = COMPAT.parent
CLIENT = "spark"
PREFIX = "spark: "  # every Spark scenario's name starts with it

SCENARIOS = {
    "spark: batch read, earliest to latest, headers":
        "spark.read of a 3-partition topic produced by confluent-kafka in zstd, lz4 and snappy "
        "batches (keys, null keys, "
        "CreateTime timestamps, repeated and null-valued headers), includeHeaders=true; every "
        "row checked exactly (key, value, topic, partition, offset, timestamp, timestampType, "
        "headers); again with minPartitions=9 (ranges split inside batches)",
    "spark: batch read, default offsets":
        "the same without offsets or headers options (earliest..latest, no headers column)",
    "spark: batch read, per-partition offsets":
        "startingOffsets/endingOffsets as per-partition JSON, including -2 (earliest) and -1 "
        "(latest)",
    "spark: batch read, by timestamp":
        "startingOffsetsByTimestamp/endingOffsetsByTimestamp (ListOffsets by timestamp), "
        "including a bound past the last record",
    "spark: batch read, assign and SQL":
        "the assign option (2 of 3 partitions) and a Spark SQL aggregate over the rows",
    "spark: batch read, subscribePattern":
        "subscribePattern (every topic listed through Metadata, the matching ones read): two "
        "topics match, nothing else is read",
    "spark: batch read after delete records":
        "after DeleteRecords, earliest starts at the new log start offset; an explicit older "
        "start offset fails with failOnDataLoss=true and is skipped with failOnDataLoss=false",
    "spark: streaming with consumer-group offset fetching":
        "the streaming count with spark.sql.streaming.kafka.useDeprecatedOffsetFetching=true: the "
        "driver resolves offsets with a subscribed KafkaConsumer (a consumer group, as Spark < 3.4 "
        "did); restarted once from its checkpoint",
    "spark: batch read, read_committed":
        "kafka.isolation.level=read_committed over a 2-partition topic written by a transactional "
        "producer (commit, abort, commit): exactly the committed rows are read, the control "
        "markers skipped; read_uncommitted reads all 18 rows",
    "spark: batch write":
        "df.write.format('kafka') with keys, null keys, headers and explicit partitions, gzip, "
        "read back with confluent-kafka; on disk gzip batches of an idempotent producer",
    "spark: from_avro of Confluent wire-format records, schemas from the registry":
        "confluent-kafka's AvroSerializer registers two versions of a schema in kbroker's "
        "registry (the second adds a field with a default) and writes 16 records to a "
        "2-partition topic; Spark's Kafka source reads them, takes each value's schema id from "
        "its 5-byte header (magic byte 0 checked), fetches that schema from the registry, and "
        "decodes the rest with spark-avro's from_avro (FAILFAST): every row equals the value "
        "written (a long past 32 bits, non-ASCII text, an array, a nullable union)",
    "spark: streaming count, restart from checkpoint":
        "a Structured Streaming query counts records per key (availableNow, several "
        "micro-batches) and writes the counts to a topic with a checkpoint; it is restarted "
        "twice from the checkpoint with more input in between; every input record is counted "
        "exactly once and the last value per key in the output topic is the total",
}


def _ours(item) -> bool:
    return HERE in Path(str(item.fspath)).resolve().parents


def _matrix_state(config) -> dict | None:
    return getattr(config, "_compat", None)


def pytest_collection_modifyitems(config, items):
    wanted = os.environ.get("COMPAT_CLIENTS")
    if not wanted or CLIENT in {n.strip() for n in wanted.split(",")}:
        return
    dropped = [i for i in items if _ours(i)]
    if dropped:
        items[:] = [i for i in items if not _ours(i)]
        config.hook.pytest_deselected(items=dropped)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    yield
    state = _matrix_state(item.config)
    if state is None or not _ours(item):
        return
    cells = state["cells"]
    fresh = [c for c in cells if c["client"] == "" and c["scenario"].startswith(PREFIX)]
    if not fresh:
        return
    renamed = {c["scenario"] for c in fresh}
    cells[:] = [c for c in cells if not (c["client"] == CLIENT and c["scenario"] in renamed)]
    for c in fresh:
        c["client"] = CLIENT


def spark_versions() -> dict:
    """The client line of the report: pyspark, and the connector jars spark.jars loads."""
    try:
        import pyspark
        version = pyspark.__version__
    except ImportError:
        version = "unavailable: pyspark is not installed (run scripts/install-test-deps.sh)"
    jars = sorted(p.name for p in (HERE / "target" / "jars").glob("*.jar"))
    details = []
    for pattern, label in ((r"spark-sql-kafka-0-10_([\d.]+)-(.+)\.jar", "spark-sql-kafka-0-10_{}"),
                           (r"spark-avro_([\d.]+)-(.+)\.jar", "spark-avro_{}"),
                           (r"kafka-clients-(.+)\.jar", "kafka-clients")):
        for name in jars:
            match = re.fullmatch(pattern, name)
            if match:
                *scala, ver = match.groups()
                details.append(f"{label.format(*scala)} {ver}")
    return {"client": "PySpark, Spark's Kafka connector",
            "version": version,
            **({"details": ", ".join(details)} if details else {})}


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    """Before the matrix plugin hands the session's results on: Spark's client and scenarios."""
    state = _matrix_state(session.config)
    if state is None or not any(c["client"] == CLIENT for c in state["cells"]):
        return
    state["clients"][CLIENT] = spark_versions()
    state["scenarios"].update(SCENARIOS)
