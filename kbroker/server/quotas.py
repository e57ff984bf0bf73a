"""Client quota enforcement, as Kafka's ClientQuotaManager / ClientRequestQuotaManager do it.

Three quota types, each keyed by the quota entity that applies to the request's (user,
client id) (:func:`kbroker.security.quotas.resolve`, Kafka's 8 levels):

- **produce** (``producer_byte_rate``): the request's size in bytes, recorded on every Produce;
- **fetch** (``consumer_byte_rate``): the response's size, recorded on consumer Fetches
  (followers are exempt: replication has its own quotas in Kafka). A consumer's fetch is also
  bounded to what the quota allows in a window (``max_bytes`` capped at
  bound x (``quota.window.num`` - 1) x ``quota.window.size.seconds``, as KafkaApis does);
- **request** (``request_percentage``): the time the event loop spent handling the request, as a
  percentage of one second (Kafka: handler-thread time; a long-poll's wait does not count).
  Every API counts except the SASL ones and inter-broker cluster actions.

Each rate is Kafka's ``Rate`` over ``quota.window.num`` samples of
``quota.window.size.seconds``: the sum of the live samples over the elapsed time, the elapsed
time being at least ``num - 1`` full windows. When a recording takes the rate over the bound,
the throttle time is Kafka's ``(rate - bound) / bound x window`` (the request quota's is bounded
by one window, ``QuotaUtils.boundedThrottleTime``; the byte rates' is not).

What a throttled client sees (KIP-219): the response carries ``throttle_time_ms`` (the largest
of its quota types) and, once it is sent, the connection is not read for that long, so a client
that ignores the hint still cannot send more. A request version older than KIP-219 gets its
response delayed by the throttle time instead (what Kafka did before 2.0). A throttled Fetch
answers with no data, and its bytes are not counted (Kafka "unrecords" them), since none went.

The manager is idle, one dict lookup per request, while no quota is set (the image has none).
Rates of entities that have not recorded for an hour are dropped (Kafka's inactive sensor
expiry).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time

from kbroker.security.quotas import (CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE,
                                     resolve, user_of)

log = logging.getLogger("kbroker.quotas")

PRODUCE, FETCH, REQUEST = "Produce", "Fetch", "Request"
_KEY_OF = {PRODUCE: PRODUCER_BYTE_RATE, FETCH: CONSUMER_BYTE_RATE, REQUEST: REQUEST_PERCENTAGE}
PRODUCE_KEY, FETCH_KEY = 0, 1
# APIs never throttled: SASL (before a principal exists) and inter-broker cluster actions:
# SaslHandshake, SaslAuthenticate, LeaderAndIsr, StopReplica, UpdateMetadata,
# ControlledShutdown, WriteTxnMarkers.
_EXEMPT = frozenset({17, 36, 4, 5, 6, 7, 27})
# The first version of each API whose client throttles itself (KIP-219, the responses'
# shouldClientThrottle); APIs newer than KIP-219 (not listed) always do.
_KIP219 = {0: 6, 1: 8, 2: 3, 3: 6, 8: 4, 9: 4, 10: 2, 11: 3, 12: 2, 13: 2, 14: 2, 15: 2, 16: 2,
           18: 2, 19: 3, 20: 2, 21: 1, 22: 1, 23: 2, 24: 1, 25: 1, 26: 1, 28: 1, 29: 1, 30: 1,
           31: 1, 32: 2, 33: 1, 34: 1, 35: 1, 37: 1, 38: 1, 39: 1, 40: 1, 41: 1, 42: 1}
_NANOS_TO_PERCENT = 100.0 / 1e9
_INACTIVE_S = 3600.0


class Rate:
    """Kafka's ``Rate`` over a ``SampledStat``: ``samples`` windows of ``window_ms`` each."""

    __slots__ = ("starts", "values", "current", "last_used")

    def __init__(self):
        self.starts: list[int] = []
        self.values: list[float] = []
        self.current = 0
        self.last_used = 0.0

    def record(self, value: float, now_ms: int, samples: int, window_ms: int) -> None:
        if not self.starts:
            self.starts.append(now_ms)
            self.values.append(0.0)
            self.current = 0
        elif now_ms - self.starts[self.current] >= window_ms:
            self.current = (self.current + 1) % samples
            if self.current >= len(self.starts):
                self.starts.append(now_ms)
                self.values.append(0.0)
            else:
                self.starts[self.current] = now_ms
                self.values[self.current] = 0.0
        self.values[self.current] += value

    def measure(self, now_ms: int, samples: int, window_ms: int) -> tuple[float, float]:
        """(rate per second, the window in ms it was measured over)."""
        expire = samples * window_ms
        for i, start in enumerate(self.starts):  # purgeObsoleteSamples
            if now_ms - start >= expire:
                self.starts[i] = now_ms
                self.values[i] = 0.0
        oldest = min(self.starts) if self.starts else now_ms
        elapsed = now_ms - oldest
        full = elapsed // window_ms
        if full < samples - 1:
            elapsed += (samples - 1 - full) * window_ms
        elapsed = max(elapsed, 1)
        return sum(self.values) / (elapsed / 1000.0), elapsed


class ClientQuotas:
    """One per broker. ``image`` returns the current metadata image (its ``client_quotas``)."""

    def __init__(self, config, image):
        self._config = config
        self._image = image
        self._rates: dict[tuple, Rate] = {}
        self._next_purge = 0.0
        # Throttle time handed out, per (quota type, user tag, client tag): [count, total ms],
        # for the metrics endpoint (Kafka's throttle-time sensor per user/client-id).
        self.throttle_stats: dict[tuple, list] = {}

    @property
    def active(self) -> bool:
        return bool(self._image().client_quotas)

    def _window(self) -> tuple[int, int]:
        return (self._config.get("quota.window.num"),
                self._config.get("quota.window.size.seconds") * 1000)

    def _bound(self, quota_type: str, principal: str, client_id: str | None):
        return resolve(self._image().client_quotas, _KEY_OF[quota_type], user_of(principal),
                       client_id or "")

    # --- recording ---------------------------------------------------------------------------

    def record(self, quota_type: str, principal: str, client_id: str | None, value: float,
               now_ms: int | None = None) -> int:
        """Record ``value`` on the rate of the entity that applies; the throttle time in ms
        (0 when within the quota, or no quota applies)."""
        bound, tags = self._bound(quota_type, principal, client_id)
        if bound is None:
            return 0
        now_ms = _now_ms() if now_ms is None else now_ms
        samples, window_ms = self._window()
        key = (quota_type, *tags)
        rate = self._rates.get(key)
        if rate is None:
            self._purge()
            rate = self._rates[key] = Rate()
        rate.last_used = time.monotonic()
        rate.record(value, now_ms, samples, window_ms)
        measured, window = rate.measure(now_ms, samples, window_ms)
        if measured <= bound:
            return 0
        if bound <= 0:
            throttle = samples * window_ms
        else:
            throttle = round((measured - bound) / bound * window)
        if quota_type == REQUEST:
            throttle = min(throttle, window_ms)  # Kafka bounds only the request quota's
        stats = self.throttle_stats.setdefault(key, [0, 0])
        stats[0] += 1
        stats[1] += throttle
        return int(throttle)

    def unrecord(self, quota_type: str, principal: str, client_id: str | None, value: float,
                 now_ms: int | None = None) -> None:
        """Take back a recording whose bytes were not sent (a throttled fetch)."""
        bound, tags = self._bound(quota_type, principal, client_id)
        rate = self._rates.get((quota_type, *tags))
        if bound is not None and rate is not None:
            samples, window_ms = self._window()
            rate.record(-value, _now_ms() if now_ms is None else now_ms, samples, window_ms)

    def fetch_window_bytes(self, principal: str, client_id: str | None) -> int | None:
        """The most a consumer may fetch at once: its bound over (num - 1) windows."""
        bound, _ = self._bound(FETCH, principal, client_id)
        if bound is None:
            return None
        samples, window_ms = self._window()
        return max(int(bound * (samples - 1) * window_ms / 1000), 0)

    def measured(self):
        """(quota type, user tag, client tag, current rate, average throttle ms) per rate, for
        the metrics endpoint (Kafka's byte-rate / request-time and throttle-time sensors)."""
        samples, window_ms = self._window()
        now_ms = _now_ms()
        for key, rate in list(self._rates.items()):
            count, total = self.throttle_stats.get(key, (0, 0))
            yield (*key, rate.measure(now_ms, samples, window_ms)[0],
                   total / count if count else 0.0)

    def _purge(self) -> None:
        now = time.monotonic()
        if now < self._next_purge:
            return
        self._next_purge = now + 60
        for key in [k for k, r in self._rates.items() if now - r.last_used > _INACTIVE_S]:
            del self._rates[key]

    # --- the request path (called by the dispatcher) -----------------------------------------

    def before(self, ctx, request) -> None:
        """Bound a consumer's fetch to what its quota allows in a window (KafkaApis does this
        before reading the log)."""
        if ctx.api_key == FETCH_KEY and not _is_follower(ctx, request):
            limit = self.fetch_window_bytes(ctx.principal, ctx.client_id)
            if limit is not None and limit < request.max_bytes:
                request.max_bytes = limit

    def after(self, ctx, request, result, request_size: int, handler_ns: int, connection):
        """Record the request on its quotas and apply the throttle to ``result`` (a response,
        an awaitable of one, or None); return what the dispatcher should encode and send."""
        if ctx.api_key in _EXEMPT:
            return result
        if ctx.api_key == FETCH_KEY and _is_follower(ctx, request):
            return result
        if inspect.isawaitable(result):
            return self._after_async(ctx, request, result, request_size, handler_ns, connection)
        return self._throttle(ctx, request, result, request_size, handler_ns, connection)

    async def _after_async(self, ctx, request, result, request_size, handler_ns, connection):
        response = await result
        throttled = self._throttle(ctx, request, response, request_size, handler_ns, connection)
        return await throttled if inspect.isawaitable(throttled) else throttled

    def _throttle(self, ctx, request, response, request_size, handler_ns, connection):
        principal, client_id = ctx.principal, ctx.client_id
        now_ms = _now_ms()
        bandwidth = 0
        fetched = 0
        if ctx.api_key == PRODUCE_KEY:
            bandwidth = self.record(PRODUCE, principal, client_id, request_size, now_ms)
        elif ctx.api_key == FETCH_KEY and response is not None:
            fetched = _fetch_bytes(response)
            bandwidth = self.record(FETCH, principal, client_id, fetched, now_ms)
        # acks=0 produces record no request time in Kafka (there is no response to throttle).
        requests = 0 if response is None else self.record(
            REQUEST, principal, client_id, handler_ns * _NANOS_TO_PERCENT, now_ms)
        throttle_ms = max(bandwidth, requests)
        if throttle_ms <= 0:
            return response
        log.debug("throttling %s (client id %s) for %d ms after %s v%d", principal, client_id,
                  throttle_ms, type(response).__name__ if response is not None else "Produce",
                  ctx.api_version)
        if ctx.api_key == FETCH_KEY and response is not None:
            # Kafka answers a throttled fetch with no data and takes its bytes back.
            self.unrecord(FETCH, principal, client_id, fetched, now_ms)
            response.responses = []
        kip219 = ctx.api_version >= _KIP219.get(ctx.api_key, 0)
        if response is not None and _carries_throttle(response, ctx.api_version):
            response.throttle_time_ms = throttle_ms
        if connection is not None and hasattr(connection, "throttle"):
            connection.throttle(throttle_ms / 1000)
        if response is None or kip219:
            return response
        return _delayed(response, throttle_ms / 1000)


async def _delayed(response, delay_s: float):
    """Before KIP-219 the broker, not the client, waits out the throttle."""
    await asyncio.sleep(delay_s)
    return response


def _now_ms() -> int:
    return int(time.time() * 1000)


def _is_follower(ctx, request) -> bool:
    replica_id = request.replica_state.replica_id if ctx.api_version >= 15 else request.replica_id
    return replica_id >= 0


def _fetch_bytes(response) -> int:
    total = 0
    for topic in response.responses:
        for partition in topic.partitions:
            records = partition.records
            if records:
                total += sum(len(r) for r in records) if isinstance(records, list) \
                    else len(records)
    return total


_CARRIES: dict = {}


def _carries_throttle(response, version: int) -> bool:
    """Whether this response version has a ``throttle_time_ms`` field."""
    cls = type(response)
    versions = _CARRIES.get(cls)
    if versions is None:
        versions = next((spec.versions for spec in getattr(cls, "FIELDS", ())
                         if spec.attr == "throttle_time_ms"), (1, 0))
        _CARRIES[cls] = versions
    return versions[0] <= version <= versions[1]
