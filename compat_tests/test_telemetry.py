"""Client telemetry (KIP-714): each client that implements it pushes its own metrics to the broker
once a client-metrics subscription matches it: the broker accepts its pushes (``/api/clients``
shows them beside its connection) and exports the metrics they carry on ``/metrics`` with the
client's id (the notes say how many; franz-go pushes only what it observed in the interval, so an
idle consumer's pushes may carry none)."""

from __future__ import annotations

import pytest

from compat_tests import harness, reference
from tests.broker_process import BrokerProcess
from tests.integration.clients import wait_until
from tests.observability.conftest import http_json, with_http
from tests.observability.test_client_telemetry import SET, alter, exported


@pytest.fixture(scope="module")
def telemetry_broker(tmp_path_factory):
    """A broker with its HTTP port, for /metrics."""
    process = with_http(BrokerProcess(tmp_path_factory.mktemp("telemetry") / "data",
                                      {"http.port": "0"}).start())
    yield process
    reference.forget(process.bootstrap)
    process.stop(timeout=10)


@pytest.mark.compat("client telemetry (KIP-714)")
def test_client_pushes_its_metrics(telemetry_broker, driver, cell):
    cell.need(driver, "telemetry")
    bootstrap = telemetry_broker.bootstrap
    client_id = harness.unique("telemetry", driver.name)
    assert alter(bootstrap, client_id, ("metrics", SET, "*"), ("interval.ms", SET, "200"),
                 ("match", SET, f"client_id={client_id}")) == (0, None)
    topic = harness.unique("telemetry", driver.name)
    harness.produce(driver, bootstrap, topic, harness.Spec(count=1), timeout=20).ok()
    # a consumer waits for records that never come, pushing its metrics meanwhile
    running = harness.start(driver, "consume", bootstrap, topic=topic, count=1000,
                            from_beginning=True, client_id=client_id, timeout=30,
                            timeout_ms=30000)

    def pushes():
        return sum(c["telemetry"]["pushes"] for c in http_json(telemetry_broker, "/api/clients")
                   if c["client_id"] == client_id and c["telemetry"])

    try:
        wait_until(lambda: pushes() >= 2, 25, 0.2, f"{driver.name}'s metric pushes")
        wait_until(lambda: exported(telemetry_broker, client_id) or driver.name == "go", 5, 0.2,
                   f"{driver.name}'s metrics on /metrics")
        lines = exported(telemetry_broker, client_id)
    finally:
        running.stop()
    names = sorted({line.split("{", 1)[0] for line in lines})
    cell.note(f"{driver.name}: pushes accepted; {len(names)} metrics exported" +
              (f", e.g. {names[0]}" if names else ""))
