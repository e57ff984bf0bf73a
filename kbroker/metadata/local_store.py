"""The embedded single-node metadata store: one JSON file in the first log dir.

File ``<log.dir>/kbroker-metadata.json``::

    {"version": 1, "cluster_id": "<22-char base64url>", "next_producer_id_block": N,
     "broker_configs": {"cluster": {...}, "broker": {...}},
     "scram_credentials": {"<user>": {"SCRAM-SHA-256": "salt=...,stored_key=...,..."}},
     "acls": [[resource_type, name, pattern_type, principal, host, operation, permission], ...],
     "client_quotas": [{"entity": {"user": "alice", "client-id": null},
                        "quotas": {"producer_byte_rate": 1024.0}}, ...],
     "finalized_features": {"epoch": N, "levels": {"transaction.version": 1}},
     "topics": {"<name>": {"topic_id": "<uuid>", "partitions": N,
                           "replicas": [[node, ...], ...], "configs": {...}}}}

``replicas`` holds each partition's replica list (Kafka's assignment); files written before it
existed have only ``partitions`` and mean ``[this node]`` for each. The file is rewritten
atomically (temporary file, fsync, rename, fsync of the directory) on every change, so a change
is either wholly on disk or not at all. Kafka's log-dir scan ignores plain files, so the file
does not disturb Kafka's layout.
"""

from __future__ import annotations

import base64
import json
import os
import uuid

from kbroker.metadata.image import MetadataImage, TopicMetadata

FILE_NAME = "kbroker-metadata.json"


def new_cluster_id() -> str:
    """Kafka's format: a random UUID in URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def write_atomically(path: str, data: bytes) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class LocalMetadataStore:
    def __init__(self, log_dir: str, cluster_id: str | None = None, node_id: int = 0):
        os.makedirs(log_dir, exist_ok=True)
        self.path = os.path.join(log_dir, FILE_NAME)
        self._node_id = node_id
        if os.path.exists(self.path):
            with open(self.path, "rb") as f:
                self._state = json.load(f)
            self.cluster_id = self._state["cluster_id"]
            if cluster_id and cluster_id != self.cluster_id:
                raise ValueError(f"cluster.id {cluster_id} does not match {self.cluster_id} "
                                 f"stored in {self.path}")
        else:
            self.cluster_id = cluster_id or new_cluster_id()
            self._state = {"version": 1, "cluster_id": self.cluster_id,
                           "next_producer_id_block": 0,
                           "broker_configs": {"cluster": {}, "broker": {}}, "topics": {}}
            self._save()

    def _save(self, state: dict | None = None) -> None:
        """Write ``state`` (a new version of the whole file) and only then make it current, so a
        failed write (disk full) changes nothing. Compact: with 100,000 partitions the replica
        lists dominate the file."""
        state = self._state if state is None else state
        write_atomically(self.path, json.dumps(state, separators=(",", ":"),
                                               sort_keys=True).encode())
        self._state = state

    def _with_topics(self, change) -> None:
        topics = dict(self._state["topics"])  # shallow: untouched entries are shared
        change(topics)
        self._save({**self._state, "topics": topics})

    def load(self) -> MetadataImage:
        features = self._state.get("finalized_features") or {}
        topics = []
        for name, t in self._state["topics"].items():
            replicas = t.get("replicas") or [[self._node_id]] * t["partitions"]
            topics.append(TopicMetadata(name, uuid.UUID(t["topic_id"]), replicas,
                                        t.get("configs", {})))
        return MetadataImage.build(self.cluster_id, topics, self._state.get("broker_configs"),
                                   self._state.get("scram_credentials"),
                                   self._state.get("acls", ()),
                                   {tuple(e["entity"].items()): e["quotas"]
                                    for e in self._state.get("client_quotas", ())},
                                   features.get("levels"), features.get("epoch", 1))

    # --- changes (called by the controller only) -----------------------------------------------

    def create_topic(self, topic: TopicMetadata) -> None:
        entry = {"topic_id": str(topic.topic_id), "partitions": topic.num_partitions,
                 "replicas": [list(r) for r in topic.assignments], "configs": dict(topic.configs)}
        self._with_topics(lambda topics: topics.__setitem__(topic.name, entry))

    def set_assignments(self, name: str, assignments) -> None:
        replicas = [list(r) for r in assignments]
        entry = {**self._state["topics"][name], "replicas": replicas, "partitions": len(replicas)}
        self._with_topics(lambda topics: topics.__setitem__(name, entry))

    def set_topic_configs(self, name: str, configs) -> None:
        entry = {**self._state["topics"][name], "configs": dict(configs)}
        self._with_topics(lambda topics: topics.__setitem__(name, entry))

    def delete_topic(self, name: str) -> None:
        self._with_topics(lambda topics: topics.pop(name))

    def set_broker_configs(self, configs, *, cluster_default: bool) -> None:
        scopes = dict(self._state.get("broker_configs") or {"cluster": {}, "broker": {}})
        scopes["cluster" if cluster_default else "broker"] = dict(configs)
        self._save({**self._state, "broker_configs": scopes})

    def set_scram_credentials(self, credentials) -> None:
        """Every user's SCRAM credentials (Kafka: one /config/users/<user> znode each)."""
        self._save({**self._state, "scram_credentials": {u: dict(m) for u, m in
                                                         credentials.items() if m}})

    def set_acls(self, acls) -> None:
        """Every ACL binding, as lists of Kafka's wire codes (Kafka: /kafka-acl/<type>/<name>)."""
        self._save({**self._state, "acls": [list(a) for a in acls]})

    def set_client_quotas(self, quotas, changed=()) -> None:
        """Every entity's client quotas (Kafka: /config/users/<user>, /config/clients/<id>,
        /config/users/<user>/clients/<id>, /config/ips/<ip>); ``changed`` is for the ZooKeeper
        store, which writes only those znodes."""
        self._save({**self._state, "client_quotas": [
            {"entity": dict(entity), "quotas": dict(values)}
            for entity, values in quotas.items() if values]})

    def set_finalized_features(self, levels) -> int:
        epoch = (self._state.get("finalized_features") or {}).get("epoch", 1) + 1
        self._save({**self._state, "finalized_features": {"epoch": epoch,
                                                          "levels": dict(levels)}})
        return epoch

    def allocate_producer_id_block(self, size: int) -> int:
        """Like Kafka's controller-allocated producer id blocks: reserved durably first."""
        first = self._state.get("next_producer_id_block", 0)
        self._save({**self._state, "next_producer_id_block": first + size})
        return first
