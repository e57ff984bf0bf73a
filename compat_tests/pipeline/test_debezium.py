"""A real Debezium PostgreSQL connector (Maven Central) in a Kafka Connect worker on kbroker:
PostgreSQL from Debian's packages with logical decoding (pgoutput), a snapshot then streamed
inserts, exactly-once source delivery (KIP-618), and a kill -9 of the worker in the middle. The
change events reach kbroker exactly once: read_committed, one event per row, in commit order."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.broker_process import BrokerProcess
from tests.integration.clients import wait_until
from compat_tests.pipeline import postgres
from compat_tests.pipeline.connect import CONNECT_VERSION, DEBEZIUM_VERSION, ConnectWorker, \
    free_port, missing, worker_properties
from compat_tests.pipeline.test_connect import read_committed, running

POSTGRES = "io.debezium.connector.postgresql.PostgresConnector"


@pytest.fixture
def database():
    if postgres.missing():
        pytest.fail(postgres.missing())
    db = postgres.Postgres().start()
    db.sql("CREATE DATABASE shop")
    db.sql("CREATE TABLE orders (id int PRIMARY KEY, item text NOT NULL)", "shop")
    yield db
    db.stop()


def insert(db, ids) -> None:
    db.sql("INSERT INTO orders VALUES " + ",".join(f"({i}, 'item-{i}')" for i in ids), "shop")


@pytest.mark.compat("debezium postgres: change events exactly once across a worker kill -9",
                    client="debezium", version=f"{DEBEZIUM_VERSION} (Kafka Connect "
                                               f"{CONNECT_VERSION}, PostgreSQL from Debian)")
def test_debezium_change_events_exactly_once_across_a_worker_kill(database, tmp_path):
    if missing():
        pytest.fail(missing())
    broker = BrokerProcess(tmp_path / "data", {"group.initial.rebalance.delay.ms": "0"}).start()
    group = f"cdc-{uuid.uuid4().hex[:6]}"
    props = worker_properties(broker.bootstrap, group, free_port(), **{
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "false", "value.converter.schemas.enable": "false"})
    worker = ConnectWorker(tmp_path, "worker", props)
    try:
        insert(database, range(1, 51))  # in the snapshot
        worker.start()
        plugins = {p["class"] for p in worker.get("/connector-plugins")}
        assert POSTGRES in plugins
        worker.put_connector("orders", {
            "connector.class": POSTGRES, "tasks.max": "1",
            "database.hostname": "127.0.0.1", "database.port": str(database.port),
            "database.user": "postgres", "database.password": "unused",
            "database.dbname": "shop", "topic.prefix": "cdc", "plugin.name": "pgoutput",
            "slot.name": "kbroker_cdc", "publication.autocreate.mode": "filtered",
            "table.include.list": "public.orders", "snapshot.mode": "initial",
            "exactly.once.support": "required", "transaction.boundary": "poll"})
        wait_until(lambda: running(worker, "orders"), 90, 0.5, "the Debezium connector running")
        topic = "cdc.public.orders"

        def ids():
            return [json.loads(v)["after"]["id"] for v in read_committed(broker.bootstrap, topic)]

        wait_until(lambda: len(ids()) >= 50, 60, 0.5, "the snapshot's 50 events")
        insert(database, range(51, 101))  # streamed
        wait_until(lambda: len(ids()) >= 100, 60, 0.5, "100 events")
        worker.kill()
        insert(database, range(101, 151))  # while no worker runs
        worker.start()
        wait_until(lambda: running(worker, "orders"), 90, 0.5, "the connector running again")
        insert(database, range(151, 201))
        wait_until(lambda: len(ids()) >= 200, 90, 0.5, "200 events")
        events = [json.loads(v) for v in read_committed(broker.bootstrap, topic)]
        assert [e["after"]["id"] for e in events] == list(range(1, 201))
        assert {e["op"] for e in events[:50]} == {"r"} and {e["op"] for e in events[50:]} == {"c"}
        assert events[-1]["after"]["item"] == "item-200"
    finally:
        worker.kill()
        broker.kill()
