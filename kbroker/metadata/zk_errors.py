"""The kinds of :class:`StaleMetadataError` the ZooKeeper store tells apart, so callers catch a
type, never match a message. Their own module because both ``zk_store`` and ``zk_security``
(which ``zk_store`` imports) raise or catch them."""

from __future__ import annotations

from kbroker.metadata.store import StaleMetadataError


class NodeAlreadyExistsError(StaleMetadataError):
    """A transaction refused because a znode it creates already exists (ZooKeeper's
    NodeExists): another writer got there first. Nothing was written."""


class ControllerEpochMovedError(StaleMetadataError):
    """A fenced transaction refused because ``/controller_epoch`` moved on: this broker is no
    longer the controller. Nothing was written, and retrying cannot help."""
