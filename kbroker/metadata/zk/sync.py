"""Following ZooKeeper: every watch that fires becomes a delta of just what it names.

Each broker keeps its image in step with ZooKeeper through one-shot watches, re-armed by the
read that follows each event (Kafka's ``ZNodeChildChangeHandler`` / ``ZNodeChangeHandler``):

=====================================  =======================================================
watch                                  what is read, as a delta (:mod:`.reader`)
=====================================  =======================================================
children of ``/brokers/ids``           the broker registrations (a broker came or went)
``/controller`` (exists + data)        the active controller
``/feature`` (exists + data)           the finalized features
children of ``/brokers/topics``        the topics that appeared (whole) or went
data of each ``/brokers/topics/T``     that topic's assignment (CreatePartitions,
                                       reassignment steps), with the states it added
children of ``/admin/delete_topics``   the topics on their way out (invisible from then on)
children of ``/isr_change_             the partition states each new notification names
notification``
children of ``/config/changes``        the config entity each new notification names (a
                                       topic's or broker's configs, a user's SCRAM
                                       credentials and quotas, a client's or ip's quotas, a
                                       group's configs)
children of ``/kafka-acl-changes``,    the ACL resource each new notification names
``/kafka-acl-extended-changes``
children of ``/delegation_token/       the delegation token each new notification names
token_changes``
=====================================  =======================================================

Every read goes through :meth:`Controller.follow`, under the controller's write lock, so it is
never older than this broker's own commits; the reader keeps only what is newer than the image
(znode versions and zxids). Notifications are sequential znodes: the sync remembers the newest
it processed per path and reads only those after it. Their owners delete old ones oldest first
(the controller trims ISR notifications, every broker purges config and ACL notifications after
15 minutes, :mod:`.notifications`), so if the newest processed one is gone, some unprocessed ones
may be too: the sync then re-reads everything, quietly.

**The safety net.** Every ``FULL_READ_INTERVAL_S`` (spaced to at most 1/``FULL_READ_BUDGET`` of
the time on a large cluster), the whole tree is read and compared with the image. A difference
is re-read under the write lock (so a change that was merely in flight is not mistaken for one)
and, if it is still there, published and logged as a WARNING naming what differed: a watch was
lost, which is a bug. After a lost session, and after a mere dropped connection too (kazoo
keeps no watch across a reconnect: it drops them all at the disconnect, telling each with a
session event, and does not send ZooKeeper's SetWatches), every watch is re-armed and the tree
re-read, quietly.

Threads: kazoo calls watch callbacks and session listeners on its own threads; they only queue a
key for the sync task (``call_soon_threadsafe``). The sync task is the one reader.
"""

from __future__ import annotations

import asyncio
import logging
import time

from kazoo.client import KazooState
from kazoo.protocol.states import EventType

from kbroker.metadata.delta import MetadataDelta
from kbroker.metadata.image import MetadataImage
from kbroker.metadata.zk import security, tokens
from kbroker.metadata.zk import znodes as zn
from kbroker.metadata.zk.client import ZK_ERRORS
from kbroker.metadata.zk.notifications import KEEP_ISR_NOTIFICATIONS

log = logging.getLogger("kbroker.cluster")

# The safety net's full read: at most this often (seconds) ...
FULL_READ_INTERVAL_S = 60.0
# ... and spaced so it takes at most 1/FULL_READ_BUDGET of the time (large clusters).
FULL_READ_BUDGET = 20
# A full read's difference is re-read this long after it was seen (notifications in flight).
SETTLE_S = 1.0
# After a failed read (connection lost), the same work is tried again this much later.
RETRY_S = 0.5

_NOTIFICATIONS = {"isr": zn.ISR_CHANGE, "config": zn.CONFIG_CHANGES,
                  "acl": zn.ACL_CHANGES, "acl-extended": zn.EXTENDED_ACL_CHANGES,
                  "token": zn.TOKEN_CHANGES}


class ZkSync:
    def __init__(self, client, store):
        self._zk = client
        self._store = store
        self._reader = store.reader
        self._controller = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: dict[tuple, None] = {}  # work keys in arrival order
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._stopping = False
        self._watchers: dict[tuple, object] = {}
        self._topics: set[str] = set()  # the last listing of /brokers/topics
        self._deleting: set[str] = set()
        self._last_seen: dict[str, str | None] = {}
        self._next_full = 0.0
        self._full_interval = FULL_READ_INTERVAL_S
        self._verifying: asyncio.Task | None = None
        # set from kazoo's thread, read there too: the connection dropped (watches are gone)
        self._disconnected = False
        # For the scale benchmark and /metrics: watch events handled (a burst of events of one
        # kind is handled once), and differences the safety net found.
        self.handled = 0
        self.differences = 0

    # --- lifecycle -----------------------------------------------------------------------------

    async def load(self) -> MetadataImage:
        """The first image, read with every watch armed as it reads (the notification paths
        first): whatever changes from then on fires a watch, and is handled once the sync
        starts; nothing between this read and the start (log recovery: seconds on a large
        broker) is missed."""
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        await self._store.finish_deletions()
        for kind, path in _NOTIFICATIONS.items():
            children = sorted(await self._reader.children(path, self._watcher(kind)))
            self._last_seen[path] = children[-1] if children else None
        image = await self._reader.read_image(lambda kind: self._watcher(kind))
        self._topics = set(image.topics()) | set(await self._reader.children(zn.TOPICS))
        return image

    async def start(self, controller) -> None:
        """Follow ZooKeeper for ``controller`` (whose first image :meth:`load` read)."""
        self._controller = controller
        self._zk.add_listener(self._on_session)
        self._next_full = self._loop.time() + self._full_interval
        self._task = asyncio.create_task(self._run(), name="zk-sync")

    async def stop(self) -> None:
        self._stopping = True
        self._zk.remove_listener(self._on_session)
        for task in (self._task, self._verifying):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    @property
    def reads(self) -> int:
        return self._reader.reads

    def nudge(self, *key) -> None:
        """Queue ``key`` for the sync task; callable from any thread."""
        loop = self._loop
        if loop is None or self._stopping or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(self._queue, key)
        except RuntimeError:  # closed meanwhile
            pass

    def _queue(self, key: tuple) -> None:
        self._pending[key] = None
        self._wake.set()

    def _watcher(self, *key):
        """One callback per key: kazoo keeps a path's watchers in a set, so re-arming with the
        same object adds nothing."""
        watcher = self._watchers.get(key)
        if watcher is None:
            def watcher(event, key=key):
                if event.type == EventType.NONE:  # a session event, not a change
                    return
                if key == ("topic",):
                    self.nudge("topic", event.path.rsplit("/", 1)[-1])
                else:
                    self.nudge(*key)
            self._watchers[key] = watcher
        return watcher

    def _on_session(self, state: str) -> None:
        if state in (KazooState.LOST, KazooState.SUSPENDED):
            # kazoo drops every watch at a disconnect, the session kept or not: a changed
            # /brokers/ids would go unnoticed (a fault run saw a controller miss a broker's
            # re-registration and its controlled shutdown after a 2 s cut of its ZooKeeper link).
            self._disconnected = True
        elif state == KazooState.CONNECTED and self._disconnected:
            self._disconnected = False
            log.info("ZooKeeper connection back: re-arming the metadata watches")
            self.nudge("catch-up")

    # --- the loop --------------------------------------------------------------------------------

    async def _run(self) -> None:
        while not self._stopping:
            due = self._next_full  # infinite while a full read runs
            if not self._pending:
                try:
                    async with asyncio.timeout(None if due == float("inf")
                                               else max(0.0, due - self._loop.time())):
                        await self._wake.wait()
                except TimeoutError:
                    self._pending[("full",)] = None
            self._wake.clear()
            keys, self._pending = list(self._pending), {}
            for key in keys:
                try:
                    await self._handle(key)
                    self.handled += 1
                except asyncio.CancelledError:
                    raise
                except (*ZK_ERRORS, TimeoutError) as exc:
                    log.warning("reading ZooKeeper for %s failed (%s); retrying", key[0],
                                type(exc).__name__)
                    self._loop.call_later(RETRY_S, self._queue, key)
                except Exception:
                    log.exception("cluster metadata sync of %s failed; retrying", key[0])
                    self._loop.call_later(RETRY_S, self._queue, key)

    async def _handle(self, key: tuple) -> None:
        kind = key[0]
        reader, follow = self._reader, self._controller.follow
        if kind == "brokers":
            await follow(lambda image: reader.read_brokers(image, self._watcher("brokers")))
        elif kind == "controller":
            await follow(lambda image: reader.read_controller(image,
                                                              self._watcher("controller")))
        elif kind == "feature":
            await follow(lambda image: reader.read_features(image, self._watcher("feature")))
        elif kind == "topics":
            await follow(self._read_topics)
        elif kind == "topic":
            name = key[1]
            if name in self._topics:
                await follow(lambda image: reader.read_assignment(image, name,
                                                                  self._watcher("topic")))
        elif kind == "deleting":
            await follow(self._read_deleting)
        elif kind in _NOTIFICATIONS:
            await self._notifications(kind)
        elif kind == "full":
            # Beside the notifications, not before them: on a large cluster the full read takes
            # seconds, which a new topic must not wait for.
            if self._verifying is None or self._verifying.done():
                self._next_full = float("inf")
                self._verifying = asyncio.create_task(self._scheduled_verify(),
                                                      name="zk-sync-full-read")
        elif kind == "catch-up":
            await self._catch_up()

    async def _scheduled_verify(self) -> None:
        started = self._loop.time()
        try:
            await self._verify(quiet=False)
        except asyncio.CancelledError:
            raise
        except (*ZK_ERRORS, TimeoutError) as exc:
            log.warning("the periodic full read of ZooKeeper failed (%s); next round retries",
                        type(exc).__name__)
        except Exception:
            log.exception("the periodic full read of ZooKeeper failed")
        finally:
            self._full_interval = max(FULL_READ_INTERVAL_S,
                                      (self._loop.time() - started) * FULL_READ_BUDGET)
            self._next_full = self._loop.time() + self._full_interval
            self._wake.set()

    async def _catch_up(self) -> None:
        """Arm every watch and bring the image to what ZooKeeper holds now, quietly (start-up,
        a new session: changes were missed for a known reason)."""
        for kind in ("brokers", "controller", "feature", "deleting", "topics"):
            await self._handle((kind,))
        self._topics = set(await self._reader.children(zn.TOPICS))
        await self._reader.exists_many([zn.topic_path(n) for n in self._topics],
                                       self._watcher("topic"))
        for kind, path in _NOTIFICATIONS.items():
            children = sorted(await self._reader.children(path, self._watcher(kind)))
            self._last_seen[path] = children[-1] if children else None
        await self._verify(quiet=True)

    # --- topics ----------------------------------------------------------------------------------

    async def _read_topics(self, image: MetadataImage) -> MetadataDelta:
        names = set(await self._reader.children(zn.TOPICS, self._watcher("topics")))
        # New children, and topics listed both times that the image lacks (deleted and created
        # again between two listings).
        new = (names - self._topics) | {n for n in names if image.topic(n) is None}
        gone = self._topics - names
        self._topics = names
        # A new child the image has already (this broker created it) is not read again: its
        # topic znode alone says whether it is that topic, unchanged since, and arms its data
        # watch.
        known = sorted(n for n in new if image.topic(n) is not None)
        found = await self._reader.get_many([zn.topic_path(n) for n in known],
                                            self._watcher("topic"))
        for name in known:
            entry = found.get(zn.topic_path(name))
            if (entry is not None and entry[1].version == 0
                    and zn.decode_topic(entry[0])[0] == image.topic(name).topic_id):
                self._reader.versions.remember(zn.topic_path(name), entry[1])
                new.discard(name)
        topics = await self._reader.read_topics(sorted(new - self._deleting),
                                                self._watcher("topic"))
        created = {n: t for n, t in topics.items()
                   if t is not None and not t.same_as(image.topic(n))}
        deleted = frozenset(n for n in gone if image.topic(n) is not None)
        return MetadataDelta(created=created, deleted=deleted)

    async def _read_deleting(self, image: MetadataImage) -> MetadataDelta:
        self._deleting = set(await self._reader.children(zn.DELETE_TOPICS,
                                                         self._watcher("deleting")))
        return MetadataDelta(deleted=frozenset(n for n in self._deleting
                                               if image.topic(n) is not None))

    # --- notifications -----------------------------------------------------------------------------

    async def _notifications(self, kind: str) -> None:
        path = _NOTIFICATIONS[kind]
        missed = []

        async def read(image):
            # Listed under the write lock: a notification this broker's own commit created is
            # known by then (store.own_notifications), and skipped.
            children = sorted(await self._reader.children(path, self._watcher(kind)))
            last = self._last_seen.get(path)
            new = [c for c in children if last is None or c > last]
            if not new:
                return None
            if last is not None and last not in children and children[0] > last:
                missed.append(new[-1])  # deleted before it was read: older ones may have been
                return None
            if last is None and path == zn.ISR_CHANGE and len(children) >= KEEP_ISR_NOTIFICATIONS:
                # None seen yet, and as many as the controller keeps: it may have trimmed older
                # ones this broker never saw (a burst of ISR changes right after start-up).
                missed.append(new[-1])
                return None
            own, theirs = self._store.own_notifications, []
            for child in new:
                if f"{path}/{child}" in own:
                    del own[f"{path}/{child}"]
                else:
                    theirs.append(child)
            delta = None
            if theirs:
                found = await self._reader.get_many(f"{path}/{c}" for c in theirs)
                notes = [found[f"{path}/{c}"] for c in theirs if f"{path}/{c}" in found]
                delta = await self._read_named(kind, path, notes, image)
            # Only now: a read that failed (ZooKeeper slow, the connection lost) is retried
            # from the same notifications, not skipped past them.
            self._last_seen[path] = new[-1]
            return delta

        await self._controller.follow(read)
        if missed:
            log.info("%s: notifications were purged before this broker read them; "
                     "re-reading everything", path)
            await self._verify(quiet=True)
            self._last_seen[path] = missed[0]

    async def _read_named(self, kind: str, path: str, notes: list, image) -> MetadataDelta:
        """The delta of what the notifications (``notes``: (data, stat) each) name."""
        reader = self._reader
        data = [d for d, _ in notes]
        if kind == "isr":
            # A notification names states written in its own transaction: one the image holds
            # as read at that zxid or later (a new topic's later transactions, read with the
            # topic) is skipped.
            partitions = {(p["topic"], p["partition"]) for d, stat in notes
                          for p in _decoded(zn.decode_isr_change, d, path, [])
                          if _held_zxid(image, p["topic"], p["partition"]) < stat.czxid}
            return MetadataDelta(states=await reader.read_states(image, sorted(partitions)))
        if kind == "token":
            return await tokens.read_named(reader, image, (
                bytes(d).decode("utf-8", "replace") for d in data if d))
        delta = MetadataDelta()
        if kind == "config":
            for entity in dict.fromkeys(e for d in data if (
                    e := _decoded(zn.decode_config_change, d, path, None)) is not None):
                delta = delta.merged(await reader.read_entity(image.apply(delta), entity))
            return delta
        for resource in dict.fromkeys(
                r for d in data if (r := security.acl_change_resource(path, d)) is not None):
            delta = delta.merged(await security.read_acl_resource(self._zk, image.apply(delta),
                                                                  *resource))
        return delta

    # --- the safety net ----------------------------------------------------------------------------

    async def _verify(self, quiet: bool) -> None:
        """Read the whole tree; what differs from the image is re-read under the write lock and,
        if it still differs, published (and, unless ``quiet``, logged as a lost watch)."""
        started = time.monotonic()
        fresh = await self._reader.read_image()
        suspects = _differences(self._controller.image, fresh)
        if not suspects:
            log.debug("full metadata read: no difference (%.2f s)", time.monotonic() - started)
            return
        if not quiet:
            await asyncio.sleep(SETTLE_S)
            suspects = _differences(self._controller.image, fresh) & suspects

        async def read(image):
            delta = MetadataDelta()
            names = sorted(name for kind, name in suspects if kind == "topic")
            if names:
                topics = await self._reader.read_topics(names)
                delta = MetadataDelta(
                    created={n: t for n, t in topics.items()
                             if t is not None and not t.same_as(image.topic(n))},
                    deleted=frozenset(n for n, t in topics.items()
                                      if t is None and image.topic(n) is not None))
            if ("brokers", "") in suspects:
                delta = delta.merged(await self._reader.read_brokers(image))
            if ("controller", "") in suspects:
                delta = delta.merged(await self._reader.read_controller(image))
            if ("features", "") in suspects:
                delta = delta.merged(await self._reader.read_features(image))
            for scope in ("cluster", "broker"):
                if ("configs", scope) in suspects:
                    entity = zn.DEFAULT_ENTITY if scope == "cluster" else str(self._reader.node_id)
                    delta = delta.merged(await self._reader.read_entity(image,
                                                                        f"brokers/{entity}"))
            if ("security", "") in suspects:
                delta = delta.merged(_security_delta(image, *await security.read_all(self._zk)))
            if ("tokens", "") in suspects:
                delta = delta.merged(tokens.delta_to(image, await tokens.read_all(self._reader)))
            if ("groups", "") in suspects:
                now = await self._reader.read_all_group_configs()
                delta = delta.merged(MetadataDelta(group_configs={
                    g: now.get(g, {}) for g in image.group_configs.keys() | now.keys()
                    if now.get(g, {}) != dict(image.group_config(g))}))
            if not delta.empty and not quiet:
                self.differences += 1
                log.warning("metadata sync: the periodic full read of ZooKeeper found what no "
                            "notification had brought (a lost watch: a bug): %s",
                            _explain(image, delta))
            return delta

        await self._controller.follow(read)


def _held_zxid(image: MetadataImage, name: str, index) -> int:
    topic = image.topic(name)
    if topic is None or not isinstance(index, int) or not 0 <= index < topic.num_partitions:
        return -1
    return topic.state(index).zxid


def _decoded(decode, data: bytes, path: str, default):
    """A notification's content, or ``default`` (logged) when it cannot be read: a notification
    Kafka's tools or a hand wrote badly must not stop the sync."""
    try:
        return decode(data)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning("ignoring an unreadable notification under %s (%s): %r", path, exc,
                    data[:200])
        return default


def _differences(image: MetadataImage, fresh: MetadataImage) -> set[tuple[str, str]]:
    """What differs between two images, as (kind, name) keys."""
    found = set()
    for name in image.topics().keys() | fresh.topics().keys():
        mine, theirs = image.topic(name), fresh.topic(name)
        if mine is None or theirs is None or not mine.same_as(theirs):
            found.add(("topic", name))
    if dict(image.brokers) != dict(fresh.brokers):
        found.add(("brokers", ""))
    if image.controller_id != fresh.controller_id:
        found.add(("controller", ""))
    if (dict(image.finalized_features) != dict(fresh.finalized_features)
            or image.features_epoch != fresh.features_epoch):
        found.add(("features", ""))
    for scope in ("cluster", "broker"):
        if image.broker_configs(cluster_default=scope == "cluster") != \
                fresh.broker_configs(cluster_default=scope == "cluster"):
            found.add(("configs", scope))
    if (set(image.acls) != set(fresh.acls)
            or {u: dict(m) for u, m in image.scram_credentials.items()}
            != {u: dict(m) for u, m in fresh.scram_credentials.items()}
            or {e: dict(v) for e, v in image.client_quotas.items()}
            != {e: dict(v) for e, v in fresh.client_quotas.items()}):
        found.add(("security", ""))
    if dict(image.delegation_tokens) != dict(fresh.delegation_tokens):
        found.add(("tokens", ""))
    if ({g: dict(c) for g, c in image.group_configs.items()}
            != {g: dict(c) for g, c in fresh.group_configs.items()}):
        found.add(("groups", ""))
    return found


def _security_delta(image: MetadataImage, credentials, acls, quotas) -> MetadataDelta:
    held = {u: dict(m) for u, m in image.scram_credentials.items()}
    scram = {}
    for user in held.keys() | credentials.keys():
        for mechanism in zn.SCRAM_MECHANISMS:
            now = credentials.get(user, {}).get(mechanism)
            if now != held.get(user, {}).get(mechanism):
                scram[(user, mechanism)] = now
    now_acls, held_acls = set(acls), set(image.acls)
    changed_quotas = {e: quotas.get(e, {}) for e in image.client_quotas.keys() | quotas.keys()
                      if dict(image.client_quotas.get(e, {})) != quotas.get(e, {})}
    return MetadataDelta(scram=scram, acls_added=tuple(sorted(now_acls - held_acls)),
                         acls_removed=tuple(sorted(held_acls - now_acls)),
                         client_quotas=changed_quotas)


def _explain(image: MetadataImage, delta: MetadataDelta) -> str:
    """What a delta changes in ``image``, partition by partition where it is a topic's."""
    parts = []
    for name, topic in sorted(delta.created.items()):
        before = image.topic(name)
        if before is None:
            parts.append(f"topic {name} missing")
            continue
        if before.topic_id != topic.topic_id:
            parts.append(f"topic {name} is {topic.topic_id}, not {before.topic_id}")
        if before.assignments != topic.assignments:
            parts.append(f"topic {name} replicas {list(map(list, topic.assignments))[:10]}")
        if dict(before.configs) != dict(topic.configs):
            parts.append(f"topic {name} configs {dict(topic.configs)}, not "
                         f"{dict(before.configs)}")
        states = [(i, s, before.state(i)) for i, s in enumerate(topic.states)
                  if i >= before.num_partitions or s != before.state(i)]
        for index, state, old in states[:10]:
            parts.append(f"{name}-{index} leader {state.leader} epoch {state.leader_epoch} isr "
                         f"{list(state.isr)} v{state.version} (held: leader {old.leader} epoch "
                         f"{old.leader_epoch} isr {list(old.isr)} v{old.version})")
        if len(states) > 10:
            parts.append(f"... and {len(states) - 10} more partitions of {name}")
    rest = MetadataDelta(deleted=delta.deleted, brokers=delta.brokers,
                         controller_id=delta.controller_id, features=delta.features,
                         features_epoch=delta.features_epoch,
                         broker_configs=delta.broker_configs, scram=delta.scram,
                         acls_added=delta.acls_added, acls_removed=delta.acls_removed,
                         client_quotas=delta.client_quotas, tokens=delta.tokens,
                         group_configs=delta.group_configs)
    if not rest.empty:
        parts.append(rest.describe())
    return "; ".join(parts)
