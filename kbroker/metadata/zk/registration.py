"""Broker registration: the ephemeral ``/brokers/ids/N`` znode, kept across session loss.

A broker with ``zookeeper.connect`` registers itself as Kafka does (``KafkaZkClient.
registerBroker``): an ephemeral znode holding its version 5 registration JSON (endpoints,
listener -> security protocol map, rack, jmx_port, timestamp, features). It lives exactly as
long as the broker's ZooKeeper session, which is how the controller and other brokers learn that
a broker died: ``zookeeper.session.timeout.ms`` after its last heartbeat the znode is gone.

The znode already existing is fine only if our own session owns it (a retry after a lost
connection, Kafka's ``checkedEphemeralCreate``); otherwise another live broker uses this
``broker.id`` and we refuse to start, as Kafka does.

Session loss: kazoo reconnects with a *new* session after expiry; the old ephemeral znode is
gone by then, so on reconnection we register again (from kazoo's thread, spawned so the
connection thread never blocks).
"""

from __future__ import annotations

import logging
from typing import Sequence

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NodeExistsError

from kbroker.metadata.zk import znodes as zn

log = logging.getLogger("kbroker.metadata.zk")


class BrokerIdInUse(RuntimeError):
    pass


class BrokerRegistration:
    def __init__(self, client: KazooClient, broker_id: int, endpoints: Sequence[zn.Endpoint],
                 rack: str | None = None, jmx_port: int = -1):
        self._zk = client
        self.broker_id = broker_id
        self._endpoints = tuple(endpoints)
        self._rack = rack
        self._jmx_port = jmx_port
        self._session_lost = False
        self._closed = False
        self.registrations = 0  # how many times the znode was created (1 + re-registrations)

    @property
    def path(self) -> str:
        return zn.broker_path(self.broker_id)

    def register(self) -> None:
        """Create the znode, and re-create it after every session expiry until :meth:`close`."""
        self._create()
        self._zk.add_listener(self._on_state)

    def _create(self) -> None:
        data = zn.encode_broker_registration(self._endpoints, self._rack, self._jmx_port)
        try:
            self._zk.create(self.path, data, ephemeral=True, makepath=True)
        except NodeExistsError:
            _, stat = self._zk.get(self.path)
            if stat.ephemeralOwner != self._zk.client_id[0]:
                raise BrokerIdInUse(
                    f"broker.id {self.broker_id} is already registered in ZooKeeper at "
                    f"{self.path} by another live broker (session 0x{stat.ephemeralOwner:x}); "
                    "give each broker its own broker.id") from None
        self.registrations += 1
        log.info("registered broker %d at %s: %s", self.broker_id, self.path,
                 ", ".join(e.connection_string() for e in self._endpoints))

    def _on_state(self, state: str) -> None:
        if state == KazooState.LOST:
            self._session_lost = True
            log.warning("ZooKeeper session lost: broker %d is unregistered until it reconnects",
                        self.broker_id)
        elif state == KazooState.CONNECTED and self._session_lost and not self._closed:
            self._session_lost = False
            self._zk.handler.spawn(self._reregister)

    def _reregister(self) -> None:
        try:
            self._create()
        except Exception:  # logged, not raised: this runs on kazoo's thread
            log.exception("re-registering broker %d after a new ZooKeeper session failed",
                          self.broker_id)

    def close(self) -> None:
        """Stop re-registering; the znode disappears with the session (or now, if deleted)."""
        self._closed = True
        self._zk.remove_listener(self._on_state)
