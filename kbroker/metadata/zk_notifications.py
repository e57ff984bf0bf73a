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
  changeExpirationMs`` (15 minutes, :data:`CHANGE_EXPIRATION_MS`) is deleted. Unlike Kafka, a
  child's ctime is read once and remembered (it never changes), and a round reads and deletes
  at most :data:`PURGE_BATCH` children per path, so a burst never stalls the broker's metadata
  re-reads that run the purge;
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
# Notifications read (their Stat) and deleted per path per round, at most: a burst of thousands
# is purged over several rounds (each follows at once: the deletions fire the child watch).
PURGE_BATCH = 500
_TIMEOUT_S = 15


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


class NotificationPurger:
    def __init__(self, zk: KazooClient, paths: Iterable[str] = PURGED_PATHS,
                 expiration_ms: int | None = None,
                 clock_ms: Callable[[], int] = _wall_clock_ms, batch: int = PURGE_BATCH):
        self._zk = zk
        self._paths = tuple(paths)
        # Read at construction, not import: a test shortens it by patching the constant.
        self._expiration_ms = CHANGE_EXPIRATION_MS if expiration_ms is None else expiration_ms
        self._clock_ms = clock_ms
        self._batch = batch
        self._purged_at: dict[str, int] = {}  # path -> children version of its last full round
        # path -> child -> ctime. A znode's ctime never changes, so each child's Stat is read
        # once, not on every round as Kafka does (5,000 notifications cost 2 s of kazoo's time).
        self._ctimes: dict[str, dict[str, int]] = {path: {} for path in self._paths}

    def purge(self) -> int:
        """One round over the paths whose children changed since the last full round; the
        number of notifications this call deleted."""
        now = self._clock_ms()
        pending = {path: self._zk.exists_async(path) for path in self._paths}
        deleted = 0
        for path, result in pending.items():
            stat = result.get(timeout=_TIMEOUT_S)
            if stat is None or self._purged_at.get(path) == stat.cversion:
                continue
            done, count = self._purge_children(path, now)
            deleted += count
            if done:
                # The version seen before listing: a notification added meanwhile brings a
                # next round, as does this round's own deletions (which then finds nothing
                # more to do).
                self._purged_at[path] = stat.cversion
        return deleted

    def _purge_children(self, path: str, now: int) -> tuple[bool, int]:
        """(whether every child was looked at, how many were deleted). At most ``batch``
        reads and ``batch`` deletes, so one round never holds the broker's metadata sync long;
        a round that stops short leaves the path for the next one."""
        try:
            children = sorted(self._zk.get_children(path))  # sequence order: oldest first
        except NoNodeError:
            return True, 0
        ctimes = self._ctimes[path]
        for gone in ctimes.keys() - set(children):
            del ctimes[gone]
        unknown = [child for child in children if child not in ctimes]
        reads = {child: self._zk.exists_async(f"{path}/{child}")
                 for child in unknown[:self._batch]}
        for child, result in reads.items():
            stat = result.get(timeout=_TIMEOUT_S)
            if stat is not None:  # else another broker purged it meanwhile
                ctimes[child] = stat.ctime
        expired = [child for child in children
                   if child in ctimes and now - ctimes[child] > self._expiration_ms]
        deletions = [(child, self._zk.delete_async(f"{path}/{child}"))
                     for child in expired[:self._batch]]
        deleted = 0
        for child, result in deletions:
            ctimes.pop(child, None)
            try:
                result.get(timeout=_TIMEOUT_S)
            except NoNodeError:
                continue  # another broker purged it first
            log.debug("purged change notification %s/%s", path, child)
            deleted += 1
        return len(unknown) <= self._batch and len(expired) <= self._batch, deleted
