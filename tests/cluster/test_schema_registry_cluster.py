"""The schema registry in a three-broker cluster (``kbroker cluster up``, real processes): every
broker serves the API; the leader of ``_schemas-0`` writes and the others forward to it; after
the leader is killed (-9) a new one takes over with every acknowledged schema, and ids never
repeat."""

from __future__ import annotations

import json
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient

from kbroker.testing.cluster import KafkaCluster
from tests.schema_registry.conftest import Registry


def _record(name: str) -> dict:
    return {"schema": json.dumps({"type": "record", "name": name,
                                  "fields": [{"name": "f", "type": "int"}]})}


def _registries(cluster: KafkaCluster) -> dict[int, Registry]:
    out = {}
    for broker in cluster.brokers:
        info = json.loads(Path(broker["data_dir"], "ready.json").read_text())
        out[broker["id"]] = Registry(None, info["schema_registry"])
    return out


def _leader(cluster: KafkaCluster) -> int:
    md = AdminClient({"bootstrap.servers": cluster.bootstrap_servers}).list_topics(
        "_schemas", timeout=10)
    return md.topics["_schemas"].partitions[0].leader


def _retry(call, deadline_s: float = 90.0):
    """Call until it answers 200 (a leader change answers 50003/50004 meanwhile)."""
    deadline = time.monotonic() + deadline_s
    while True:
        status, body = call()
        if status == 200 or time.monotonic() > deadline:
            return status, body
        time.sleep(0.2)


def test_register_anywhere_read_everywhere_survive_leader_kill():
    settings = {"schema.registry.topic.replication.factor": "3", "min.insync.replicas": "2"}
    with KafkaCluster(3, settings=settings) as cluster:
        registries = _registries(cluster)
        ids: dict[str, int] = {}
        for i, (broker_id, registry) in enumerate(sorted(registries.items()) * 2):
            subject = f"s{i}-value"
            status, body = _retry(lambda: registry.call("POST", f"/subjects/{subject}/versions",
                                                        _record(f"R{i}")))
            assert status == 200, body
            ids[subject] = body["id"]
        assert sorted(ids.values()) == list(range(1, 7))
        for registry in registries.values():  # every broker answers with the same state
            assert registry.call("GET", "/subjects")[1] == sorted(ids)
            for subject, schema_id in ids.items():
                assert registry.call("GET", f"/subjects/{subject}/versions/1")[1]["id"] == \
                    schema_id

        leader = _leader(cluster)
        cluster.kill(leader)  # kill -9
        survivors = {b: r for b, r in registries.items() if b != leader}
        for i, registry in enumerate(list(survivors.values()) * 2):
            subject = f"after{i}-value"
            status, body = _retry(lambda: registry.call("POST", f"/subjects/{subject}/versions",
                                                        _record(f"A{i}")))
            assert status == 200, body
            ids[subject] = body["id"]
        assert len(set(ids.values())) == len(ids)  # no id handed out twice
        assert min(v for k, v in ids.items() if k.startswith("after")) == 7
        assert _leader(cluster) != leader
        for registry in survivors.values():
            assert registry.call("GET", "/subjects")[1] == sorted(ids)
            for subject, schema_id in ids.items():
                status, body = registry.call("GET", f"/schemas/ids/{schema_id}")
                assert status == 200, (subject, body)
