"""Controller election through the ephemeral ``/controller`` znode, with the controller epoch.

Kafka's scheme (``KafkaController.elect`` and ``KafkaZkClient.
registerControllerAndIncrementControllerEpoch``): every broker watches ``/controller``; when it
is absent, each tries one ZooKeeper transaction that creates ``/controller`` (ephemeral, this
broker's id) *and* sets ``/controller_epoch`` to epoch + 1 conditionally on the version it read.
Exactly one wins; the others see NodeExists (someone else is controller) or a bad version
(someone else bumped the epoch first: read again and retry). The winner hands the new epoch and
``/controller_epoch``'s znode version to the metadata store (``ZkMetadataStore.fence``), so every
later write checks that no newer controller exists.

Losing: the ``/controller`` znode changing to another broker, or this broker's session
expiring (its ephemeral znode goes with it), makes it resign at once. Whether it is still
controller is never trusted alone: its writes are fenced by the epoch check in any case.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError
from kazoo.recipe.watchers import DataWatch

from kbroker.metadata.zk import znodes as zn

log = logging.getLogger("kbroker.metadata.zk")


class ControllerElection:
    def __init__(self, client: KazooClient, broker_id: int, store=None,
                 on_change: Callable[["ControllerElection"], None] | None = None):
        self._zk = client
        self.broker_id = broker_id
        self._store = store
        self._on_change = on_change
        self._lock = threading.Lock()  # kazoo calls us from its watcher and session threads
        self.is_controller = False
        self.epoch: int | None = None          # the epoch this broker won, while controller
        self.active_controller: int | None = None
        self._watch: DataWatch | None = None

    def start(self) -> None:
        """Compete now and whenever ``/controller`` disappears, until :meth:`stop`."""
        self._zk.add_listener(self._on_state)
        self._watch = DataWatch(self._zk, zn.CONTROLLER, self._on_controller_znode)

    def stop(self) -> None:
        self._zk.remove_listener(self._on_state)
        if self._watch is not None:
            self._watch._stopped = True  # kazoo's DataWatch stops on its next event
        self._resign()

    # --- kazoo callbacks (its threads) -----------------------------------------------------------

    def _on_state(self, state: str) -> None:
        if state == KazooState.LOST and self.is_controller:
            log.warning("ZooKeeper session lost: broker %d resigns as controller (epoch %s)",
                        self.broker_id, self.epoch)
            self._resign()

    def _on_controller_znode(self, data: bytes | None, stat) -> None:
        if data is None:
            self._zk.handler.spawn(self._try_elect)
            return
        controller = zn.decode_controller(data)
        ours = controller == self.broker_id and stat.ephemeralOwner == self._zk.client_id[0]
        if not ours and self.is_controller:
            log.warning("broker %d is controller now; broker %d resigns", controller, self.broker_id)
            self._resign()
        self._set_active(controller)

    def _try_elect(self) -> None:
        try:
            self.elect()
        except KazooException as exc:  # kazoo's DataWatch calls us again once reconnected
            log.warning("broker %d could not run for controller (%s); trying again when "
                        "ZooKeeper answers", self.broker_id, type(exc).__name__)

    # --- election --------------------------------------------------------------------------------

    def elect(self) -> bool:
        """One attempt (retried only while another broker bumps the epoch under us). True if
        this broker is controller afterwards."""
        with self._lock:
            while True:
                epoch, version = self._read_epoch()
                txn = self._zk.transaction()
                txn.create(zn.CONTROLLER, zn.encode_controller(self.broker_id), ephemeral=True)
                txn.set_data(zn.CONTROLLER_EPOCH, zn.encode_controller_epoch(epoch + 1), version)
                created, bumped = txn.commit()
                if isinstance(created, NodeExistsError):
                    return self._existing_controller()
                if isinstance(bumped, (BadVersionError, NoNodeError)):
                    continue  # another broker moved the epoch between our read and write
                if isinstance(created, Exception) or isinstance(bumped, Exception):
                    raise created if isinstance(created, Exception) else bumped
                self.is_controller = True
                self.epoch = epoch + 1
                if self._store is not None:
                    self._store.fence(self.epoch, bumped.version)
                log.info("broker %d is the controller (epoch %d)", self.broker_id, self.epoch)
                self._set_active(self.broker_id)
                return True

    def _read_epoch(self) -> tuple[int, int]:
        """``/controller_epoch`` and its version; created at 0 on a fresh cluster, like Kafka."""
        try:
            data, stat = self._zk.get(zn.CONTROLLER_EPOCH)
        except NoNodeError:
            try:
                self._zk.create(zn.CONTROLLER_EPOCH, zn.encode_controller_epoch(0))
            except NodeExistsError:
                pass
            data, stat = self._zk.get(zn.CONTROLLER_EPOCH)
        return zn.decode_controller_epoch(data), stat.version

    def _existing_controller(self) -> bool:
        try:
            data, stat = self._zk.get(zn.CONTROLLER)
        except NoNodeError:
            return False  # it went away again: the watch calls us once more
        controller = zn.decode_controller(data)
        self._set_active(controller)
        return self.is_controller and controller == self.broker_id \
            and stat.ephemeralOwner == self._zk.client_id[0]

    def _resign(self) -> None:
        was_controller = self.is_controller
        self.is_controller = False
        self.epoch = None
        if was_controller and self._store is not None:
            self._store.unfence()

    def _set_active(self, controller: int | None) -> None:
        changed = controller != self.active_controller
        self.active_controller = controller
        if changed and self._on_change is not None:
            self._on_change(self)
