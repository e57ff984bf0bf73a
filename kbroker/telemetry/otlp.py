"""A PushTelemetry payload: OpenTelemetry's ``MetricsData`` protobuf (KIP-714), decompressed with
the codecs of record batches and parsed by the maintained ``opentelemetry-proto`` package (the
``telemetry`` extra), never by hand.

:func:`decode` returns plain points; gauges and sums carry numbers, histograms their count and
sum. Each point has the metric's name, its point attributes merged over the resource's (Kafka
clients name themselves there), whether it is a monotonic sum and whether that sum is a delta
(KIP-714 asks for delta temporality, which Java and librdkafka honour).
"""

from __future__ import annotations

from dataclasses import dataclass

from kbroker.protocol import compression

DELTA = 1  # AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA


class PayloadError(Exception):
    """The payload cannot be decompressed or is not a MetricsData message."""


@dataclass(frozen=True, slots=True)
class Point:
    name: str
    attributes: tuple  # ((key, value), ...) sorted
    value: float
    time_ms: float
    counter: bool  # a monotonic sum
    delta: bool  # a sum whose value is the change since the previous push


def available() -> bool:
    try:
        import opentelemetry.proto.metrics.v1.metrics_pb2  # noqa: F401
    except ImportError:
        return False
    return True


def decode(payload, compression_type: int, max_size: int) -> list[Point]:
    try:
        raw = compression.decompress(compression_type, payload, max_size)
    except compression.CompressionError as exc:
        raise PayloadError(f"cannot decompress the metrics: {exc}") from None
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

    try:
        data = MetricsData.FromString(raw)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise PayloadError(f"the metrics are not an OTLP MetricsData message: {exc}") from None
    points = []
    for resource_metrics in data.resource_metrics:
        resource = _attributes(resource_metrics.resource.attributes)
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                points.extend(_points(metric, resource))
    return points


def _points(metric, resource: dict):
    kind = metric.WhichOneof("data")
    if kind == "gauge":
        for p in metric.gauge.data_points:
            yield _number(metric.name, p, resource, counter=False, delta=False)
    elif kind == "sum":
        delta = metric.sum.aggregation_temporality == DELTA
        for p in metric.sum.data_points:
            yield _number(metric.name, p, resource, counter=metric.sum.is_monotonic, delta=delta)
    elif kind in ("histogram", "exponential_histogram", "summary"):
        delta = getattr(getattr(metric, kind), "aggregation_temporality", 0) == DELTA
        for p in getattr(metric, kind).data_points:
            attributes = _merged(resource, p.attributes)
            for suffix, value in (("count", p.count), ("sum", p.sum)):
                yield Point(f"{metric.name}.{suffix}", attributes, float(value),
                            p.time_unix_nano / 1e6, True, delta)


def _number(name, p, resource, counter, delta) -> Point:
    value = p.as_double if p.WhichOneof("value") == "as_double" else p.as_int
    return Point(name, _merged(resource, p.attributes), float(value), p.time_unix_nano / 1e6,
                 counter, delta)


def _merged(resource: dict, attributes) -> tuple:
    merged = dict(resource)
    merged.update(_attributes(attributes))
    return tuple(sorted(merged.items()))


def _attributes(key_values) -> dict:
    out = {}
    for kv in key_values:
        kind = kv.value.WhichOneof("value")
        value = getattr(kv.value, kind) if kind in ("string_value", "bool_value", "int_value",
                                                    "double_value") else None
        if value is not None:
            out[kv.key] = str(value)
    return out
