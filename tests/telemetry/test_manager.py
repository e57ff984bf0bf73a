"""Client telemetry (KIP-714) without a socket: subscriptions as Kafka validates and matches them,
and GetTelemetrySubscriptions / PushTelemetry answered by the manager with Kafka's errors, with
bounded memory. Payloads are real OTLP messages built with opentelemetry-proto."""

from __future__ import annotations

import uuid

import cramjam
import pytest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1 import metrics_pb2

from kbroker.protocol.errors import Errors, KafkaError
from kbroker.protocol.messages.get_telemetry_subscriptions import \
    GetTelemetrySubscriptionsRequest
from kbroker.protocol.messages.push_telemetry import PushTelemetryRequest
from kbroker.telemetry import manager as manager_module
from kbroker.telemetry.manager import ClientInfo, ClientMetricsManager
from kbroker.telemetry.subscriptions import resolve, subscription_id, validate

ZERO = uuid.UUID(int=0)


class Clock:
    def __init__(self):
        self.now = 1_000_000.0

    def __call__(self):
        return self.now


def metrics_data(values: dict, *, counter=None, node="1") -> bytes:
    """A MetricsData with one gauge per name (and one delta sum for ``counter``)."""
    data = metrics_pb2.MetricsData()
    scope = data.resource_metrics.add().scope_metrics.add()
    for name, value in values.items():
        metric = scope.metrics.add(name=name)
        point = metric.gauge.data_points.add(as_double=value, time_unix_nano=1)
        point.attributes.append(KeyValue(key="node.id", value=AnyValue(string_value=node)))
    if counter is not None:
        metric = scope.metrics.add(name="org.apache.kafka.producer.record.send.total")
        metric.sum.is_monotonic = True
        metric.sum.aggregation_temporality = metrics_pb2.AGGREGATION_TEMPORALITY_DELTA
        metric.sum.data_points.add(as_int=counter, time_unix_nano=1)
    return data.SerializeToString()


def subscribed(metrics="*", interval=1000, match=""):
    return {"all": validate("all", {"metrics": metrics, "interval.ms": str(interval),
                                    "match": match})}


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def telemetry(clock):
    m = ClientMetricsManager(max_bytes=10_000, max_series=50, max_series_per_client=20,
                             clock=clock)
    m.set_subscriptions(subscribed())
    return m


def get(m, instance=ZERO, info=None, connection=None):
    return m.get_subscriptions(GetTelemetrySubscriptionsRequest(client_instance_id=instance),
                               info or ClientInfo("app-1", "apache-kafka-java", "4.4.0",
                                                  "127.0.0.1", 5000), connection)


def push(m, answer, payload=b"", *, compression=0, terminating=False, subscription=None,
         connection=None):
    return m.push(PushTelemetryRequest(
        client_instance_id=answer.client_instance_id,
        subscription_id=answer.subscription_id if subscription is None else subscription,
        terminating=terminating, compression_type=compression, metrics=payload),
        ClientInfo("app-1"), connection)


# --- subscriptions ---------------------------------------------------------------------------

@pytest.mark.parametrize("configs, code, message", [
    ({"metric": "*"}, Errors.INVALID_REQUEST, "Unknown client metrics configuration: metric"),
    ({"interval.ms": "99"}, Errors.INVALID_REQUEST,
     "Invalid value 99 for interval.ms, interval must be between 100 and 3600000 (1 hour)"),
    ({"interval.ms": "3600001"}, Errors.INVALID_REQUEST, "interval must be between"),
    ({"interval.ms": "soon"}, Errors.INVALID_CONFIG,
     "Invalid value soon for configuration interval.ms: Not a number of type INT"),
    ({"match": "client_idx=a"}, Errors.INVALID_CONFIG,
     "Illegal client matching pattern: client_idx=a"),
    ({"match": "client_id=a=b"}, Errors.INVALID_CONFIG, "Illegal client matching pattern"),
    ({"match": "client_id="}, Errors.INVALID_CONFIG, "Illegal client matching pattern"),
    ({"match": "client_id=(["}, Errors.INVALID_CONFIG, "Illegal client matching pattern"),
    ({"metrics": "a,,b"}, Errors.INVALID_CONFIG, "Configuration 'metrics' values must not be empty."),
])
def test_invalid_subscriptions_get_kafkas_errors(configs, code, message):
    with pytest.raises(KafkaError) as caught:
        validate("s", configs)
    assert caught.value.code == code.code and message in caught.value.message


def test_an_empty_name_is_refused_and_no_configs_is_no_subscription():
    with pytest.raises(KafkaError, match="Subscription name can't be empty"):
        validate("", {"metrics": "*"})
    assert validate("s", {}) is None


def test_a_client_gets_the_union_of_what_it_matches_and_the_shortest_interval():
    subs = [validate("a", {"metrics": "org.apache.kafka.producer.", "interval.ms": "5000",
                           "match": "client_id=app-.*,client_software_name=apache-kafka-java"}),
            validate("b", {"metrics": "org.apache.kafka.consumer.", "interval.ms": "2000",
                           "match": "client_id=app-1"}),
            validate("c", {"metrics": "*", "interval.ms": "100", "match": "client_id=other"})]
    attributes = ClientInfo("app-1", "apache-kafka-java", "4.4.0").attributes(uuid.uuid4())
    assert resolve(subs, attributes) == (["org.apache.kafka.consumer.",
                                          "org.apache.kafka.producer."], 2000)
    # a match is a full match, as Java's Matcher.matches
    assert resolve(subs, ClientInfo("app-12x", "java").attributes(uuid.uuid4())) == \
        ([], 300000)
    assert resolve(subs[2:], ClientInfo("other").attributes(uuid.uuid4())) == (["*"], 100)


def test_subscription_ids_differ_per_instance_and_per_subscription():
    a, b = uuid.uuid4(), uuid.uuid4()
    assert subscription_id(["*"], 1000, a) != subscription_id(["*"], 1000, b)
    assert subscription_id(["*"], 1000, a) != subscription_id(["*"], 2000, a)
    assert -2 ** 31 <= subscription_id(["*"], 1000, a) < 2 ** 31


# --- GetTelemetrySubscriptions and PushTelemetry -------------------------------------------------

def test_get_then_push_is_accepted_and_metrics_are_decoded(telemetry, clock):
    answer = get(telemetry)
    assert answer.error_code == 0 and answer.client_instance_id != ZERO
    assert answer.requested_metrics == ["*"] and answer.push_interval_ms == 1000
    assert answer.accepted_compression_types == [4, 3, 1, 2] and answer.delta_temporality
    assert answer.telemetry_max_bytes == 10_000
    payload = metrics_data({"org.apache.kafka.producer.request.latency.avg": 2.5}, counter=7)
    assert push(telemetry, answer, payload).error_code == 0
    clock.now += 1000
    payload = metrics_data({"org.apache.kafka.producer.request.latency.avg": 4.0}, counter=3)
    assert push(telemetry, answer, cramjam.zstd.compress(payload).read(),
                compression=4).error_code == 0
    series = {s.name: s for s in telemetry.store.series[answer.client_instance_id].values()}
    latency = series["org.apache.kafka.producer.request.latency.avg"]
    assert latency.value == 4.0 and list(latency.values) == [2.5, 4.0]
    assert latency.attributes == (("node.id", "1"),)
    assert series["org.apache.kafka.producer.record.send.total"].value == 10  # deltas added up


def test_requests_inside_the_push_interval_are_throttled(telemetry, clock):
    answer = get(telemetry)
    assert get(telemetry, answer.client_instance_id).error_code == \
        Errors.THROTTLING_QUOTA_EXCEEDED.code
    assert push(telemetry, answer).error_code == 0  # the first push after a get: always
    assert push(telemetry, answer).error_code == Errors.THROTTLING_QUOTA_EXCEEDED.code
    clock.now += 1000
    assert push(telemetry, answer).error_code == 0
    # the terminating push is taken even inside the interval; nothing is taken after it
    assert push(telemetry, answer, terminating=True).error_code == 0
    clock.now += 1000
    assert push(telemetry, answer).error_code == Errors.INVALID_REQUEST.code


def test_bad_pushes_get_kafkas_errors(telemetry, clock):
    answer = get(telemetry)
    assert push(telemetry, answer, subscription=answer.subscription_id + 1).error_code == \
        Errors.UNKNOWN_SUBSCRIPTION_ID.code
    # after UNKNOWN_SUBSCRIPTION_ID a client may ask again at once (pushing waits, as in Kafka:
    # that early answer does not count as a new GetTelemetrySubscriptions)
    answer = get(telemetry, answer.client_instance_id)
    assert answer.error_code == 0
    assert push(telemetry, answer).error_code == Errors.THROTTLING_QUOTA_EXCEEDED.code
    clock.now += 1000
    assert push(telemetry, answer, compression=9).error_code == \
        Errors.UNSUPPORTED_COMPRESSION_TYPE.code
    answer = get(telemetry, answer.client_instance_id)
    clock.now += 1000
    assert push(telemetry, answer, b"x" * 10_001).error_code == Errors.TELEMETRY_TOO_LARGE.code
    clock.now += 1000
    assert push(telemetry, answer, b"\xff\xff\xff not protobuf").error_code == \
        Errors.INVALID_RECORD.code
    clock.now += 1000
    assert push(telemetry, answer, b"garbage", compression=1).error_code == \
        Errors.INVALID_RECORD.code  # not gzip
    bomb = cramjam.zstd.compress(b"\0" * (17 * 10_000)).read()  # small, inflates past 16x
    clock.now += 1000
    assert len(bomb) < 10_000
    assert push(telemetry, answer, bomb, compression=4).error_code == Errors.INVALID_RECORD.code
    for instance_id in (ZERO, uuid.UUID(int=1)):
        assert telemetry.push(PushTelemetryRequest(client_instance_id=instance_id),
                              ClientInfo("x")).error_code == Errors.INVALID_REQUEST.code
    assert telemetry.instances[answer.client_instance_id].refused == {
        "UNKNOWN_SUBSCRIPTION_ID": 1, "THROTTLING_QUOTA_EXCEEDED": 1, "UNSUPPORTED_COMPRESSION_TYPE": 1,
        "TELEMETRY_TOO_LARGE": 1, "INVALID_RECORD": 3}


def test_a_changed_subscription_gives_a_new_subscription_id_at_once(telemetry):
    answer = get(telemetry)
    telemetry.set_subscriptions(subscribed(metrics="org.apache.kafka.producer.", interval=500))
    assert push(telemetry, answer).error_code == Errors.UNKNOWN_SUBSCRIPTION_ID.code
    again = get(telemetry, answer.client_instance_id)
    assert again.error_code == 0 and again.subscription_id != answer.subscription_id
    assert again.requested_metrics == ["org.apache.kafka.producer."]
    telemetry.set_subscriptions({})
    assert get(telemetry, answer.client_instance_id).requested_metrics == []


def test_series_are_bounded_per_client_and_in_all(telemetry, clock):
    many = {f"m{i}": float(i) for i in range(30)}
    first = get(telemetry)
    push(telemetry, first, metrics_data(many))
    assert len(telemetry.store.series[first.client_instance_id]) == 20
    assert telemetry.store.dropped == 10
    for _ in range(3):
        answer = get(telemetry)
        push(telemetry, answer, metrics_data(many))
    assert telemetry.store.count == 50  # max_series
    assert sum(len(s) for s in telemetry.store.series.values()) == 50


def test_instances_are_forgotten_on_disconnect_expiry_and_past_the_cache(telemetry, clock,
                                                                         monkeypatch):
    connection = object()
    answer = get(telemetry, connection=connection)
    push(telemetry, answer, metrics_data({"m": 1.0}), connection=connection)
    assert telemetry.instance_of(connection).instance_id == answer.client_instance_id
    telemetry.disconnected(connection)
    assert answer.client_instance_id not in telemetry.instances
    assert telemetry.store.count == 0
    answer = get(telemetry)
    clock.now += 61_000  # max(60 s, 3 x 1 s) without a request
    get(telemetry)
    assert answer.client_instance_id not in telemetry.instances
    monkeypatch.setattr(manager_module, "MAX_INSTANCES", 5)
    for _ in range(8):
        get(telemetry)
    assert len(telemetry.instances) == 5
