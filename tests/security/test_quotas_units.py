"""Quota resolution (Kafka's 8 levels and who shares a rate) and Kafka's Rate / throttle-time
arithmetic, without a broker."""

from __future__ import annotations

from types import SimpleNamespace

from kbroker.metadata.image import MetadataImage
from kbroker.security.quotas import resolve
from kbroker.server.quotas import PRODUCE, REQUEST, ClientQuotas, Rate

U, C = "user", "client-id"
LEVELS = [
    (((C, "app"), (U, "alice")), ("alice", "app")),
    (((C, None), (U, "alice")), ("alice", "app")),
    (((U, "alice"),), ("alice", "")),
    (((C, "app"), (U, None)), ("alice", "app")),
    (((C, None), (U, None)), ("alice", "app")),
    (((U, None),), ("alice", "")),
    (((C, "app"),), ("", "app")),
    (((C, None),), ("", "app")),
]


def test_each_level_wins_over_the_ones_below_it():
    for i, (entity, tags) in enumerate(LEVELS):
        quotas = {e: {"producer_byte_rate": float(j)} for j, (e, _) in enumerate(LEVELS) if j >= i}
        assert resolve(quotas, "producer_byte_rate", "alice", "app") == (float(i), tags)


def test_resolution_is_per_quota_key_and_other_clients_fall_through():
    quotas = {((U, "alice"),): {"consumer_byte_rate": 5.0},
              ((C, None),): {"producer_byte_rate": 7.0}}
    # alice has no producer quota of her own: the default client-id applies, per client id.
    assert resolve(quotas, "producer_byte_rate", "alice", "app") == (7.0, ("", "app"))
    assert resolve(quotas, "consumer_byte_rate", "alice", "app") == (5.0, ("alice", ""))
    assert resolve(quotas, "consumer_byte_rate", "bob", "app") == (None, ("", "app"))
    assert resolve({}, "producer_byte_rate", "bob", "x")[0] is None


def test_rate_is_measured_over_at_least_num_minus_one_windows():
    rate = Rate()
    for t in range(0, 20_000, 500):  # 100 bytes every 500 ms, for 20 s: 200 B/s
        rate.record(100, t, 11, 1000)
    measured, window = rate.measure(20_000, 11, 1000)
    assert 180 <= measured <= 220 and window >= 10_000

    rate = Rate()
    rate.record(1000, 0, 11, 1000)
    # 1000 bytes at t=0 over the minimum of 10 windows: 100 bytes/s.
    assert rate.measure(0, 11, 1000) == (100.0, 10000)
    rate.record(1000, 15000, 11, 1000)
    # The first sample (started at 0) expired after 11 windows: only the second counts.
    measured, window = rate.measure(15000, 11, 1000)
    assert measured == 100.0 and window == 10000


class _Config:
    def __init__(self, **values):
        self.values = {"quota.window.num": 11, "quota.window.size.seconds": 1, **values}

    def get(self, name):
        return self.values[name]


def _manager(quotas):
    image = MetadataImage.build("c", client_quotas=quotas)
    return ClientQuotas(_Config(), lambda: image)


def test_throttle_time_is_kafkas_formula():
    manager = _manager({((U, "alice"),): {"producer_byte_rate": 100.0}})
    # 2000 bytes at once: rate 200/s over a 10 s window, bound 100: (200-100)/100 * 10 s.
    assert manager.record(PRODUCE, "User:alice", "app", 2000, now_ms=0) == 10000
    # Under the bound: nothing.
    assert manager.record(PRODUCE, "User:bob", "app", 10**9, now_ms=0) == 0


def test_request_quota_throttle_is_bounded_by_one_window():
    manager = _manager({((C, "app"),): {"request_percentage": 1.0}})
    assert manager.record(REQUEST, "User:x", "app", 10_000.0, now_ms=0) == 1000


def test_a_consumer_fetch_is_bounded_by_its_window_bytes():
    manager = _manager({((C, None),): {"consumer_byte_rate": 1000.0}})
    request = SimpleNamespace(max_bytes=50_000_000, replica_id=-1)
    ctx = SimpleNamespace(api_key=1, api_version=12, principal="User:ANONYMOUS", client_id="c")
    manager.before(ctx, request)
    assert request.max_bytes == 10_000  # 1000 B/s x (11 - 1) windows of 1 s


def test_max_connection_creation_rate_makes_the_acceptor_wait():
    from kbroker.server.limits import ConnectionLimits

    config = _Config(**{"max.connection.creation.rate": 2, "quota.window.num": 3})
    limits = ConnectionLimits(config)
    delays = [limits.creation_delay_ms() for _ in range(10)]
    # Up to 2/s x 2 windows go at once; each one after waits, never more than one window.
    assert delays[:4] == [0] * 4 and all(0 < d <= 1000 for d in delays[5:]), delays
    unlimited = ConnectionLimits(_Config(**{"max.connection.creation.rate": 2**31 - 1}))
    assert all(unlimited.creation_delay_ms() == 0 for _ in range(100))


def test_ip_connection_creation_rate_default_entity_applies_to_every_address():
    config = _Config()
    from kbroker.server.limits import ConnectionLimits

    limits = ConnectionLimits(config)
    image = MetadataImage.build("c", client_quotas={(("ip", None),): {
        "connection_creation_rate": 1.0}, (("ip", "10.0.0.9"),): {"connection_creation_rate": 1000.0}})
    limits.image = lambda: image
    throttled = [limits.ip_throttle_ms("10.0.0.1") for _ in range(20)]
    assert throttled[0] == 0 and max(throttled) > 0
    assert all(limits.ip_throttle_ms("10.0.0.9") == 0 for _ in range(20))
    # A host name applies to the address it resolves to, as Kafka's InetAddress does.
    image = MetadataImage.build("c", client_quotas={(("ip", "localhost"),): {
        "connection_creation_rate": 1.0}})
    assert max(limits.ip_throttle_ms("127.0.0.1") for _ in range(20)) > 0
    assert all(limits.ip_throttle_ms("10.0.0.2") == 0 for _ in range(20))
