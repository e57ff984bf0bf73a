"""examples/pyspark_streaming.py runs as the README shows, against a real kbroker.

The script is started as a user would start it (its own process and JVM), with the connector jars
that scripts/install-test-deps.sh puts in compat_tests/spark/target/jars. Two runs over one
checkpoint: the second sees only the views produced after the first, and the last record per page
in the output topic holds the totals over both runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.clients import (Rec, confluent_consumer, consume_confluent, ensure_topic,
                                       produce_confluent, running_broker)

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "examples" / "pyspark_streaming.py"
JARS = REPO / "compat_tests" / "spark" / "target" / "jars"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with running_broker(tmp_path_factory.mktemp("pyspark-example") / "data",
                        {"auto.create.topics.enable": "false"}) as process:
        yield process


def run_example(broker, checkpoint: Path) -> str:
    if not any(JARS.glob("spark-sql-kafka-0-10_*.jar")):
        pytest.fail(f"Spark's Kafka connector is missing from {JARS}: run "
                    "`bash scripts/install-test-deps.sh`", pytrace=False)
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--bootstrap", broker.bootstrap, "--source", "page-views",
         "--sink", "page-stats", "--checkpoint", str(checkpoint), "--jars", str(JARS)],
        capture_output=True, text=True, timeout=180, cwd=REPO)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def produce_views(broker, views: list[tuple[str, int]]) -> None:
    produce_confluent(broker.bootstrap, "page-views",
                      [Rec(value=json.dumps({"page": page, "ms": ms}).encode()) for page, ms in views]
                      + [Rec(value=b"not json")])  # skipped by the query, not fatal


def latest_stats(broker) -> dict[str, dict]:
    from confluent_kafka import TopicPartition

    consumer = confluent_consumer(broker.bootstrap)
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition("page-stats", 0), timeout=10)
    finally:
        consumer.close()
    got = consume_confluent(broker.bootstrap, "page-stats", high - low, partitions=[0], timeout=20)
    assert len(got) == high - low
    stats = {}
    for g in got:  # offset order: the last record of a page is its current total
        value = json.loads(g.value)
        assert g.key.decode() == value["page"]
        stats[value["page"]] = value
    return stats


def test_page_stats_across_a_restart(broker, tmp_path):
    ensure_topic(broker.bootstrap, "page-views", 2)
    ensure_topic(broker.bootstrap, "page-stats", 1)
    checkpoint = tmp_path / "checkpoint"

    produce_views(broker, [("/home", 100), ("/home", 200), ("/cart", 50)])
    out = run_example(broker, checkpoint)
    assert "processed 4 page views" in out
    assert latest_stats(broker) == {"/home": {"page": "/home", "views": 2, "avg_ms": 150.0},
                                    "/cart": {"page": "/cart", "views": 1, "avg_ms": 50.0}}

    produce_views(broker, [("/home", 30), ("/about", 10)])
    out = run_example(broker, checkpoint)
    # Resumed from the checkpoint: only the 3 new records are read; the totals include both runs.
    assert "processed 3 page views" in out
    assert latest_stats(broker) == {"/home": {"page": "/home", "views": 3, "avg_ms": 110.0},
                                    "/cart": {"page": "/cart", "views": 1, "avg_ms": 50.0},
                                    "/about": {"page": "/about", "views": 1, "avg_ms": 10.0}}
