"""Client telemetry (KIP-714) against real clients and Kafka's own tool, with Apache Kafka 4.4.0
side by side for the config resources:

- client-metrics subscriptions through IncrementalAlterConfigs, DescribeConfigs and
  ListConfigResources (raw requests of our codecs): the answers, errors and messages of kbroker
  and Kafka 4.4.0 are equal, bad input included;
- Kafka's ``kafka-client-metrics.sh`` (ClientMetricsCommand) prints the same on both;
- a Java producer (Kafka 4.4.0's ProducerPerformance) and librdkafka push their metrics, which
  ``/metrics`` exports with client_id and client_instance_id labels and ``/api/clients`` shows
  beside their connections; a subscription survives a restart;
- oversized and malformed pushes on a real socket get Kafka's errors.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kbroker.protocol import messages
from tests.broker_process import BrokerProcess
from tests.integration.clients import Wire, wait_until
from tests.observability.conftest import http_get, http_json, with_http

ROOT = Path(__file__).resolve().parents[2]

DESCRIBE_CONFIGS, INCREMENTAL_ALTER, LIST_CONFIG_RESOURCES = 32, 44, 74
GET_SUBSCRIPTIONS, PUSH = 71, 72
CLIENT_METRICS = 16
SET, DELETE, APPEND = 0, 1, 2


@pytest.fixture(scope="module")
def brokers(tmp_path_factory, reference_kafka):
    kafka = reference_kafka.get()
    kbroker = BrokerProcess(tmp_path_factory.mktemp("kbroker") / "data", {"http.port": "0"})
    try:
        with_http(kbroker.start())
        yield {"kafka": kafka, "kbroker": kbroker}
    finally:
        kbroker.kill()


def side_by_side(brokers, scenario):
    with ThreadPoolExecutor(2) as pool:
        futures = {name: pool.submit(scenario, b.bootstrap) for name, b in brokers.items()}
        traces = {name: future.result() for name, future in futures.items()}
    assert traces["kbroker"] == traces["kafka"], \
        "\n".join(f"{name:8} {trace}" for name, trace in traces.items())
    return traces["kafka"]


def call(bootstrap, api_key, version, **fields):
    with Wire(bootstrap, timeout=30) as wire:
        return wire.call(api_key, version, messages.request_class(api_key)(**fields))


def alter(bootstrap, name, *ops):
    R = messages.request_class(INCREMENTAL_ALTER)
    answer = call(bootstrap, INCREMENTAL_ALTER, 1, validate_only=False, resources=[
        R.AlterConfigsResource(resource_type=CLIENT_METRICS, resource_name=name, configs=[
            R.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])])
    result = answer.responses[0]
    return result.error_code, result.error_message


def describe(bootstrap, name, keys=None):
    R = messages.request_class(DESCRIBE_CONFIGS)
    answer = call(bootstrap, DESCRIBE_CONFIGS, 4, include_synonyms=True,
                  include_documentation=True, resources=[R.DescribeConfigsResource(
                      resource_type=CLIENT_METRICS, resource_name=name, configuration_keys=keys)])
    result = answer.results[0]
    return (result.error_code, result.error_message,
            sorted((c.name, c.value, c.read_only, c.config_source, c.is_sensitive,
                    [(s.name, s.value, s.source) for s in c.synonyms], c.config_type,
                    c.documentation) for c in result.configs))


def listed(bootstrap, version=1):
    answer = call(bootstrap, LIST_CONFIG_RESOURCES, version,
                  resource_types=[CLIENT_METRICS] if version else [])
    return answer.error_code, sorted((r.resource_name, r.resource_type)
                                     for r in answer.config_resources)


def listed_once_settled(bootstrap, name, present: bool, timeout: float = 20.0):
    """``listed`` once ``name`` is (or is no longer) in it: Kafka's broker answers
    ListConfigResources from its metadata cache, which follows the controller's commit a moment
    later (a loaded run saw a deleted subscription still listed); kbroker's answer is at once."""
    deadline = time.monotonic() + timeout
    while True:
        answer = listed(bootstrap)
        if (name, CLIENT_METRICS) in answer[1] and present or \
                (name, CLIENT_METRICS) not in answer[1] and not present or \
                time.monotonic() > deadline:
            return answer
        time.sleep(0.1)


def test_client_metrics_resources_as_kafka_keeps_them(brokers):
    name = f"sub-{uuid.uuid4().hex[:6]}"

    def scenario(bootstrap):
        trace = [alter(bootstrap, name, ("metrics", SET, "org.apache.kafka.producer., "
                                         "org.apache.kafka.consumer.coordinator."),
                       ("interval.ms", SET, "1000"),
                       ("match", SET, "client_id=app-.*,client_software_name=apache-kafka-java")),
                 describe(bootstrap, name), describe(bootstrap, name, ["interval.ms"]),
                 listed_once_settled(bootstrap, name, True), listed(bootstrap, 0),
                 alter(bootstrap, name, ("metrics", APPEND, "org.apache.kafka.producer.")),
                 alter(bootstrap, name, ("metrics", APPEND, "org.apache.kafka.consumer.fetch.")),
                 describe(bootstrap, name, ["metrics"]),
                 describe(bootstrap, "never-made"),
                 # bad input: each refused with Kafka's error and message, nothing changed
                 alter(bootstrap, name, ("interval.ms", SET, "50")),
                 alter(bootstrap, name, ("interval.ms", SET, "soon")),
                 alter(bootstrap, name, ("colour", SET, "blue")),
                 alter(bootstrap, name, ("match", SET, "client_colour=blue")),
                 alter(bootstrap, name, ("match", SET, "client_id=[")),
                 alter(bootstrap, name, ("metrics", SET, "a,a")),
                 alter(bootstrap, name, ("interval.ms", APPEND, "5")),
                 alter(bootstrap, "", ("metrics", SET, "*")),
                 describe(bootstrap, ""),
                 describe(bootstrap, name),
                 # every key deleted: the subscription is gone
                 alter(bootstrap, name, ("metrics", DELETE, None), ("interval.ms", DELETE, None),
                       ("match", DELETE, None)),
                 listed_once_settled(bootstrap, name, False)]
        return trace

    trace = side_by_side(brokers, scenario)
    assert trace[0] == (0, None) and trace[3] == (0, [(name, CLIENT_METRICS)])
    assert trace[-1] == (0, [])


def client_metrics_command(handle, *args) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "kafka_ref" / "run_kafka.py"), "run-class",
         "org.apache.kafka.tools.ClientMetricsCommand", "--", "--bootstrap-server",
         handle.bootstrap, *args], capture_output=True, text=True, timeout=120)
    # log lines start with their time, which differs between the two runs
    return re.sub(r"^\d\d:\d\d:\d\d\.\d+ ", "", (done.stdout + done.stderr).strip(), flags=re.M)


def test_kafka_client_metrics_tool_prints_the_same(brokers):
    name = f"tool-{uuid.uuid4().hex[:6]}"

    def scenario(bootstrap):
        handle = next(b for b in brokers.values() if b.bootstrap == bootstrap)
        return [client_metrics_command(handle, "--alter", "--name", name, "--metrics",
                                       "org.apache.kafka.producer.", "--interval", "2000",
                                       "--match", "client_id=tool-.*"),
                client_metrics_command(handle, "--describe", "--name", name),
                client_metrics_command(handle, "--alter", "--name", name, "--interval", "5")]

    trace = side_by_side(brokers, scenario)
    for handle in brokers.values():
        assert alter(handle.bootstrap, name, ("metrics", DELETE, None), ("match", DELETE, None),
                     ("interval.ms", DELETE, None)) == (0, None)
    assert trace[0] == f"Altered client metrics config for {name}."
    assert "interval.ms=2000" in trace[1] and "match=client_id=tool-.*" in trace[1]
    assert "interval must be between 100 and 3600000" in trace[2]


def exported(broker, client_id: str) -> list[str]:
    status, body = http_get(broker, "/metrics")
    assert status == 200
    return [line for line in body.splitlines() if f'client_id="{client_id}"' in line]


def test_java_and_librdkafka_push_metrics_to_metrics_and_the_console(brokers, tmp_path):
    kbroker = brokers["kbroker"]
    assert alter(kbroker.bootstrap, "all", ("metrics", SET, "*"),
                 ("interval.ms", SET, "500")) == (0, None)
    java = subprocess.Popen(
        [sys.executable, str(ROOT / "tools" / "kafka_ref" / "run_kafka.py"), "run-class",
         "org.apache.kafka.tools.ProducerPerformance", "--", "--topic", "telemetry",
         "--num-records", "100000", "--throughput", "100", "--record-size", "20",
         "--producer-props", f"bootstrap.servers={kbroker.bootstrap}", "client.id=java-tele",
         "linger.ms=0"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stop = threading.Event()

    def librdkafka():
        producer = Producer({"bootstrap.servers": kbroker.bootstrap, "client.id": "rdk-tele",
                             "linger.ms": 0})
        while not stop.is_set():
            producer.produce("telemetry", b"v")
            producer.poll(0.05)
        producer.flush(10)

    thread = threading.Thread(target=librdkafka)
    thread.start()
    try:
        for client_id in ("java-tele", "rdk-tele"):
            wait_until(lambda: any("request_latency_avg" in line
                                   for line in exported(kbroker, client_id)),
                       60, 0.5, f"{client_id}'s pushed metrics on /metrics")
        java_lines = exported(kbroker, "java-tele")
        # Java names its metrics org.apache.kafka.producer.* and sends its own client id too
        assert any(line.startswith("org_apache_kafka_producer_") for line in java_lines)
        instance = re.search(r'client_instance_id="([0-9a-f-]{36})"', java_lines[0]).group(1)
        clients = http_json(kbroker, "/api/clients")
        pushing = {c["client_id"]: c for c in clients if c["telemetry"]}
        assert pushing["java-tele"]["telemetry"]["instance_id"] == instance
        assert pushing["java-tele"]["software"].startswith("apache-kafka-java")
        assert pushing["rdk-tele"]["software"].startswith("confluent-kafka-python")
        assert pushing["rdk-tele"]["telemetry"]["pushes"] > 0
        detail = http_json(kbroker, f"/api/clients/{instance}")
        assert detail["instance"]["requested_metrics"] == ["*"]
        assert len(detail["series"]) > 10
        gauges = http_get(kbroker, "/metrics")[1]
        assert re.search(r"^kbroker_client_metrics_series [1-9]", gauges, re.M)
    finally:
        stop.set()
        thread.join()
        java.kill()
        java.wait()
    # the connections closed: their instances (and series) are gone, as in Kafka
    wait_until(lambda: not exported(kbroker, "java-tele") and not exported(kbroker, "rdk-tele"),
               30, 0.5, "the closed clients' series to go")
    # the subscription is kept by the controller: a restart keeps it
    kbroker.stop()
    with_http(kbroker.start())
    assert ("interval.ms", "500") in [c[:2] for c in describe(kbroker.bootstrap, "all")[2]]
    assert listed(kbroker.bootstrap) == (0, [("all", CLIENT_METRICS)])
    assert alter(kbroker.bootstrap, "all", ("metrics", DELETE, None),
                 ("interval.ms", DELETE, None)) == (0, None)


def test_oversized_and_malformed_pushes_get_kafkas_errors(brokers):
    kbroker = brokers["kbroker"]
    assert alter(kbroker.bootstrap, "bad", ("metrics", SET, "*"),
                 ("interval.ms", SET, "100")) == (0, None)
    try:
        with Wire(kbroker.bootstrap, timeout=10) as wire:
            subscription = wire.call(GET_SUBSCRIPTIONS, 0, messages.request_class(
                GET_SUBSCRIPTIONS)(client_instance_id=uuid.UUID(int=0)))
            assert subscription.error_code == 0
            assert subscription.telemetry_max_bytes == 1048576

            def push(metrics, compression=0):
                time.sleep(0.12)  # past the push interval
                return wire.call(PUSH, 0, messages.request_class(PUSH)(
                    client_instance_id=subscription.client_instance_id,
                    subscription_id=subscription.subscription_id, terminating=False,
                    compression_type=compression, metrics=metrics)).error_code

            assert push(b"\x00" * (1048576 + 1)) == 118  # TELEMETRY_TOO_LARGE
            assert push(b"\x0a\xff\xff\xff\xff\x0f") == 87  # INVALID_RECORD: truncated protobuf
            assert push(b"not lz4", compression=3) == 87
            assert push(b"", compression=7) == 76  # UNSUPPORTED_COMPRESSION_TYPE
            assert push(b"") == 0
            # the connection is still served
            assert wire.call(GET_SUBSCRIPTIONS, 0, messages.request_class(GET_SUBSCRIPTIONS)(
                client_instance_id=subscription.client_instance_id)).error_code in (0, 89)
    finally:
        alter(kbroker.bootstrap, "bad", ("metrics", DELETE, None), ("interval.ms", DELETE, None))


def test_cluster_default_broker_configs_and_subscriptions_keep_apart(brokers):
    """Subscriptions are stored beside the cluster-wide dynamic broker configs: a change of
    either keeps the other, and DescribeConfigs of the cluster default shows only broker keys."""
    bootstrap = brokers["kbroker"].bootstrap
    assert alter(bootstrap, "kept", ("metrics", SET, "org.apache.kafka.")) == (0, None)
    R = messages.request_class(INCREMENTAL_ALTER)
    broker_alter = call(bootstrap, INCREMENTAL_ALTER, 1, validate_only=False, resources=[
        R.AlterConfigsResource(resource_type=4, resource_name="", configs=[
            R.AlterableConfig(name="log.retention.bytes", config_operation=SET,
                              value="123456789")])])
    assert broker_alter.responses[0].error_code == 0
    assert ("kept", CLIENT_METRICS) in listed(bootstrap)[1]
    D = messages.request_class(DESCRIBE_CONFIGS)
    described = call(bootstrap, DESCRIBE_CONFIGS, 4, include_synonyms=False,
                     include_documentation=False, resources=[D.DescribeConfigsResource(
                         resource_type=4, resource_name="", configuration_keys=None)])
    assert {c.name: c.value for c in described.results[0].configs} == \
        {"log.retention.bytes": "123456789"}
    assert alter(bootstrap, "kept", ("metrics", DELETE, None)) == (0, None)
    assert ("kept", CLIENT_METRICS) not in listed(bootstrap)[1]
    broker_alter = call(bootstrap, INCREMENTAL_ALTER, 1, validate_only=False, resources=[
        R.AlterConfigsResource(resource_type=4, resource_name="", configs=[
            R.AlterableConfig(name="log.retention.bytes", config_operation=DELETE,
                              value=None)])])
    assert broker_alter.responses[0].error_code == 0
