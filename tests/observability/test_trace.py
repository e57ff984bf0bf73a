"""The protocol trace: decoded requests and responses in the broker's log, as JSON or text,
filtered by API and client id, switched on and off through the Admin API."""

from __future__ import annotations

import json

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, \
    ResourceType

from tests.observability.conftest import log_lines

TIMEOUT = 20


def trace_events(broker) -> list[dict]:
    # Wait until the last line the test needs reached the file.
    log_lines(broker, lambda line: '"event": "response", "api": "Produce"' in line)
    lines = [line for line in broker.log().splitlines() if " kbroker.trace: {" in line]
    return [json.loads(line.split(" kbroker.trace: ", 1)[1]) for line in lines]


def produce(broker, topic, client_id="tracer"):
    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": client_id})
    producer.produce(topic, value=b"hello")
    assert producer.flush(TIMEOUT) == 0


def set_configs(broker, **configs):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in configs.items()])
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)


def test_json_trace_names_api_client_software_and_errors(broker_factory):
    broker = broker_factory({"kbroker.trace": "json"})
    produce(broker, "traced")
    events = trace_events(broker)
    requests = [e for e in events if e["event"] == "request" and e["api"] == "Produce"]
    responses = [e for e in events if e["event"] == "response" and e["api"] == "Produce"]
    assert requests and responses
    assert requests[0]["client_id"] == "tracer"
    assert requests[0]["client_software"][0] == "confluent-kafka-python"
    assert requests[0]["request"]["topic_data"][0]["name"] == "traced"
    assert "bytes>" in requests[0]["request"]["topic_data"][0]["partition_data"][0]["records"]
    assert responses[0]["errors"] == [] and responses[0]["latency_ms"] >= 0
    assert responses[0]["correlation_id"] == requests[0]["correlation_id"]
    api_versions = [e for e in events if e["event"] == "response" and e["api"] == "ApiVersions"]
    assert api_versions and api_versions[0]["response"]["api_keys"]
    # Metadata's topic entries are kept encoded between requests; the trace shows them decoded.
    metadata = [e for e in events if e["event"] == "response" and e["api"] == "Metadata"
                and any(t["name"] == "traced" for t in e["response"]["topics"])]
    (topic,) = [t for t in metadata[-1]["response"]["topics"] if t["name"] == "traced"]
    assert [p["partition_index"] for p in topic["partitions"]] == [0]


def test_trace_switched_on_dynamically_and_filtered(broker):
    produce(broker, "quiet")
    assert "kbroker.trace:" not in broker.log()
    set_configs(broker, **{"kbroker.trace": "text", "kbroker.trace.apis": "Produce",
                           "kbroker.trace.client.ids": "wanted"})
    produce(broker, "quiet", client_id="unwanted")
    produce(broker, "quiet", client_id="wanted")
    # Two lines (request and response) from the wanted client: wait for them to reach the file.
    lines = log_lines(broker, lambda line: "kbroker.trace:" in line, 2)
    assert all("Produce" in line and "client=wanted" in line for line in lines)
    assert any("-> Produce" in line for line in lines) and any("<- Produce" in line for line in lines)
