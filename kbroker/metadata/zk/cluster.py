"""Cluster mode: this broker's life in a ZooKeeper cluster, from connecting to deregistering.

:class:`ZkCluster` is what the broker starts when ``zookeeper.connect`` is set:

1. :meth:`open` connects (``zookeeper.connect`` with its chroot,
   ``zookeeper.session.timeout.ms``, ``zookeeper.connection.timeout.ms``; in a thread, since
   kazoo's connect blocks), opens the ZooKeeper store (the persistent paths, ``/cluster/id``)
   and reads the first image with every watch armed (:meth:`ZkSync.load`). The broker builds
   its :class:`Controller` on that store and image, exactly as a single node does on its
   file.
2. :meth:`start` (once the listeners are bound, so the advertised ports are known) registers
   ``/brokers/ids/N`` (again after every lost session, :mod:`.registration`), competes for
   ``/controller`` (:mod:`.election`), starts following ZooKeeper (:mod:`.sync`: every watch
   becomes a delta of what it names) and the elected controller's duties (:mod:`.duties`), and
   purges old change notifications every round of the sync's safety net, as Kafka's brokers do
   (:mod:`.notifications`).
3. :meth:`stop` is a **controlled shutdown** (``controlled.shutdown.enable``): the broker
   removes its ``/brokers/ids/N`` first, so the controller (itself, or another broker) moves the
   leadership of its partitions to other in-sync replicas while this broker still serves; it
   waits until it leads nothing another live broker could lead, at most
   ``controlled.shutdown.max.retries`` rounds of ``controlled.shutdown.retry.backoff.ms``, then
   closes its session (its ``/controller``, if it held it, goes with it).

Threads: kazoo runs watches and session events on its own threads; registration and election
make their (blocking) calls there. Everything the event loop does with ZooKeeper goes through
kazoo's asynchronous calls (:mod:`.client`).
"""

from __future__ import annotations

import asyncio
import logging

from kazoo.exceptions import NoNodeError

from kbroker.metadata.image import MetadataImage, PartitionState
from kbroker.metadata.zk import client as zk_client
from kbroker.metadata.zk import znodes as zn
from kbroker.metadata.zk.duties import ControllerDuties
from kbroker.metadata.zk.election import ControllerElection
from kbroker.metadata.zk.notifications import NotificationPurger
from kbroker.metadata.zk.registration import BrokerRegistration
from kbroker.metadata.zk.store import ZkMetadataStore
from kbroker.metadata.zk.sync import ZkSync

log = logging.getLogger("kbroker.cluster")

# The most a stop waits for the ZooKeeper client to close (seconds).
CLOSE_TIMEOUT_S = 5
# Notifications are purged at most this often (seconds).
PURGE_INTERVAL_S = 2.0


class ZkUnavailable(RuntimeError):
    pass


class ZkCluster:
    def __init__(self, config, node_id: int, client, store: ZkMetadataStore, sync: ZkSync,
                 image: MetadataImage):
        self.config = config
        self.node_id = node_id
        self.client = client
        self.store = store
        self.sync = sync
        self.image = image  # the first image, read at open
        self.controller = None
        self.registration: BrokerRegistration | None = None
        self.election: ControllerElection | None = None
        self.duties: ControllerDuties | None = None
        self._purger = NotificationPurger(client)
        self._purging: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = False

    @classmethod
    async def open(cls, config, node_id: int) -> "ZkCluster":
        connect = config.get("zookeeper.connect")
        try:
            client = await asyncio.to_thread(zk_client.connect, connect,
                                             config.get("zookeeper.session.timeout.ms"),
                                             config.zookeeper_connection_timeout_ms)
        except Exception as exc:
            raise ZkUnavailable(f"cannot reach ZooKeeper at {connect} "
                                f"({type(exc).__name__}: {exc})") from None
        try:
            store = await ZkMetadataStore.open(client, node_id, config.get("cluster.id"))
            sync = ZkSync(client, store)
            image = await sync.load()
        except (*zk_client.ZK_ERRORS, TimeoutError) as exc:
            await asyncio.to_thread(_close, client)
            raise ZkUnavailable(f"ZooKeeper at {connect} did not answer the first read "
                                f"({type(exc).__name__}: {exc})") from None
        except BaseException:
            await asyncio.to_thread(_close, client)
            raise
        return cls(config, node_id, client, store, sync, image)

    # --- start -------------------------------------------------------------------------------

    async def start(self, controller, endpoints: list[zn.Endpoint], rack: str | None) -> None:
        self._loop = asyncio.get_running_loop()
        self.controller = controller
        self.registration = BrokerRegistration(self.client, self.node_id, endpoints, rack)
        await asyncio.to_thread(self.registration.register)
        self.duties = ControllerDuties(controller, self.store, self.client, self.config)
        controller.subscribe(self.duties)
        self.election = ControllerElection(self.client, self.node_id, self.store,
                                           on_change=lambda _: self._election_changed())
        await asyncio.to_thread(self.election.start)
        await self.sync.start(controller)
        await self.duties.start()
        self._purging = asyncio.create_task(self._purge_every(PURGE_INTERVAL_S),
                                            name="zk-purge")
        self._started = True

    def _election_changed(self) -> None:
        """From the election (kazoo's thread): the controller changed, or this broker won."""
        if self.sync is not None:
            self.sync.nudge("controller")
        if self.duties is not None:
            self.duties.nudge()

    def isr_writer(self, controller):
        """The replica layer's ISR writer: the controller's pipeline, bounded by the session
        timeout. A write ZooKeeper has not answered by then may still land (the next image
        says); until then the leader would otherwise hold its change pending for ever and
        never propose another."""
        timeout = self.config.get("zookeeper.session.timeout.ms") / 1000

        async def write_isr(topic: str, index: int, proposed: PartitionState) -> PartitionState:
            async with asyncio.timeout(timeout):
                return await controller.change_isr(topic, index, proposed)

        return write_isr

    async def _purge_every(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await self._purger.purge()
            except asyncio.CancelledError:
                raise
            except (*zk_client.ZK_ERRORS, TimeoutError) as exc:
                log.info("purging change notifications failed (%s); next round retries",
                         type(exc).__name__)
            except Exception:
                log.exception("purging change notifications failed")

    # --- stop --------------------------------------------------------------------------------

    async def stop(self) -> None:
        if self._started and self.config.get("controlled.shutdown.enable"):
            try:
                await self._controlled_shutdown()
            except Exception:
                log.exception("controlled shutdown failed; stopping anyway")
        if self._purging is not None:
            self._purging.cancel()
            await asyncio.gather(self._purging, return_exceptions=True)
        if self.duties is not None:
            await self.duties.stop()
        await self.sync.stop()
        if self.election is not None:
            self.election.stop()
        if self.registration is not None:
            self.registration.close()
        try:  # kazoo's stop waits for its connection thread; never let that hold the shutdown
            async with asyncio.timeout(CLOSE_TIMEOUT_S):
                await asyncio.to_thread(_close, self.client)
        except TimeoutError:
            log.warning("closing the ZooKeeper session took over %d s; leaving it to expire",
                        CLOSE_TIMEOUT_S)

    async def _controlled_shutdown(self) -> None:
        if not self._leads_movable():
            return
        log.info("controlled shutdown: broker %d deregisters so leadership moves away",
                 self.node_id)
        self.registration.close()
        try:
            await zk_client.aio(self.client.delete_async(self.registration.path))
        except NoNodeError:
            pass
        self.sync.nudge("brokers")
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


def _close(client) -> None:
    try:
        client.stop()  # closes the session: the ephemeral znodes go now
    finally:
        client.close()
