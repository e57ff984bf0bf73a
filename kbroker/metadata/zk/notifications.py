"""Purging old change notifications, as Kafka's ``ZkNodeChangeNotificationListener`` does.

A config, SCRAM or quota change adds a sequential ``/config/changes/config_change_N`` znode, an
ACL change an ``acl_changes_N`` under ``/kafka-acl-changes`` or ``/kafka-acl-extended-changes``
(:mod:`.store`, :mod:`.security`), a delegation token change a ``token_change_N`` under
``/delegation_token/token_changes`` (:mod:`.tokens`). Brokers read a notification once, when it
arrives (:mod:`.sync`); left alone the znodes pile up in ZooKeeper's memory and in every listing.
Kafka 3.x's listener (``kafka.common.ZkNodeChangeNotificationListener``) purges them
after processing a change, and :class:`NotificationPurger` does the same, step for step:

- it runs when the children of a notification path changed (Kafka: on the child watch and after a
  new session) — here, when the path's children version (``cversion``) moved since its last
  round, checked on each round of the broker's metadata sync;
- ``now`` is taken once, before the listing; each child's creation time is read from its
  ``Stat`` (``ctime``, ZooKeeper's clock in ms) and a child with ``now - ctime >
  changeExpirationMs`` (15 minutes, :data:`CHANGE_EXPIRATION_MS`) is deleted. Unlike Kafka, a
  child's ctime is read once and remembered (it never changes), and a round reads and deletes
  at most :data:`PURGE_BATCH` children per path, so a burst never stalls the broker's metadata
  re-reads that run the purge;
- every broker purges, so a child may vanish between the listing and its stat or delete: that is
  skipped, never an error (Kafka's ``deletePath`` ignores NoNode).

``/isr_change_notification`` is trimmed by the elected controller (:func:`trim`), as Kafka's
controller deletes ISR notifications once it has processed them; here every broker reads them,
so the newest ``KEEP_ISR_NOTIFICATIONS`` stay, and the oldest go first (a broker that finds the
newest one it processed gone knows it may have missed some, and re-reads everything).

Both are coroutines over kazoo's asynchronous calls: nothing blocks the event loop.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Iterable

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from kbroker.metadata.zk import znodes as zn
from kbroker.metadata.zk.client import aio, gather

log = logging.getLogger("kbroker.metadata.zk")

# Kafka's ZkNodeChangeNotificationListener default (changeExpirationMs), used by its dynamic
# config manager and by AclAuthorizer alike.
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
PURGED_PATHS = (zn.CONFIG_CHANGES, zn.ACL_CHANGES, zn.EXTENDED_ACL_CHANGES, zn.TOKEN_CHANGES)
# Notifications read (their Stat) and deleted per path per round, at most: a burst of thousands
# is purged over several rounds (each follows at once: the deletions fire the child watch).
PURGE_BATCH = 500
# ISR change notifications the controller leaves in place (the newest ones).
KEEP_ISR_NOTIFICATIONS = 1000


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

    async def purge(self) -> int:
        """One round over the paths whose children changed since the last full round; the
        number of notifications this call deleted."""
        now = self._clock_ms()
        stats = await gather([self._zk.exists_async(path) for path in self._paths])
        deleted = 0
        for path, stat in zip(self._paths, stats):
            if isinstance(stat, Exception):
                raise stat
            if stat is None or self._purged_at.get(path) == stat.cversion:
                continue
            done, count = await self._purge_children(path, now)
            deleted += count
            if done:
                # The version seen before listing: a notification added meanwhile brings a
                # next round, as does this round's own deletions (which then finds nothing
                # more to do).
                self._purged_at[path] = stat.cversion
        return deleted

    async def _purge_children(self, path: str, now: int) -> tuple[bool, int]:
        """(whether every child was looked at, how many were deleted). At most ``batch``
        reads and ``batch`` deletes, so one round never holds the broker's metadata sync long;
        a round that stops short leaves the path for the next one."""
        try:  # sequence order: oldest first
            children = sorted(await aio(self._zk.get_children_async(path)))
        except NoNodeError:
            return True, 0
        ctimes = self._ctimes[path]
        for gone in ctimes.keys() - set(children):
            del ctimes[gone]
        unknown = [child for child in children if child not in ctimes][:self._batch]
        stats = await gather([self._zk.exists_async(f"{path}/{c}") for c in unknown])
        for child, stat in zip(unknown, stats):
            if isinstance(stat, Exception):
                raise stat
            if stat is not None:  # else another broker purged it meanwhile
                ctimes[child] = stat.ctime
        expired = [child for child in children
                   if child in ctimes and now - ctimes[child] > self._expiration_ms]
        batch = expired[:self._batch]
        results = await gather([self._zk.delete_async(f"{path}/{c}") for c in batch])
        deleted = 0
        for child, result in zip(batch, results):
            ctimes.pop(child, None)
            if isinstance(result, NoNodeError):
                continue  # another broker purged it first
            if isinstance(result, Exception):
                raise result
            log.debug("purged change notification %s/%s", path, child)
            deleted += 1
        return (len([c for c in children if c not in ctimes]) == 0
                and len(expired) <= self._batch), deleted


async def trim(zk: KazooClient, parent: str = zn.ISR_CHANGE,
               keep: int = KEEP_ISR_NOTIFICATIONS) -> int:
    """Delete the oldest children of ``parent`` beyond the newest ``keep`` (in sequence order,
    oldest first: see the module docstring); how many went."""
    try:
        children = sorted(await aio(zk.get_children_async(parent)))
    except NoNodeError:
        return 0
    doomed = children[:-keep] if len(children) > keep else []
    results = await gather([zk.delete_async(f"{parent}/{c}") for c in doomed])
    return sum(1 for r in results if not isinstance(r, Exception))
