"""Connection and request limits, enforced as Kafka's SocketServer and ConnectionQuotas do.

- ``max.connections``: when the broker holds this many connections the acceptor stops accepting
  until one closes (Kafka's ``waitForConnectionSlot``); new clients wait in the listen backlog.
- ``max.connections.per.ip`` (+ ``max.connections.per.ip.overrides``): a connection over its
  address's limit is accepted and closed at once with one INFO line (Kafka's
  ``TooManyConnectionsException`` in the Acceptor).
- ``max.connection.creation.rate`` (KIP-612): new connections per second, broker-wide, measured
  as Kafka's client quotas are (``quota.window.num`` windows of ``quota.window.size.seconds``);
  over it the acceptor waits (at most one window) before setting up the next connection, as
  Kafka's acceptor does in ``waitForConnectionSlot``.
- the ``connection_creation_rate`` quota of ``ip`` entities (``/config/ips/<ip>`` or
  ``<default>``, set with AlterClientQuotas): a connection over its address's rate is not
  counted, kept open (unread) for the throttle time and then closed, with one INFO line (Kafka's
  ``ConnectionThrottledException``).
- ``connections.max.idle.ms``: a connection with no reads or writes for this long, and no request
  in flight, is closed (Kafka's Selector idle expiry).
- ``queued.max.requests`` / ``queued.max.request.bytes``: requests (and their bytes) read but not
  yet answered, across all connections. Over either bound, connections with requests of their own
  in flight stop reading until answers go out, as Kafka's network threads block on a full request
  queue / memory pool. (Kafka's queue holds only requests no handler thread has picked up yet; ours
  also counts parked ones, long-poll fetches included, which is why a connection with nothing in
  flight keeps being read: it may be the producer those fetches wait for.)

The limits are read from the config on each use: the ``max.connections*`` keys are dynamic.
One instance per broker; everything runs on the event loop, so there are no locks.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import socket
import time

from kbroker.config.types import INT_MAX
from kbroker.security.quotas import CONNECTION_CREATION_RATE
from kbroker.server.quotas import Rate

log = logging.getLogger("kbroker.connection")


class ConnectionLimits:
    def __init__(self, config):
        self.config = config
        self.connections: set = set()
        self.per_ip: collections.Counter = collections.Counter()
        self.queued_requests = 0
        self.queued_bytes = 0
        self._queue_paused: set = set()  # connections paused because the broker-wide queue is full
        self._slot_freed: asyncio.Future | None = None
        self._reaper: asyncio.TimerHandle | None = None
        self._overrides_text: str | None = None
        self._overrides: dict[str, int] = {}
        # Connection creation rates (KIP-612): broker-wide, and per address with an ip quota.
        self.image = None  # () -> MetadataImage, set by the broker once the controller exists
        self._creation_rate = Rate()
        self._ip_rates: dict[str, Rate] = {}
        self._ip_limits_of = None
        self._ip_limits_cache: dict = {}

    # --- accepting -----------------------------------------------------------------------------

    @property
    def max_connections(self) -> int:
        return self.config.get("max.connections")

    async def wait_for_slot(self) -> None:
        """Return once the broker holds fewer than ``max.connections`` connections."""
        warned = False
        while len(self.connections) >= self.max_connections:
            if not warned:
                log.warning("max.connections=%d reached: not accepting connections until one "
                            "closes", self.max_connections)
                warned = True
            self._slot_freed = asyncio.get_running_loop().create_future()
            await self._slot_freed

    def _window(self) -> tuple[int, int]:
        return (self.config.get("quota.window.num"),
                self.config.get("quota.window.size.seconds") * 1000)

    def creation_delay_ms(self) -> int:
        """Count a new connection on the broker-wide rate; how long the acceptor waits before
        setting it up (0 within max.connection.creation.rate)."""
        limit = self.config.get("max.connection.creation.rate")
        if limit >= INT_MAX:
            return 0
        delay_ms = self._record(self._creation_rate, limit)
        if delay_ms > 0:
            log.debug("max.connection.creation.rate=%d reached: accepting again in %d ms",
                      limit, delay_ms)
        return delay_ms

    def ip_throttle_ms(self, ip: str) -> int:
        """0 if a connection from ``ip`` is within its connection_creation_rate quota, else how
        long to hold it before closing it (it is then not counted, as in Kafka)."""
        quotas = self.image().client_quotas if self.image is not None else None
        if not quotas:
            return 0
        limits = self._ip_limits(quotas)
        limit = limits.get(ip, limits.get(None))
        if limit is None:
            return 0
        rate = self._ip_rates.get(ip)
        if rate is None:
            if len(self._ip_rates) > 10_000:  # addresses that churn: forget all but this one
                self._ip_rates.clear()
            rate = self._ip_rates[ip] = Rate()
        delay_ms = self._record(rate, limit)
        if delay_ms > 0:
            samples, window_ms = self._window()
            rate.record(-1, _now_ms(), samples, window_ms)
            log.info("Connection from %s throttled for %d ms: over its connection_creation_rate "
                     "quota of %s per second; closing it then", ip, delay_ms, limit)
        return delay_ms

    def _ip_limits(self, quotas) -> dict:
        """address (None: the default) -> connection_creation_rate, for this image's quotas.
        As in Kafka, an ip entity may name a host: it applies to the address it resolves to
        (resolved once per quota change)."""
        if self._ip_limits_of is quotas:
            return self._ip_limits_cache
        limits = {}
        for entity, values in quotas.items():
            if len(entity) != 1 or entity[0][0] != "ip" or CONNECTION_CREATION_RATE not in values:
                continue
            name = entity[0][1]
            address = name
            if name is not None:
                import ipaddress  # with the first ip quota, not at every start

                try:
                    address = str(ipaddress.ip_address(name))
                except ValueError:
                    try:
                        address = socket.gethostbyname(name)
                    except OSError:
                        log.warning("ip quota entity %s does not resolve; it applies to no "
                                    "connection", name)
                        continue
            limits[address] = values[CONNECTION_CREATION_RATE]
        self._ip_limits_of, self._ip_limits_cache = quotas, limits
        return limits

    def _record(self, rate: "Rate", limit: float) -> int:
        """Kafka's boundedThrottleTime for one more connection on ``rate``."""
        samples, window_ms = self._window()
        now = _now_ms()
        rate.record(1, now, samples, window_ms)
        measured, window = rate.measure(now, samples, window_ms)
        if measured <= limit:
            return 0
        if limit <= 0:
            return window_ms
        return int(min(round((measured - limit) / limit * window), window_ms))

    def ip_limit(self, ip: str) -> int:
        return self._ip_overrides().get(ip, self.config.get("max.connections.per.ip"))

    def admits(self, ip: str) -> bool:
        limit = self.ip_limit(ip)
        if self.per_ip[ip] >= limit:
            log.info("Rejected connection from %s, address already has the configured maximum "
                     "of %d connections (max.connections.per.ip)", ip, limit)
            return False
        return True

    def _ip_overrides(self) -> dict[str, int]:
        text = self.config.get("max.connections.per.ip.overrides") or ""
        if text != self._overrides_text:
            overrides = {}
            for item in filter(None, (part.strip() for part in text.split(","))):
                host, _, count = item.rpartition(":")
                try:
                    address = socket.gethostbyname(host.strip("[]"))
                except OSError:
                    address = host  # unresolvable now: keep the literal, as given
                overrides[address] = int(count)
            self._overrides_text, self._overrides = text, overrides
        return self._overrides

    # --- open connections ----------------------------------------------------------------------

    def opened(self, connection) -> None:
        self.connections.add(connection)
        self.per_ip[connection.ip] += 1
        if self._reaper is None:
            self._schedule_reaper()

    def closed(self, connection) -> None:
        if connection not in self.connections:
            return
        self.connections.discard(connection)
        self.per_ip[connection.ip] -= 1
        if self.per_ip[connection.ip] <= 0:
            del self.per_ip[connection.ip]
        self._queue_paused.discard(connection)
        if self._slot_freed is not None and not self._slot_freed.done():
            self._slot_freed.set_result(None)

    # --- queued requests -----------------------------------------------------------------------

    def queue_full(self) -> bool:
        max_bytes = self.config.get("queued.max.request.bytes")
        return self.queued_requests >= self.config.get("queued.max.requests") or \
            (max_bytes >= 0 and self.queued_bytes >= max_bytes)

    def request_queued(self, size: int) -> None:
        self.queued_requests += 1
        self.queued_bytes += size

    def request_done(self, size: int) -> None:
        self.queued_requests -= 1
        self.queued_bytes -= size
        if self._queue_paused and not self.queue_full():
            paused, self._queue_paused = self._queue_paused, set()
            for connection in paused:
                connection.update_reading()

    def wait_for_queue(self, connection) -> None:
        self._queue_paused.add(connection)

    # --- idle connections ----------------------------------------------------------------------

    def _schedule_reaper(self) -> None:
        idle_ms = self.config.get("connections.max.idle.ms")
        if idle_ms < 0 or idle_ms >= 2**31:
            return
        # Checking ten times per idle period bounds the overshoot to 10%.
        interval = min(max(idle_ms / 10_000, 0.01), 30.0)
        self._reaper = asyncio.get_running_loop().call_later(interval, self._reap)

    def _reap(self) -> None:
        self._reaper = None
        if not self.connections:
            return
        idle_s = self.config.get("connections.max.idle.ms") / 1000
        now = asyncio.get_running_loop().time()
        for connection in list(self.connections):
            if now - connection.last_active > idle_s and connection.idle():
                log.debug("closing connection from %s: idle for more than %d ms "
                          "(connections.max.idle.ms)", connection.peer, idle_s * 1000)
                connection.close()
        self._schedule_reaper()

    def stop(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None


def _now_ms() -> int:
    return int(time.time() * 1000)
