"""The metadata-store interface: where the controller persists topics, assignments and configs.

Two implementations sit behind it: the embedded single-node store (``local_store``, one JSON file
in the data dir) and, for a cluster, a ZooKeeper store using Kafka's classic znode layout. The
operations are shaped after those znodes so the ZooKeeper store maps one call to one write:

=============================  ==========================================================
``load()``                      ``/cluster/id``, ``/brokers/topics/*``, ``/config/topics/*``,
                                ``/config/brokers/*``, ``/latest_producer_id_block``
``create_topic(topic)``         ``/brokers/topics/T`` (id + assignment) and ``/config/topics/T``
``set_assignments(name, a)``    ``/brokers/topics/T`` (CreatePartitions)
``set_topic_configs(name, c)``  ``/config/topics/T``
``delete_topic(name)``          both of the topic's znodes
``set_broker_configs(c, ...)``  ``/config/brokers/<default>`` or ``/config/brokers/<id>``
``allocate_producer_id_block``  ``/latest_producer_id_block``
``set_scram_credentials(c)``    every user's credentials (the local store)
``update_scram_credentials``    ``/config/users/<user>`` (the SCRAM-SHA-* keys; ZooKeeper, deltas)
``set_acls(acls)``              every ACL (the local store)
``update_acls(added, removed)`` ``/kafka-acl/<Type>/<name>``, ``/kafka-acl-extended/prefixed/...``
                                (ZooKeeper, deltas: a broker's image may lag another's write)
``set_client_quotas(q, ...)``   ``/config/users/<u>[/clients/<c>]``, ``/config/clients/<c>``,
                                ``/config/ips/<ip>`` (``<default>`` for default entities)
=============================  ==========================================================

Every write is durable when the call returns. Only :mod:`kbroker.metadata.controller` calls the
writing methods (a test checks it); everyone else reads the controller's image. The ZooKeeper
store (``zk_store``) makes every write conditional on the znode version it read and, once its
broker is controller, on the controller epoch; a write that loses raises
:class:`StaleMetadataError` and changes nothing.
"""

from __future__ import annotations

from typing import Mapping, Protocol, Sequence

from kbroker.metadata.image import MetadataImage, TopicMetadata


class MetadataStore(Protocol):
    cluster_id: str

    def load(self) -> MetadataImage:
        """Everything stored, as an image (at start-up)."""

    def create_topic(self, topic: TopicMetadata) -> None: ...

    def set_assignments(self, name: str, assignments: Sequence[Sequence[int]]) -> None: ...

    def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None: ...

    def delete_topic(self, name: str) -> None: ...

    def set_broker_configs(self, configs: Mapping[str, str], *, cluster_default: bool) -> None: ...

    def set_scram_credentials(self, credentials: Mapping[str, Mapping[str, str]]) -> None: ...

    def set_acls(self, acls: Sequence[Sequence]) -> None: ...

    def set_client_quotas(self, quotas: Mapping[tuple, Mapping[str, float]],
                          changed: Sequence[tuple] = ()) -> None:
        """Every entity's quotas (entity as in MetadataImage.client_quotas); ``changed`` names
        the entities this change touched."""

    def set_finalized_features(self, levels: Mapping[str, int]) -> int:
        """Every finalized feature level set through UpdateFeatures; returns the new epoch."""

    def allocate_producer_id_block(self, size: int) -> int:
        """Reserve ``size`` producer ids and return the first; never handed out twice."""


# The writing methods, for the import rule test (only the controller calls them).
WRITES = ("create_topic", "set_assignments", "set_reassignment", "set_topic_configs",
          "delete_topic", "set_broker_configs", "allocate_producer_id_block",
          "set_scram_credentials", "set_acls", "set_client_quotas", "set_finalized_features",
          "update_scram_credentials", "update_acls")


class StaleMetadataError(Exception):
    """A conditional write lost: the znode changed since this writer read it, or this writer's
    controller epoch is no longer current (ZooKeeper store). Nothing was written."""
