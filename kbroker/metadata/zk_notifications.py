"""Purging old change notifications, as Kafka's ``ZkNodeChangeNotificationListener`` does.

A config, SCRAM or quota change adds a sequential ``/config/changes/config_change_N`` znode, an
ACL change an ``acl_changes_N`` under ``/kafka-acl-changes`` or ``/kafka-acl-extended-changes``
(``zk_store``, ``zk_security``). Brokers never need a notification's content (each one re-reads
the tree), only its arrival; but left alone the znodes pile up in ZooKeeper's memory and in every
listing. Kafka 3.x's listener (``kafka.common.ZkNodeChangeNotificationListener``) purges them
after processing a change, and :class:`NotificationPurger` does the same, step for step:

- it runs when the children of a notification path changed (Kafka: on the child watch and after a
  new session) — here, when the path's children version (``cversion``) moved since its last
  round, checked on each of the broker's metadata re-reads;
- ``now`` is taken once, before the listing; each child's creation time is read from its
  ``Stat`` (``ctime``, ZooKeeper's clock in ms) and a child with ``now - ctime >
  changeExpirationMs`` (15 minutes, :data:`CHANGE_EXPIRATION_MS`) is deleted;
- every broker purges, so a child may vanish between the listing and its stat or delete: that is
  skipped, never an error (Kafka's ``deletePath`` ignores NoNode).

``/isr_change_notification`` is not here: the controller trims it (``zk_cluster``), as Kafka's
controller deletes ISR notifications once it has processed them.

kazoo calls block; the cluster's sync loop runs :meth:`NotificationPurger.purge` in a thread.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Iterable

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from kbroker.metadata import zk_znodes as zn

log = logging.getLogger("kbroker.metadata.zk")

# Kafka's ZkNodeChangeNotificationListener default (changeExpirationMs), used by its dynamic
# config manager and by AclAuthorizer alike.
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
PURGED_PATHS = (zn.CONFIG_CHANGES, zn.ACL_CHANGES, zn.EXTENDED_ACL_CHANGES)
_TIMEOUT_S = 15


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


class NotificationPurger:
    def __init__(self, zk: KazooClient, paths: Iterable[str] = PURGED_PATHS,
                 expiration_ms: int | None = None,
                 clock_ms: Callable[[], int] = _wall_clock_ms):
        self._zk = zk
        self._paths = tuple(paths)
        # Read at construction, not import: a test shortens it by patching the constant.
        self._expiration_ms = CHANGE_EXPIRATION_MS if expiration_ms is None else expiration_ms
        self._clock_ms = clock_ms
        self._purged_at: dict[str, int] = {}  # path -> children version of its last round

    def purge(self) -> int:
        """One round over the paths whose children changed since the last; the number of
        notifications this call deleted."""
        now = self._clock_ms()
        pending = {path: self._zk.exists_async(path) for path in self._paths}
        deleted = 0
        for path, result in pending.items():
            stat = result.get(timeout=_TIMEOUT_S)
            if stat is None or self._purged_at.get(path) == stat.cversion:
                continue
            deleted += self._purge_children(path, now)
            # The version seen before listing: a notification added meanwhile brings a next
            # round, as does this round's own deletions (which then finds nothing more to do).
            self._purged_at[path] = stat.cversion
        return deleted

    def _purge_children(self, path: str, now: int) -> int:
        try:
            children = sorted(self._zk.get_children(path))
        except NoNodeError:
            return 0
        stats = {child: self._zk.exists_async(f"{path}/{child}") for child in children}
        expired = []
        for child, result in stats.items():
            stat = result.get(timeout=_TIMEOUT_S)
            if stat is not None and now - stat.ctime > self._expiration_ms:
                expired.append(f"{path}/{child}")
        deletions = [(node, self._zk.delete_async(node)) for node in expired]
        deleted = 0
        for node, result in deletions:
            try:
                result.get(timeout=_TIMEOUT_S)
            except NoNodeError:
                continue  # another broker purged it first
            log.debug("purged change notification %s", node)
            deleted += 1
        return deleted
