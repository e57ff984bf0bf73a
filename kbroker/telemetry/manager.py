"""The broker side of KIP-714: client instances, their subscriptions, pushes and the metrics they
carry. Kafka's ``ClientMetricsManager`` is the model; its rules, in order:

GetTelemetrySubscriptions
- a zero client instance id gets a new random one; the instance is made on first sight, and made
  again (new subscription id) when the subscriptions changed since;
- a second request within the push interval is THROTTLING_QUOTA_EXCEEDED, unless the last push
  failed with UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE;
- the answer: the instance id, subscription id, the requested metrics (``*`` for all), the push
  interval, the codecs we accept (zstd, lz4, gzip, snappy), ``telemetry.max.bytes`` and delta
  temporality.

PushTelemetry
- a zero or reserved instance id is INVALID_REQUEST;
- after a push with ``terminating`` set, every push is INVALID_REQUEST;
- a push within the interval of the previous one is THROTTLING_QUOTA_EXCEEDED (the first push
  after a GetTelemetrySubscriptions is always accepted: clients jitter the interval), unless it
  is the terminating one;
- a subscription id other than the instance's is UNKNOWN_SUBSCRIPTION_ID; an unknown codec
  UNSUPPORTED_COMPRESSION_TYPE; metrics over ``telemetry.max.bytes`` TELEMETRY_TOO_LARGE;
- metrics that cannot be decompressed or parsed are INVALID_RECORD (Kafka's answer when its
  exporter plugin fails).

Memory is bounded: at most ``MAX_INSTANCES`` instances (least recently seen dropped first, as
Kafka's 16384-entry LRU cache), an instance is forgotten when its connection closes or after
``max(60 s, 3 x interval)`` without a request, a payload decompresses to at most
``DECOMPRESSED_LIMIT x telemetry.max.bytes`` bytes, and :class:`MetricStore` keeps at most
``kbroker.telemetry.max.series`` series (``.per.client`` for one instance), each with the last
``HISTORY`` samples for the console's plot; series past the limits are counted and dropped.

One owner: the broker's event loop; no locks.
"""

from __future__ import annotations

import collections
import logging
import time
import uuid
from array import array
from dataclasses import dataclass, field

from kbroker.protocol.errors import Errors
from kbroker.telemetry import otlp
from kbroker.telemetry.subscriptions import Subscription, resolve, subscription_id

log = logging.getLogger("kbroker.telemetry")

MAX_INSTANCES = 16384
EXPIRY_MS = 60 * 1000
HISTORY = 120
DECOMPRESSED_LIMIT = 16
# zstd, lz4, gzip, snappy: Kafka's preference order
ACCEPTED_COMPRESSION = [4, 3, 1, 2]
ZERO_ID = uuid.UUID(int=0)
RESERVED_IDS = {ZERO_ID, uuid.UUID(int=1)}  # Kafka's Uuid.RESERVED: ZERO_UUID, ONE_UUID


@dataclass
class ClientInfo:
    """What identifies a client to subscriptions (KIP-714's selectors)."""

    client_id: str | None
    software_name: str | None = None
    software_version: str | None = None
    address: str | None = None
    port: int | None = None

    def attributes(self, instance_id: uuid.UUID) -> dict:
        return {"client_instance_id": str(instance_id), "client_id": self.client_id,
                "client_software_name": self.software_name,
                "client_software_version": self.software_version,
                "client_source_address": self.address,
                "client_source_port": None if self.port is None else str(self.port)}


@dataclass
class ClientInstance:
    instance_id: uuid.UUID
    info: ClientInfo
    subscription_id: int
    subscription_version: int
    metrics: list
    interval_ms: int
    connection: object = None
    last_get_ms: float = 0.0
    last_push_ms: float = 0.0
    last_seen_ms: float = 0.0
    terminating: bool = False
    last_error: int = 0
    pushes: int = 0
    refused: collections.Counter = field(default_factory=collections.Counter)

    def expired(self, now: float) -> bool:
        return now - self.last_seen_ms > max(EXPIRY_MS, 3 * self.interval_ms)


class Series:
    """One metric of one client instance: its latest value and recent samples."""

    __slots__ = ("name", "attributes", "counter", "value", "times", "values")

    def __init__(self, name: str, attributes: tuple, counter: bool):
        self.name, self.attributes, self.counter = name, attributes, counter
        self.value = 0.0
        self.times = array("d")
        self.values = array("d")

    def record(self, value: float, time_ms: float) -> None:
        self.value = value
        self.times.append(time_ms)
        self.values.append(value)
        if len(self.times) > HISTORY:
            del self.times[0]
            del self.values[0]


class MetricStore:
    """The metrics clients pushed, per instance, within the series limits."""

    def __init__(self, max_series: int, max_per_client: int):
        self.max_series = max_series
        self.max_per_client = max_per_client
        self.series: dict[uuid.UUID, dict[tuple, Series]] = {}
        self.count = 0
        self.dropped = 0  # samples of series refused by the limits, since start

    def record(self, instance_id: uuid.UUID, points, now_ms: float) -> int:
        mine = self.series.setdefault(instance_id, {})
        dropped = 0
        for p in points:
            key = (p.name, p.attributes)
            series = mine.get(key)
            if series is None:
                if len(mine) >= self.max_per_client or self.count >= self.max_series:
                    dropped += 1
                    continue
                series = mine[key] = Series(p.name, p.attributes, p.counter)
                self.count += 1
            value = series.value + p.value if p.counter and p.delta else p.value
            series.record(value, p.time_ms or now_ms)
        self.dropped += dropped
        return dropped

    def forget(self, instance_id: uuid.UUID) -> None:
        self.count -= len(self.series.pop(instance_id, {}))


class ClientMetricsManager:
    def __init__(self, max_bytes: int, max_series: int, max_series_per_client: int,
                 clock=None):
        self.max_bytes = max_bytes
        self.clock = clock or (lambda: time.time() * 1000)
        self.subscriptions: dict[str, Subscription] = {}
        self.version = 0  # grows with every subscription change
        self.instances: collections.OrderedDict[uuid.UUID, ClientInstance] = \
            collections.OrderedDict()
        self.by_connection: dict[int, uuid.UUID] = {}
        self.store = MetricStore(max_series, max_series_per_client)
        self._warned_undecodable = False

    # --- subscriptions (from the CLIENT_METRICS config resources) --------------------------------

    def set_subscriptions(self, subscriptions: dict[str, Subscription]) -> None:
        if subscriptions != self.subscriptions:
            self.subscriptions = dict(subscriptions)
            self.version += 1
            log.info("client metrics subscriptions are now %s", sorted(subscriptions))

    # --- the two APIs -----------------------------------------------------------------------------

    def get_subscriptions(self, request, info: ClientInfo, connection=None):
        """The GetTelemetrySubscriptions response for ``request``."""
        from kbroker.protocol.messages.get_telemetry_subscriptions import \
            GetTelemetrySubscriptionsResponse as R

        now = self.clock()
        instance_id = request.client_instance_id
        if instance_id is None or instance_id == ZERO_ID:
            instance_id = self._new_id()
        instance = self._instance(instance_id, info, connection, now)
        if now - max(instance.last_get_ms, instance.last_push_ms) >= instance.interval_ms:
            instance.last_get_ms = now
        elif instance.last_error not in (Errors.UNKNOWN_SUBSCRIPTION_ID.code,
                                         Errors.UNSUPPORTED_COMPRESSION_TYPE.code):
            return R(error_code=Errors.THROTTLING_QUOTA_EXCEEDED.code)
        instance.last_error = 0
        return R(error_code=0, client_instance_id=instance_id,
                 subscription_id=instance.subscription_id,
                 accepted_compression_types=list(ACCEPTED_COMPRESSION),
                 push_interval_ms=instance.interval_ms, telemetry_max_bytes=self.max_bytes,
                 delta_temporality=True, requested_metrics=list(instance.metrics))

    def push(self, request, info: ClientInfo, connection=None):
        """The PushTelemetry response for ``request``; accepted metrics go to the store."""
        from kbroker.protocol.messages.push_telemetry import PushTelemetryResponse as R

        instance_id = request.client_instance_id
        if instance_id is None or instance_id in RESERVED_IDS:
            return R(error_code=Errors.INVALID_REQUEST.code)
        now = self.clock()
        instance = self._instance(instance_id, info, connection, now)
        error = self._check_push(request, instance, now)
        instance.terminating = instance.terminating or request.terminating
        if error is not None:
            instance.last_error = error.code
            instance.refused[error.name] += 1
            return R(error_code=error.code)
        metrics = request.metrics
        if metrics is not None and len(metrics) > 0:
            try:
                points = self._decode(metrics, request.compression_type)
            except otlp.PayloadError as exc:
                log.info("push from client instance %s refused: %s", instance_id, exc)
                instance.last_error = Errors.INVALID_RECORD.code
                instance.refused[Errors.INVALID_RECORD.name] += 1
                return R(error_code=Errors.INVALID_RECORD.code)
            self.store.record(instance_id, points, now)
        instance.pushes += 1
        instance.last_error = 0
        return R(error_code=0)

    def _check_push(self, request, instance: ClientInstance, now: float):
        if instance.terminating:
            return Errors.INVALID_REQUEST
        accept = instance.last_get_ms > instance.last_push_ms or \
            now - instance.last_push_ms >= instance.interval_ms
        if accept:
            instance.last_push_ms = now
        elif not request.terminating:
            return Errors.THROTTLING_QUOTA_EXCEEDED
        if request.subscription_id != instance.subscription_id:
            return Errors.UNKNOWN_SUBSCRIPTION_ID
        if request.compression_type not in (0, 1, 2, 3, 4):
            return Errors.UNSUPPORTED_COMPRESSION_TYPE
        if request.metrics is not None and len(request.metrics) > self.max_bytes:
            return Errors.TELEMETRY_TOO_LARGE
        return None

    def _decode(self, metrics, compression_type: int) -> list:
        if not otlp.available():
            if not self._warned_undecodable:
                log.warning("client metrics are accepted but not decoded: install kbroker's "
                            "telemetry extra (opentelemetry-proto)")
                self._warned_undecodable = True
            return []
        return otlp.decode(metrics, compression_type, DECOMPRESSED_LIMIT * self.max_bytes)

    # --- instances -----------------------------------------------------------------------------

    def _new_id(self) -> uuid.UUID:
        while True:
            candidate = uuid.uuid4()
            if candidate not in self.instances and candidate not in RESERVED_IDS:
                return candidate

    def _instance(self, instance_id: uuid.UUID, info: ClientInfo, connection,
                  now: float) -> ClientInstance:
        self._expire(now)
        instance = self.instances.get(instance_id)
        if instance is None or instance.subscription_version < self.version:
            instance = self._make(instance_id, instance.info if instance else info, instance)
        self.instances.move_to_end(instance_id)
        instance.last_seen_ms = now
        if connection is not None and instance.connection != id(connection):
            self.by_connection.pop(instance.connection, None)
            instance.connection = id(connection)
            self.by_connection[id(connection)] = instance_id
        while len(self.instances) > MAX_INSTANCES:
            oldest, dropped = self.instances.popitem(last=False)
            self._forget(oldest, dropped)
        return instance

    def _make(self, instance_id, info: ClientInfo, old: ClientInstance | None) -> ClientInstance:
        metrics, interval = resolve(self.subscriptions.values(), info.attributes(instance_id))
        instance = ClientInstance(instance_id, info,
                                  subscription_id(metrics, interval, instance_id), self.version,
                                  metrics, interval)
        if old is not None:  # same client, new subscription: its history of requests stays
            instance.connection = old.connection
            instance.last_get_ms, instance.last_push_ms = old.last_get_ms, old.last_push_ms
            instance.terminating, instance.last_error = old.terminating, old.last_error
            instance.pushes, instance.refused = old.pushes, old.refused
        self.instances[instance_id] = instance
        return instance

    def _expire(self, now: float) -> None:
        for instance_id, instance in list(self.instances.items()):
            if not instance.expired(now):
                break  # in least recently seen order
            del self.instances[instance_id]
            self._forget(instance_id, instance)

    def _forget(self, instance_id: uuid.UUID, instance: ClientInstance | None = None) -> None:
        self.store.forget(instance_id)
        if instance is not None and self.by_connection.get(instance.connection) == instance_id:
            del self.by_connection[instance.connection]

    def disconnected(self, connection) -> None:
        """The client's connection closed: forget its instance (Kafka does the same)."""
        instance_id = self.by_connection.pop(id(connection), None)
        if instance_id is not None:
            instance = self.instances.pop(instance_id, None)
            if instance is not None:
                self.store.forget(instance_id)

    def instance_of(self, connection) -> ClientInstance | None:
        instance_id = self.by_connection.get(id(connection))
        return None if instance_id is None else self.instances.get(instance_id)

