"""Quota sensors on the Prometheus endpoint, with Kafka's names and user/client-id tags."""

from __future__ import annotations

from kbroker.protocol import messages
from tests.integration.clients import METADATA, Wire
from tests.observability.conftest import with_http
from tests.observability.test_http_metrics import scrape, value
from tests.security.test_quotas_api import alter


def test_throttle_time_and_rates_per_user_and_client(broker_factory):
    broker = with_http(broker_factory({"dev.mode": "true", "quota.window.num": "3"}))
    assert alter(broker.bootstrap, [({"client-id": "busy"}, {"request_percentage": 0.0001})])[
        0][1] == 0
    metadata = messages.request_class(METADATA)(topics=None)
    with Wire(broker.bootstrap, client_id="busy") as wire:
        throttles = [wire.call(METADATA, 12, metadata).throttle_time_ms for _ in range(3)]
    assert max(throttles) > 0
    samples = scrape(broker)
    # A client-id quota: one rate per client id, shared by every user (empty user tag).
    assert value(samples, "kafka_server_request_throttle_time", user="", client_id="busy") > 0
    assert value(samples, "kafka_server_request_request_time", user="", client_id="busy") > 0
    assert value(samples, "kafka_server_request_throttle_time", user="",
                  client_id="kbroker-tests") is None
