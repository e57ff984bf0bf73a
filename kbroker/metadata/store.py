"""The metadata-store interface shared by the embedded store and (later) the ZooKeeper store."""

from __future__ import annotations

import uuid
from typing import Protocol

from kbroker.metadata.image import TopicMetadata


class MetadataStore(Protocol):
    cluster_id: str

    def topics(self) -> dict[str, TopicMetadata]: ...

    def topic(self, name: str) -> TopicMetadata | None: ...

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None: ...

    def create_topic(self, name: str, num_partitions: int, configs: dict) -> TopicMetadata: ...

    def delete_topic(self, name: str) -> None: ...

    def set_partition_count(self, name: str, count: int) -> TopicMetadata: ...

    def set_topic_configs(self, name: str, configs: dict) -> TopicMetadata: ...

    def broker_configs(self, *, cluster_default: bool) -> dict[str, str]: ...

    def set_broker_configs(self, configs: dict, *, cluster_default: bool) -> None: ...
