"""The embedded single-node metadata store: one JSON file in the first log dir.

File ``<log.dir>/kbroker-metadata.json``::

    {"version": 1, "cluster_id": "<22-char base64url>", "next_producer_id_block": N,
     "broker_configs": {"cluster": {...}, "broker": {...}},
     "topics": {"<name>": {"topic_id": "<uuid>", "partitions": N, "configs": {...}}}}

It is rewritten atomically (temporary file, fsync, rename, fsync of the directory) on every
change. Kafka's log-dir scan ignores plain files, so the file does not disturb Kafka's layout.
"""

from __future__ import annotations

import base64
import json
import os
import uuid

from kbroker.metadata.image import TopicMetadata

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
    def __init__(self, log_dir: str, cluster_id: str | None = None):
        os.makedirs(log_dir, exist_ok=True)
        self.path = os.path.join(log_dir, FILE_NAME)
        self._topics: dict[str, TopicMetadata] = {}
        self._by_id: dict[uuid.UUID, TopicMetadata] = {}
        self._next_producer_id_block = 0
        self._broker_configs: dict[str, dict[str, str]] = {"cluster": {}, "broker": {}}
        if os.path.exists(self.path):
            with open(self.path, "rb") as f:
                state = json.load(f)
            self.cluster_id = state["cluster_id"]
            self._next_producer_id_block = state.get("next_producer_id_block", 0)
            self._broker_configs.update(state.get("broker_configs", {}))
            for name, t in state["topics"].items():
                self._put(TopicMetadata(name, uuid.UUID(t["topic_id"]), t["partitions"],
                                        t.get("configs", {})))
            if cluster_id and cluster_id != self.cluster_id:
                raise ValueError(f"cluster.id {cluster_id} does not match {self.cluster_id} "
                                 f"stored in {self.path}")
        else:
            self.cluster_id = cluster_id or new_cluster_id()
            self._save()

    def _put(self, topic: TopicMetadata) -> TopicMetadata:
        self._topics[topic.name] = topic
        self._by_id[topic.topic_id] = topic
        return topic

    def _save(self) -> None:
        state = {
            "version": 1,
            "cluster_id": self.cluster_id,
            "next_producer_id_block": self._next_producer_id_block,
            "broker_configs": self._broker_configs,
            "topics": {
                t.name: {"topic_id": str(t.topic_id), "partitions": t.num_partitions,
                         "configs": t.configs}
                for t in sorted(self._topics.values(), key=lambda t: t.name)
            },
        }
        write_atomically(self.path, json.dumps(state, indent=1).encode())

    # --- reads ---------------------------------------------------------------------------------

    def topics(self) -> dict[str, TopicMetadata]:
        return self._topics

    def topic(self, name: str) -> TopicMetadata | None:
        return self._topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        return self._by_id.get(topic_id)

    def broker_configs(self, *, cluster_default: bool) -> dict[str, str]:
        return dict(self._broker_configs["cluster" if cluster_default else "broker"])

    # --- changes -------------------------------------------------------------------------------

    def set_broker_configs(self, configs: dict, *, cluster_default: bool) -> None:
        """Dynamic broker configs (AlterConfigs on a BROKER resource), as strings."""
        self._broker_configs["cluster" if cluster_default else "broker"] = dict(configs)
        self._save()

    def allocate_producer_id_block(self, size: int) -> int:
        """Reserve ``size`` producer ids and return the first; never handed out twice, even
        across restarts (like Kafka's controller-allocated producer id blocks)."""
        first = self._next_producer_id_block
        self._next_producer_id_block = first + size
        self._save()
        return first

    def create_topic(self, name: str, num_partitions: int, configs: dict) -> TopicMetadata:
        if name in self._topics:
            raise KeyError(name)
        topic_id = uuid.uuid4()
        while topic_id in self._by_id or topic_id.int == 0:
            topic_id = uuid.uuid4()
        topic = self._put(TopicMetadata(name, topic_id, num_partitions, dict(configs)))
        self._save()
        return topic

    def delete_topic(self, name: str) -> None:
        topic = self._topics.pop(name)
        del self._by_id[topic.topic_id]
        self._save()

    def set_partition_count(self, name: str, count: int) -> TopicMetadata:
        topic = self._put(self._topics[name].with_partitions(count))
        self._save()
        return topic

    def set_topic_configs(self, name: str, configs: dict) -> TopicMetadata:
        topic = self._put(self._topics[name].with_configs(configs))
        self._save()
        return topic
