"""The whole pipeline, long (``make test-long``): PostgreSQL -> Debezium's connector in a Kafka
Connect worker -> kbroker -> the README's PySpark Structured Streaming example
(``--input debezium``) -> kbroker. Rows inserted before and between two runs of the Spark query
(one checkpoint): the last record per page in the output topic holds exact totals, every change
event counted once."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from compat_tests.pipeline import postgres
from compat_tests.pipeline.connect import ConnectWorker, free_port, missing, worker_properties
from compat_tests.pipeline.test_connect import create_topic, read_committed, running
from tests.broker_process import BrokerProcess
from tests.integration.clients import wait_until

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "pyspark_streaming.py"
JARS = ROOT / "compat_tests" / "spark" / "target" / "jars"


def run_spark(bootstrap: str, checkpoint: Path) -> str:
    done = subprocess.run([sys.executable, str(SCRIPT), "--bootstrap", bootstrap, "--source",
                           "cdc.public.page_views", "--sink", "page-stats", "--checkpoint",
                           str(checkpoint), "--jars", str(JARS), "--input", "debezium"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def latest_stats(bootstrap: str) -> dict:
    stats = {}
    for value in read_committed(bootstrap, "page-stats"):
        record = json.loads(value)
        stats[record["page"]] = (record["views"], record["avg_ms"])
    return stats


def test_postgres_to_debezium_to_spark_to_kbroker(tmp_path):
    for why in (missing(), postgres.missing()):
        if why:
            pytest.fail(why)
    db = postgres.Postgres().start()
    broker = BrokerProcess(tmp_path / "data", {"group.initial.rebalance.delay.ms": "0"}).start()
    worker = ConnectWorker(tmp_path, "worker", worker_properties(
        broker.bootstrap, f"cdc-{uuid.uuid4().hex[:6]}", free_port(), **{
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false"}))
    try:
        db.sql("CREATE DATABASE site")
        db.sql("CREATE TABLE page_views (id int PRIMARY KEY, page text, ms int)", "site")

        def insert(rows):
            db.sql("INSERT INTO page_views VALUES " + ",".join(
                f"({i}, '{page}', {ms})" for i, page, ms in rows), "site")

        insert([(1, "/home", 100), (2, "/home", 200), (3, "/cart", 50)])
        create_topic(broker.bootstrap, "page-stats")
        worker.start()
        worker.put_connector("page-views", {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "database.hostname": "127.0.0.1", "database.port": str(db.port),
            "database.user": "postgres", "database.password": "unused", "database.dbname": "site",
            "topic.prefix": "cdc", "plugin.name": "pgoutput", "slot.name": "spark_pipeline",
            "publication.autocreate.mode": "filtered", "table.include.list": "public.page_views",
            "exactly.once.support": "required"})
        wait_until(lambda: running(worker, "page-views"), 90, 0.5, "the connector running")
        topic = "cdc.public.page_views"
        wait_until(lambda: len(read_committed(broker.bootstrap, topic)) >= 3, 60, 0.5,
                   "the snapshot")
        checkpoint = tmp_path / "checkpoint"
        assert "processed 3 page views" in run_spark(broker.bootstrap, checkpoint)
        assert latest_stats(broker.bootstrap) == {"/home": (2, 150.0), "/cart": (1, 50.0)}

        insert([(4, "/home", 30), (5, "/about", 10)])
        db.sql("UPDATE page_views SET ms = 999 WHERE id = 1", "site")  # not a view
        wait_until(lambda: len(read_committed(broker.bootstrap, topic)) >= 6, 60, 0.5,
                   "the streamed changes")
        # resumed from the checkpoint: only the new change events are read
        assert "processed 3 page views" in run_spark(broker.bootstrap, checkpoint)
        assert latest_stats(broker.bootstrap) == {"/home": (3, 110.0), "/cart": (1, 50.0),
                                                  "/about": (1, 10.0)}
    finally:
        worker.kill()
        broker.kill()
        db.stop()
