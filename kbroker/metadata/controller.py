"""The controller: the only writer of topics, partitions, assignments and configs.

Every change goes through one of its methods: the change is persisted in the metadata store
first, then published as the new current state to the subscribers (the replica manager applies
it: creates or deletes partition directories, gives logs their new settings). Handlers translate
requests into these calls and never write the store themselves.
"""

from __future__ import annotations

import logging
from typing import Callable

from kbroker.metadata.image import TopicMetadata

log = logging.getLogger("kbroker.controller")


class Controller:
    def __init__(self, store):
        self._store = store
        self._subscribers: list[Callable] = []

    @property
    def image(self):
        """The current metadata (topics by name and id, cluster id), for readers."""
        return self._store

    @property
    def cluster_id(self) -> str:
        return self._store.cluster_id

    def subscribe(self, on_change: Callable) -> None:
        """``on_change(topic_name, topic_or_None)`` runs after every persisted topic change."""
        self._subscribers.append(on_change)

    def _publish(self, name: str, topic: TopicMetadata | None) -> None:
        for on_change in self._subscribers:
            on_change(name, topic)

    # --- topics --------------------------------------------------------------------------------

    def create_topic(self, name: str, num_partitions: int, configs: dict) -> TopicMetadata:
        topic = self._store.create_topic(name, num_partitions, configs)
        self._publish(name, topic)
        return topic

    def delete_topic(self, name: str) -> None:
        self._store.delete_topic(name)
        self._publish(name, None)

    def create_partitions(self, name: str, count: int) -> TopicMetadata:
        topic = self._store.set_partition_count(name, count)
        self._publish(name, topic)
        return topic

    def alter_topic_configs(self, name: str, configs: dict) -> TopicMetadata:
        topic = self._store.set_topic_configs(name, configs)
        self._publish(name, topic)
        return topic

    # --- broker configs and producer ids -------------------------------------------------------

    def alter_broker_configs(self, configs: dict, *, cluster_default: bool) -> None:
        self._store.set_broker_configs(configs, cluster_default=cluster_default)
        for topic in list(self._store.topics().values()):  # topic settings derive from them
            self._publish(topic.name, topic)

    def allocate_producer_id_block(self, size: int) -> int:
        return self._store.allocate_producer_id_block(size)
