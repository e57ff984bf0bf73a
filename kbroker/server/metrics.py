"""Prometheus metrics with Kafka's names (as the JMX exporter spells them), through
``prometheus_client``.

The hot path only bumps plain integers, once per request (never per record: a produce's record
count comes from its batch headers): :class:`RequestMetrics` holds them. Everything else --
partitions, log sizes, group lag, connections -- is read from the broker when ``/metrics`` is
scraped, by :class:`BrokerCollector`.

Names (Kafka's MBean -> Prometheus, lower-cased):
- ``kafka_server_brokertopicmetrics_messagesin_total{topic}``, ``..._bytesin_total{topic}``,
  ``..._bytesout_total{topic}`` (BrokerTopicMetrics MessagesInPerSec, BytesInPerSec,
  BytesOutPerSec);
- ``kafka_network_requestmetrics_requests_total{request,version}`` (RequestsPerSec),
  ``kafka_network_requestmetrics_errors_total{request,error}`` (ErrorsPerSec),
  ``kafka_network_requestmetrics_totaltimems{request}`` (TotalTimeMs, a histogram in ms);
- ``kafka_server_socketservermetrics_connection_count`` (connection-count);
- ``kafka_server_replicamanager_partitioncount``, ``..._underreplicatedpartitions``,
  ``kafka_controller_kafkacontroller_offlinepartitionscount``;
- ``kafka_log_log_size{topic,partition}``, ``kafka_log_log_logendoffset``,
  ``kafka_log_log_logstartoffset`` (kafka.log:type=Log);
- client quotas, per quota entity (``user`` and ``client_id`` labels, empty when shared, as
  Kafka's metric tags): ``kafka_server_produce_byte_rate``, ``kafka_server_fetch_byte_rate``,
  ``kafka_server_request_request_time`` (the measured rates) and
  ``kafka_server_{produce,fetch,request}_throttle_time`` (average throttle in ms, since start;
  Kafka's is averaged over the quota window) -- kafka.server:type=Produce|Fetch|Request;
- ``kafka_consumergroup_lag{consumergroup,topic,partition}`` and
  ``kafka_consumergroup_current_offset`` (Kafka has no broker-side lag metric; these are the
  names kafka_exporter made standard);
- share groups (KIP-932; neither Kafka nor kafka_exporter export these, so kbroker names them
  like the consumer group ones): ``kafka_sharegroup_members{sharegroup}``, and per share
  partition this broker leads (once a member fetched from it)
  ``kafka_sharegroup_lag{sharegroup,topic,partition}`` (records from the share-partition start
  offset to the high watermark not yet acknowledged or archived, as Kafka's
  DescribeShareGroupOffsets lag), ``kafka_sharegroup_start_offset``, ``kafka_sharegroup_in_flight_records`` (available or
  acquired, between the start and end offsets) and ``kafka_sharegroup_acquired_records``
  (locked by a member now);
- share-group dead-letter queues (KIP-1191; Kafka's ShareGroupMetrics meters, as counters),
  per group of the share partitions this broker leads:
  ``kafka_server_sharegroupmetrics_deadletterqueuerecordcount_total{group}`` (records written
  to the DLQ), ``..._deadletterqueuetotalproducerequests_total{group}`` (produce requests
  sent) and ``..._deadletterqueuefailedproducerequests_total{group}`` (those that failed for
  good);
- cluster mode only, kbroker's own: ``kbroker_zookeeper_sync_events_total``,
  ``kbroker_zookeeper_znode_reads_total``, ``kbroker_zookeeper_sync_differences_total``.
- the schema registry, when on: ``kbroker_schema_registry_requests_total{endpoint,status}``
  (kbroker's own; endpoints named by their route, e.g. ``GET /schemas/ids/{id}``);
- client telemetry (KIP-714): every metric a connected client pushed, named as OpenTelemetry's
  Prometheus exporter names it (dots to underscores: ``org_apache_kafka_producer_...``), with
  ``client_id`` and ``client_instance_id`` labels and the metric's own attributes; monotonic
  sums as counters (deltas added up). Bounded by ``kbroker.telemetry.max.series`` (and
  ``.per.client``): ``kbroker_client_metrics_series``, ``kbroker_client_metrics_instances`` and
  ``kbroker_client_metrics_dropped_total`` (samples of series refused by the bounds).
"""

from __future__ import annotations

import bisect
import re
import struct

from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages import API_BY_KEY

# TotalTimeMs buckets, in milliseconds.
BUCKETS_MS = (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
_BATCH_LENGTH = struct.Struct(">i")  # at offset 8 of a record batch
_RECORD_COUNT = struct.Struct(">i")  # at offset 57 (v2 batches)
PRODUCE, FETCH = 0, 1


class RequestMetrics:
    """Counters bumped once per request; read by the collector at scrape time."""

    def __init__(self):
        self.requests: dict[tuple[int, int], int] = {}  # (api key, version) -> count
        self.errors: dict[tuple[int, int], int] = {}  # (api key, error code) -> count
        self.latency: dict[int, list] = {}  # api key -> [bucket counts..., +Inf count, sum]
        self.topics: dict[str, list] = {}  # topic -> [messages in, bytes in, bytes out]

    def request_done(self, api_key: int, version: int, latency_ms: float, errors) -> None:
        key = (api_key, version)
        self.requests[key] = self.requests.get(key, 0) + 1
        buckets = self.latency.get(api_key)
        if buckets is None:
            buckets = self.latency[api_key] = [0] * (len(BUCKETS_MS) + 1) + [0.0]
        buckets[bisect.bisect_left(BUCKETS_MS, latency_ms)] += 1
        buckets[-1] += latency_ms
        for code in errors:
            error_key = (api_key, code)
            self.errors[error_key] = self.errors.get(error_key, 0) + 1

    def produced(self, request) -> None:
        for topic in request.topic_data:
            for partition in topic.partition_data:
                records = partition.records
                if records is None:
                    continue
                counts = self._topic(topic.name)
                counts[0] += record_count(records)
                counts[1] += len(records)

    def fetched(self, response, name_of) -> None:
        for topic in response.responses:
            size = 0
            for partition in topic.partitions:
                records = partition.records
                if records:
                    size += records.nbytes if isinstance(records, memoryview) else \
                        sum(len(r) for r in records) if isinstance(records, list) else len(records)
            if size:
                self._topic(topic.topic or name_of(topic.topic_id))[2] += size

    def _topic(self, name) -> list:
        counts = self.topics.get(name)
        if counts is None:
            counts = self.topics[name] = [0, 0, 0]
        return counts


def record_count(records) -> int:
    """Records in a run of v2 record batches, from their headers."""
    view = memoryview(records)
    total, pos, end = 0, 0, len(view)
    while pos + 61 <= end:
        (length,) = _BATCH_LENGTH.unpack_from(view, pos + 8)
        (count,) = _RECORD_COUNT.unpack_from(view, pos + 57)
        total += max(count, 0)
        pos += 12 + length
    return total


class BrokerCollector:
    """A prometheus_client collector over one broker. prometheus_client is imported on the first
    scrape (about 0.1 s), not at start-up."""

    def __init__(self, broker, metrics: RequestMetrics):
        self.broker = broker
        self.metrics = metrics

    def collect(self):
        global CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
        from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                            HistogramMetricFamily)

        yield from self._requests()
        yield from self._topics()
        broker = self.broker
        connections = GaugeMetricFamily("kafka_server_socketservermetrics_connection_count",
                                        "Open client connections.")
        connections.add_metric([], len(broker.connections))
        yield connections
        yield from self._partitions()
        yield from self._groups()
        yield from self._share_groups()
        yield from self._dead_letter_queues()
        yield from self._quotas()
        yield from self._cluster_sync()
        yield from self._schema_registry()
        yield from client_metric_families(getattr(self.broker, "client_metrics", None))

    def _cluster_sync(self):
        """How a cluster broker follows ZooKeeper (kbroker's own: Kafka's brokers do not read
        ZooKeeper for metadata): watch events handled, znodes read, and the differences the
        periodic full read found (each one a lost watch)."""
        sync = getattr(getattr(self.broker, "cluster", None), "sync", None)
        if sync is None:
            return
        for name, text, value in (
                ("kbroker_zookeeper_sync_events_total", "ZooKeeper watch events handled.",
                 sync.handled),
                ("kbroker_zookeeper_znode_reads_total", "Znodes read to follow ZooKeeper.",
                 sync.reads),
                ("kbroker_zookeeper_sync_differences_total",
                 "Differences the periodic full read found (lost watches).", sync.differences)):
            counter = CounterMetricFamily(name, text)
            counter.add_metric([], value)
            yield counter

    def _schema_registry(self):
        """Requests the schema registry answered (kbroker.schema_registry), per endpoint (its
        route, e.g. ``POST /subjects/{subject}/versions``) and HTTP status; kbroker's own."""
        registry = getattr(self.broker, "schema_registry", None)
        if registry is None:
            return
        counter = CounterMetricFamily("kbroker_schema_registry_requests",
                                      "Schema registry requests answered, per endpoint and "
                                      "HTTP status.", labels=["endpoint", "status"])
        for (endpoint, status), count in sorted(registry.metrics.items()):
            counter.add_metric([endpoint, str(status)], count)
        yield counter

    def _quotas(self):
        dispatcher = getattr(self.broker, "dispatcher", None)
        quotas = getattr(dispatcher, "quotas", None)
        if quotas is None:
            return
        families = {}
        for quota_type, user, client_id, rate, throttle in quotas.measured():
            kind = quota_type.lower()
            measured = "request_time" if kind == "request" else "byte_rate"
            for name, value in ((f"kafka_server_{kind}_{measured}", rate),
                                (f"kafka_server_{kind}_throttle_time", throttle)):
                family = families.get(name)
                if family is None:
                    family = families[name] = GaugeMetricFamily(
                        name, "Client quota sensor (kafka.server:type=" + quota_type + ").",
                        labels=["user", "client_id"])
                family.add_metric([user, client_id], value)
        yield from families.values()

    def _requests(self):
        m = self.metrics
        requests = CounterMetricFamily("kafka_network_requestmetrics_requests",
                                       "Requests answered, per API and version.",
                                       labels=["request", "version"])
        for (api_key, version), count in sorted(m.requests.items()):
            requests.add_metric([API_BY_KEY[api_key].name, str(version)], count)
        yield requests
        errors = CounterMetricFamily("kafka_network_requestmetrics_errors",
                                     "Error codes in responses, per API and error.",
                                     labels=["request", "error"])
        for (api_key, code), count in sorted(m.errors.items()):
            errors.add_metric([API_BY_KEY[api_key].name, ErrorCode.for_code(code).name], count)
        yield errors
        latency = HistogramMetricFamily("kafka_network_requestmetrics_totaltimems",
                                        "Time from a request's arrival to its response, in ms.",
                                        labels=["request"])
        for api_key, counts in sorted(m.latency.items()):
            cumulative, buckets = 0, []
            for bound, count in zip(BUCKETS_MS + (float("inf"),), counts[:-1]):
                cumulative += count
                buckets.append(("+Inf" if bound == float("inf") else str(bound), cumulative))
            latency.add_metric([API_BY_KEY[api_key].name], buckets, counts[-1])
        yield latency

    def _topics(self):
        names = ("messagesin", "Messages appended"), ("bytesin", "Record bytes received"), \
            ("bytesout", "Record bytes sent to consumers")
        families = [CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}",
                                        f"{text}, per topic.", labels=["topic"])
                    for name, text in names]
        for topic, counts in sorted(self.metrics.topics.items()):
            for family, value in zip(families, counts):
                family.add_metric([topic], value)
        yield from families

    def _partitions(self):
        replicas = self.broker.replicas
        size = GaugeMetricFamily("kafka_log_log_size", "Bytes of a partition's log.",
                                 labels=["topic", "partition"])
        end = GaugeMetricFamily("kafka_log_log_logendoffset", "Log end offset.",
                                labels=["topic", "partition"])
        start = GaugeMetricFamily("kafka_log_log_logstartoffset", "Log start offset.",
                                  labels=["topic", "partition"])
        count = 0
        for partition in sorted(replicas.partitions(), key=lambda p: (p.topic, p.index)):
            labels = [partition.topic, str(partition.index)]
            size.add_metric(labels, partition.size_in_bytes)
            end.add_metric(labels, partition.log_end_offset)
            start.add_metric(labels, partition.log_start_offset)
            count += 1
        yield size
        yield end
        yield start
        total = GaugeMetricFamily("kafka_server_replicamanager_partitioncount",
                                  "Partitions on this broker.")
        total.add_metric([], count)
        yield total
        # A single node leads every partition with its whole replica set: none can lag or be
        # offline while the broker answers.
        under = GaugeMetricFamily("kafka_server_replicamanager_underreplicatedpartitions",
                                  "Partitions whose ISR is smaller than their replica set.")
        under.add_metric([], 0)
        yield under
        offline = GaugeMetricFamily("kafka_controller_kafkacontroller_offlinepartitionscount",
                                    "Partitions without a leader.")
        offline.add_metric([], 0)
        yield offline

    def _groups(self):
        lag = GaugeMetricFamily("kafka_consumergroup_lag",
                                "High watermark minus the group's committed offset.",
                                labels=["consumergroup", "topic", "partition"])
        current = GaugeMetricFamily("kafka_consumergroup_current_offset",
                                    "The group's committed offset.",
                                    labels=["consumergroup", "topic", "partition"])
        for group, topic, index, committed, lag_value in group_offsets(self.broker):
            labels = [group, topic, str(index)]
            current.add_metric(labels, committed)
            if lag_value is not None:
                lag.add_metric(labels, lag_value)
        yield lag
        yield current

    def _share_groups(self):
        members = GaugeMetricFamily("kafka_sharegroup_members", "Members of the share group.",
                                    labels=["sharegroup"])
        for group_id, group in share_groups(self.broker):
            members.add_metric([group_id], len(group.members))
        yield members
        labels = ["sharegroup", "topic", "partition"]
        families = {
            "lag": GaugeMetricFamily("kafka_sharegroup_lag", "Records between the share "
                                     "partition's start offset and the high watermark not yet "
                                     "acknowledged or archived.", labels=labels),
            "start_offset": GaugeMetricFamily("kafka_sharegroup_start_offset",
                                              "The share partition's start offset.",
                                              labels=labels),
            "in_flight": GaugeMetricFamily("kafka_sharegroup_in_flight_records",
                                           "In-flight records not yet acknowledged or archived "
                                           "(available or acquired).", labels=labels),
            "acquired": GaugeMetricFamily("kafka_sharegroup_acquired_records",
                                          "Records locked by a member now.", labels=labels),
        }
        for row in share_partitions(self.broker):
            values = [row["group_id"], row["topic"], str(row["partition"])]
            for name, family in families.items():
                family.add_metric(values, row[name])
        yield from families.values()


    def _dead_letter_queues(self):
        manager = _built_share_partitions(self.broker)
        writer = getattr(manager, "dead_letters", None)
        if writer is None:
            return
        prefix = "kafka_server_sharegroupmetrics_deadletterqueue"
        families = {
            "records": CounterMetricFamily(f"{prefix}recordcount",
                                           "Records written to the share group's dead-letter "
                                           "queue.", labels=["group"]),
            "produces": CounterMetricFamily(f"{prefix}totalproducerequests",
                                            "Produce requests to the share group's dead-letter "
                                            "queue.", labels=["group"]),
            "failed_produces": CounterMetricFamily(f"{prefix}failedproducerequests",
                                                   "Produce requests to the share group's "
                                                   "dead-letter queue that failed for good.",
                                                   labels=["group"]),
        }
        for group_id, meters in sorted(writer.meters.items()):
            for name, family in families.items():
                family.add_metric([group_id], getattr(meters, name))
        yield from families.values()


def _built_share_partitions(broker):
    """The share-partition manager if the coordinators are built (a scrape builds nothing)."""
    return getattr(getattr(broker, "coordinators", None), "share_partitions", None)


def share_groups(broker):
    """(group id, ShareGroup) for every share group of the loaded group coordinator shards."""
    coordinator = broker.coordinators.group  # None until built: a scrape builds nothing
    if coordinator is None:
        return
    for shard in list(coordinator.shards()):
        if not getattr(shard, "loading", False):
            yield from sorted((group.group_id, group) for group in shard.groups_of_type("share"))


def share_partitions(broker) -> list[dict]:
    """The share partitions this broker leads and has loaded: group, topic, partition, start
    offset, in-flight, acquired and lag (as KIP-1226 defines it for DescribeShareGroupOffsets:
    high watermark - start offset - records already acknowledged or archived past it)."""
    manager = _built_share_partitions(broker)
    if manager is None:
        return []
    out = []
    for partition in manager.loaded():
        state, replica = partition.state, partition.replica
        lag = replica.high_watermark - state.start_offset - state.delivery_complete_count()
        out.append({"group_id": partition.key.group_id, "topic": replica.topic,
                    "partition": replica.index, "start_offset": state.start_offset,
                    "in_flight": state.unfinished_count(), "acquired": state.acquired_count(),
                    "lag": max(lag, 0)})
    return sorted(out, key=lambda r: (r["group_id"], r["topic"], r["partition"]))


def group_offsets(broker):
    """(group, topic, partition, committed offset, lag or None) for every committed offset."""
    coordinator = broker.coordinators.group  # None until built: a scrape builds nothing
    if coordinator is None:
        return
    for shard in list(coordinator.shards()):
        if getattr(shard, "loading", False):
            continue
        for group, committed in sorted(shard.offsets.items()):
            for (topic, index), offset in sorted(committed.items()):
                partition = broker.replicas.get(topic, index)
                lag = None if partition is None else max(partition.high_watermark - offset.offset, 0)
                yield group, topic, index, offset.offset, lag


_INVALID = re.compile(r"[^a-zA-Z0-9_]")
_OWN_LABELS = ("client_id", "client_instance_id")


def _prometheus_name(name: str) -> str:
    name = _INVALID.sub("_", name)
    return name if name[:1].isalpha() or name[:1] == "_" else "_" + name


def _label_name(key: str) -> str:
    name = _prometheus_name(key).lstrip("_") or "attribute"
    return "otel_" + name if name in _OWN_LABELS else name


def client_metric_families(manager):
    """The metrics clients pushed (KIP-714), as Prometheus families; see the module docstring."""
    if manager is None:
        return
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    grouped: dict[tuple, list] = {}  # (name, counter) -> [(labels dict, value)]
    for instance_id, series_of in manager.store.series.items():
        instance = manager.instances.get(instance_id)
        client_id = (instance.info.client_id if instance is not None else None) or ""
        for series in series_of.values():
            labels = {_label_name(k): v for k, v in series.attributes}
            labels["client_id"], labels["client_instance_id"] = client_id, str(instance_id)
            grouped.setdefault((_prometheus_name(series.name), series.counter), []).append(
                (labels, series.value))
    for (name, counter), samples in sorted(grouped.items()):
        label_names = sorted({key for labels, _ in samples for key in labels})
        kind = CounterMetricFamily if counter else GaugeMetricFamily
        family = kind(name, "Pushed by clients (KIP-714 client telemetry).", labels=label_names)
        for labels, value in samples:
            family.add_metric([labels.get(key, "") for key in label_names], value)
        yield family
    store = manager.store
    for name, text, value in (
            ("kbroker_client_metrics_series", "Client metric series kept.", store.count),
            ("kbroker_client_metrics_instances", "Client instances known (KIP-714).",
             len(manager.instances))):
        gauge = GaugeMetricFamily(name, text)
        gauge.add_metric([], value)
        yield gauge
    dropped = CounterMetricFamily("kbroker_client_metrics_dropped",
                                  "Pushed samples of series past kbroker.telemetry.max.series.")
    dropped.add_metric([], store.dropped)
    yield dropped
