"""The metadata-store interface: where the controller commits deltas, in either mode.

Two implementations sit behind it, and they are the only thing that differs between modes:
the embedded single-node store (:mod:`kbroker.metadata.local_store`, one JSON file in the data
dir, rewritten atomically) and the ZooKeeper store (:mod:`kbroker.metadata.zk.store`, Kafka's
classic znode layout, one conditional transaction per kind of change, fenced by the controller
epoch once its broker is controller).

``load()``                   everything stored, as an image (start-up)
``commit(delta)``            make ``delta`` durable; returns a :class:`Commit`: the delta as
                             stored (with what the store decided: znode versions, the
                             features epoch) and the parts it refused
``reread(delta)``            the current content of what ``delta`` touches, as a delta (after
                             a conditional write lost: another broker changed it first)
``allocate_producer_ids(n)`` reserve ``n`` producer ids, never handed out twice; the first
``is_controller``            whether this broker may make the controller's writes (a single
                             node always; in a cluster, the broker that won the election)
``controller_epoch``         the epoch partition states are written with

Every method that talks to the store is a coroutine and never blocks the event loop (the local
store's fsync runs in a thread; the ZooKeeper store uses kazoo's asynchronous calls). Only the
controller (:mod:`kbroker.metadata.controller`) calls ``commit`` (a test checks it).
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping, Protocol

from kbroker.metadata.delta import MetadataDelta
from kbroker.metadata.image import MetadataImage


@dataclass(frozen=True)
class Commit:
    """What a store made durable: ``delta`` as stored, and the parts of the request it refused
    (key as the delta keys them: an ACL tuple, a (topic, partition)) with the reason."""

    delta: MetadataDelta
    refused: Mapping[object, Exception] = field(default_factory=lambda: MappingProxyType({}))


class MetadataStore(Protocol):
    cluster_id: str
    replicated: bool  # partitions have leaders and ISRs in the store (a cluster)

    async def load(self) -> MetadataImage: ...

    async def commit(self, delta: MetadataDelta) -> Commit: ...

    async def reread(self, delta: MetadataDelta) -> MetadataDelta: ...

    async def allocate_producer_ids(self, size: int) -> int: ...

    @property
    def is_controller(self) -> bool: ...

    @property
    def controller_epoch(self) -> int: ...


def new_cluster_id() -> str:
    """Kafka's format: a random UUID in URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


# The writing methods, for the import rule test (only the controller calls them).
WRITES = ("commit", "allocate_producer_ids")


class StaleMetadataError(Exception):
    """A conditional write lost: the znode changed since this writer read it, or this writer's
    controller epoch is no longer current (ZooKeeper store). Nothing was written."""


class StoreUnavailableError(Exception):
    """The store did not confirm the change (ZooKeeper's connection dropped mid-request):
    whether it was made is unknown until the next read."""


class AlreadyExistsError(StaleMetadataError):
    """A write refused because what it creates exists already (ZooKeeper's NodeExists):
    another writer got there first. Nothing was written."""


class FencedError(StaleMetadataError):
    """A controller's write refused because the controller epoch moved on: this broker is no
    longer the controller. Nothing was written, and retrying cannot help."""
