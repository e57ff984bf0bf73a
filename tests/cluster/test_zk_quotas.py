"""Client quotas in ZooKeeper, in Kafka's ZooKeeper-mode layout: /config/users/U,
/config/clients/C, /config/users/U/clients/C, /config/ips/IP (sanitized names, <default>),
each change announced under /config/changes; SCRAM keys in a user's znode are kept."""

from __future__ import annotations

import asyncio
import json

from kbroker.metadata.delta import MetadataDelta
from kbroker.metadata.zk.store import ZkMetadataStore


def _json(client, path):
    data, _ = client.get(path)
    return json.loads(data)


def test_quota_znodes_match_kafkas_layout_and_load_back(clients):
    store = asyncio.run(ZkMetadataStore.open(clients(), 1))
    zk = clients()
    zk.create("/config/users/alice", b'{"version":1,"config":{"SCRAM-SHA-256":"salt=x"}}')
    alice = (("user", "alice"),)
    default_client = (("client-id", None),)
    pair = (("client-id", "my app*"), ("user", "alice"))
    ip = (("ip", "10.0.0.1"),)
    quotas = {alice: {"producer_byte_rate": 1024.0, "request_percentage": 50.0},
              default_client: {"consumer_byte_rate": 2048.0},
              pair: {"producer_byte_rate": 10.0},
              ip: {"connection_creation_rate": 5.0}}
    asyncio.run(store.commit(MetadataDelta(client_quotas=quotas)))
    assert _json(zk, "/config/users/alice") == {"version": 1, "config": {
        "SCRAM-SHA-256": "salt=x", "producer_byte_rate": "1024", "request_percentage": "50.0"}}
    assert _json(zk, "/config/clients/<default>") == {
        "version": 1, "config": {"consumer_byte_rate": "2048"}}
    # Kafka's Sanitizer: URL-encoded, with '*' and ' ' as %2A and %20.
    assert _json(zk, "/config/users/alice/clients/my%20app%2A") == {
        "version": 1, "config": {"producer_byte_rate": "10"}}
    assert _json(zk, "/config/ips/10.0.0.1")["config"] == {"connection_creation_rate": "5"}
    changes = sorted(_json(zk, f"/config/changes/{c}")["entity_path"]
                     for c in zk.get_children("/config/changes"))
    assert changes == ["clients/<default>", "ips/10.0.0.1", "users/alice",
                       "users/alice/clients/my%20app%2A"]
    loaded = asyncio.run(store.load()).client_quotas
    assert {e: dict(v) for e, v in loaded.items()} == quotas

    # Removing the last quota of an entity leaves the SCRAM key (and the entity is gone).
    asyncio.run(store.commit(MetadataDelta(client_quotas={alice: {}})))
    assert _json(zk, "/config/users/alice")["config"] == {"SCRAM-SHA-256": "salt=x"}
    loaded = asyncio.run(store.load()).client_quotas
    assert alice not in loaded and pair in loaded
