"""Cluster mode: this broker's life in a ZooKeeper cluster, from connecting to deregistering.

:class:`ZkCluster` is what the server starts when ``zookeeper.connect`` is set:

1. :meth:`open` connects (``zookeeper.connect`` with its chroot,
   ``zookeeper.session.timeout.ms``, ``zookeeper.connection.timeout.ms``), opens the
   ZooKeeper metadata store (``/cluster/id``, the persistent paths) and the
   :class:`ClusterController`, whose first image is read from ZooKeeper.
2. :meth:`start` (once the listeners are bound, so the advertised ports are known) registers
   ``/brokers/ids/N`` (again after every lost session), competes for ``/controller``, and starts
   the **sync loop**: every watch that fires (``/brokers/ids``, ``/brokers/topics``,
   ``/isr_change_notification``, ``/config/changes``, ``/admin/delete_topics``,
   ``/kafka-acl-changes``, ``/kafka-acl-extended-changes``, ``/controller``, ``/feature``)
   only *nudges* it; it then re-reads the whole tree and publishes the image.
   It also re-reads every ``RESYNC_INTERVAL_S`` without a nudge, so a notification lost while
   the session was reconnecting, or one that arrived out of order, cannot leave the broker
   behind for long. While this broker is the controller, each round ends with the controller
   duties (leader election on broker loss or return, preferred leaders) on the fresh image.
   Every broker then purges config and ACL change notifications older than 15 minutes, as
   Kafka's brokers do (:mod:`zk_notifications`).
3. :meth:`stop` is a **controlled shutdown** (``controlled.shutdown.enable``): the broker
   removes its ``/brokers/ids/N`` first, so the controller (itself, or another broker) moves the
   leadership of its partitions to other in-sync replicas while this broker still serves; it
   waits until it leads nothing another live broker could lead, at most
   ``controlled.shutdown.max.retries`` rounds of ``controlled.shutdown.retry.backoff.ms``, then
   closes its session (its ``/controller``, if it held it, goes with it).

Threads: kazoo runs watches and session events on its own threads; they only set an asyncio
event through ``call_soon_threadsafe``. Everything else runs on the event loop.
"""

from __future__ import annotations

import asyncio
import logging

from kazoo.exceptions import NoNodeError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from kbroker.metadata import zk_client
from kbroker.metadata import zk_znodes as zn
from kbroker.metadata.zk_controller import ClusterController
from kbroker.metadata.zk_election import ControllerElection
from kbroker.metadata.zk_notifications import NotificationPurger
from kbroker.metadata.zk_registration import BrokerRegistration
from kbroker.metadata.zk_store import ZkMetadataStore

log = logging.getLogger("kbroker.cluster")

# Re-read ZooKeeper this often even without a notification (seconds).
RESYNC_INTERVAL_S = 2.0
# ... but at most once per this many times the last read's duration (large clusters).
RESYNC_BUDGET = 20
# Notifications kept under /isr_change_notification; the controller deletes older ones.
KEEP_NOTIFICATIONS = 100
# The most a stop waits for the ZooKeeper client to close (seconds).
CLOSE_TIMEOUT_S = 5
_WATCHED = (zn.BROKER_IDS, zn.TOPICS, zn.ISR_CHANGE, zn.CONFIG_CHANGES, zn.DELETE_TOPICS,
            zn.ACL_CHANGES, zn.EXTENDED_ACL_CHANGES)
# ISR change notifications are trimmed by the controller to the newest KEEP_NOTIFICATIONS
# (Kafka's controller deletes them once processed; the content is never needed: every broker
# re-reads the tree). Config and ACL change notifications age out (zk_notifications).
_TRIMMED = (zn.ISR_CHANGE,)


class ZkUnavailable(RuntimeError):
    pass


class ZkCluster:
    def __init__(self, config, node_id: int, client, store: ZkMetadataStore,
                 controller: ClusterController):
        self.config = config
        self.node_id = node_id
        self.client = client
        self.store = store
        self.controller = controller
        self.registration: BrokerRegistration | None = None
        self.election: ControllerElection | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._nudge: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._stopping = False
        self._purger = NotificationPurger(client)

    @classmethod
    def open(cls, config, node_id: int) -> "ZkCluster":
        connect = config.get("zookeeper.connect")
        try:
            client = zk_client.connect(connect, config.get("zookeeper.session.timeout.ms"),
                                       config.zookeeper_connection_timeout_ms)
        except Exception as exc:
            raise ZkUnavailable(f"cannot reach ZooKeeper at {connect} "
                                f"({type(exc).__name__}: {exc})") from None
        try:
            store = ZkMetadataStore(client, node_id, config.get("cluster.id"))
            controller = ClusterController(store, node_id, client, config)
        except Exception:
            client.stop()
            client.close()
            raise
        return cls(config, node_id, client, store, controller)

    # --- start -------------------------------------------------------------------------------

    async def start(self, endpoints: list[zn.Endpoint], rack: str | None) -> None:
        self._loop = asyncio.get_running_loop()
        self._nudge = asyncio.Event()
        self.registration = BrokerRegistration(self.client, self.node_id, endpoints, rack)
        await asyncio.to_thread(self.registration.register)
        self.election = ControllerElection(self.client, self.node_id, self.store,
                                           on_change=lambda _: self.nudge())
        self.controller.is_active = lambda: self.election.is_controller
        await asyncio.to_thread(self.election.start)
        for path in _WATCHED:
            ChildrenWatch(self.client, path, self._on_children, send_event=False)
        DataWatch(self.client, zn.FEATURE, lambda _data, _stat: self._on_children(None))
        self._task = asyncio.create_task(self._sync_loop(), name="zk-sync")
        await self.controller.refresh()

    def _on_children(self, _children) -> bool:
        self.nudge()
        return not self._stopping  # False stops kazoo's watch

    def nudge(self) -> None:
        """Ask the sync loop for a fresh read; callable from any thread."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._nudge.set)

    async def _sync_loop(self) -> None:
        # Not asyncio.wait_for: on 3.11 it swallows a cancel that arrives as the nudge is set,
        # and this loop would then outlive stop(). The flag ends it even so.
        interval = RESYNC_INTERVAL_S
        while not self._stopping:
            try:
                async with asyncio.timeout(interval):
                    await self._nudge.wait()
            except TimeoutError:
                pass
            self._nudge.clear()
            try:
                started = self._loop.time()
                await self.controller.refresh()
                # A full read costs O(partitions) (about 0.2 ms each): the unprompted re-read
                # is spaced so it never takes more than 1/RESYNC_BUDGET of the time.
                interval = max(RESYNC_INTERVAL_S,
                               (self._loop.time() - started) * RESYNC_BUDGET)
                if self.election.is_controller:
                    epoch = self.election.epoch
                    if await self.controller.run_duties(epoch):
                        self._nudge.set()  # read back what was written
                    await asyncio.to_thread(self._trim_notifications)
                await asyncio.to_thread(self._purger.purge)
            except asyncio.CancelledError:
                raise
            except zk_client.ZK_ERRORS as exc:  # connection loss: the next round tries again
                log.warning("reading ZooKeeper failed (%s); retrying", type(exc).__name__)
            except Exception:
                log.exception("cluster metadata sync failed; retrying")

    def _trim_notifications(self) -> None:
        for parent in _TRIMMED:
            children = sorted(self.client.get_children(parent))
            for child in children[:-KEEP_NOTIFICATIONS] if len(children) > KEEP_NOTIFICATIONS \
                    else ():
                try:
                    self.client.delete(f"{parent}/{child}")
                except NoNodeError:
                    pass

    # --- stop --------------------------------------------------------------------------------

    async def stop(self) -> None:
        if self._task is not None and self.config.get("controlled.shutdown.enable"):
            try:
                await self._controlled_shutdown()
            except Exception:
                log.exception("controlled shutdown failed; stopping anyway")
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        if self.election is not None:
            self.election.stop()
        if self.registration is not None:
            self.registration.close()
        try:  # kazoo's stop waits for its connection thread; never let that hold the shutdown
            async with asyncio.timeout(CLOSE_TIMEOUT_S):
                await asyncio.to_thread(self._close_client)
        except TimeoutError:
            log.warning("closing the ZooKeeper session took over %d s; leaving it to expire",
                        CLOSE_TIMEOUT_S)

    def _close_client(self) -> None:
        try:
            self.client.stop()  # closes the session: the ephemeral znodes go now
        finally:
            self.client.close()

    async def _controlled_shutdown(self) -> None:
        if not self._leads_movable():
            return
        log.info("controlled shutdown: broker %d deregisters so leadership moves away",
                 self.node_id)
        self.registration.close()
        try:
            await asyncio.to_thread(self.client.delete, self.registration.path)
        except NoNodeError:
            pass
        self.nudge()
        rounds = self.config.get("controlled.shutdown.max.retries")
        wait = self.config.get("controlled.shutdown.retry.backoff.ms") / 1000
        deadline = self._loop.time() + max(1, rounds) * wait
        while self._loop.time() < deadline:
            await asyncio.sleep(0.05)
            if not self._leads_movable():
                log.info("controlled shutdown: broker %d leads no partition another broker "
                         "can lead", self.node_id)
                return
        log.warning("controlled shutdown: broker %d still leads partitions after %.1f s; "
                    "stopping anyway", self.node_id, max(1, rounds) * wait)

    def _leads_movable(self) -> bool:
        """Whether this broker leads a partition some other live in-sync replica could lead."""
        image = self.controller.image
        others = set(image.brokers) - {self.node_id}
        for topic in image.topics().values():
            for state in topic.states:
                if state.leader == self.node_id and any(r in others for r in state.isr):
                    return True
        return False
