"""The web console in a real headless Chromium (Debian's ``chromium``, driven by Playwright),
against a broker that real clients produced to and consumed from, and whose clients push their
own metrics (KIP-714)."""

from __future__ import annotations

import shutil
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

TIMEOUT = 20


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("chromium is not installed: run scripts/install-test-deps.sh")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True,
                                    args=["--no-sandbox", "--disable-dev-shm-usage"])
        yield browser
        browser.close()


def test_console_shows_cluster_topics_messages_configs_and_group_lag(dev_broker, browser):
    producer = Producer({"bootstrap.servers": dev_broker.bootstrap, "linger.ms": 0})
    for i in range(8):
        producer.produce("web", key=f"key-{i}", value=f"value-{i}", headers=[("trace", b"t%d" % i)])
    assert producer.flush(TIMEOUT) == 0
    consumer = Consumer({"bootstrap.servers": dev_broker.bootstrap, "group.id": "viewers",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.subscribe(["web"])
    got, deadline = 0, time.monotonic() + TIMEOUT
    while got < 8 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            got += 1
    assert got == 8
    consumer.commit(offsets=[TopicPartition("web", 0, 5)], asynchronous=False)

    page = browser.new_page()
    try:
        page.goto(dev_broker.http, timeout=TIMEOUT * 1000)
        page.wait_for_selector("#brokers", timeout=TIMEOUT * 1000)
        assert page.locator("#brokers tbody tr").count() == 1
        assert page.locator("#cluster-id").inner_text()

        page.click("text=Topics")
        page.wait_for_selector("#topics a:text('web')", timeout=TIMEOUT * 1000)
        page.click("#topics a:text('web')")
        page.wait_for_selector("#messages", timeout=TIMEOUT * 1000)
        partitions = page.locator("#partitions tbody tr td").all_inner_texts()
        # partition, leader, epoch, replicas, ISR, this broker's role, start, end, hw
        assert partitions[:9] == ["0", "1", "0", "1", "1", "leader", "0", "8", "8"]
        messages = page.locator("#messages tbody tr")
        assert messages.count() == 8
        last = messages.nth(7).locator("td").all_inner_texts()
        assert last[1] == "7" and last[3] == "key-7" and last[4] == "value-7" and last[5] == "trace=t7"
        configs = page.locator("#configs").inner_text()
        assert "cleanup.policy" in configs and "retention.ms" in configs
        page.select_option("#limit", "10")
        page.wait_for_function("location.hash.includes('limit=10')")

        page.click("text=Consumer groups")
        page.wait_for_selector("#groups a:text('viewers')", timeout=TIMEOUT * 1000)
        page.click("#groups a:text('viewers')")
        page.wait_for_selector("#members tbody tr", timeout=TIMEOUT * 1000)
        assert page.locator("#members tbody tr").count() == 1
        offsets = page.locator("#offsets tbody tr td").all_inner_texts()
        assert offsets == ["web", "0", "5", "3"]
        # The lag plot fills as the broker samples lag (every second); the page refreshes itself.
        page.wait_for_selector("#lag-plot[data-points]", timeout=TIMEOUT * 1000)
        assert page.locator("#lag-plot").get_attribute("data-last") == "3"
    finally:
        page.close()
        consumer.close()


def test_console_shows_each_clients_pushed_metrics_beside_its_connection(dev_broker, browser):
    from tests.observability.test_client_telemetry import SET, alter

    assert alter(dev_broker.bootstrap, "everything", ("metrics", SET, "*"),
                 ("interval.ms", SET, "300")) == (0, None)
    stop = threading.Event()

    def produce():  # librdkafka pushes its metrics while it is connected
        producer = Producer({"bootstrap.servers": dev_broker.bootstrap, "client.id": "pusher",
                             "linger.ms": 0})
        while not stop.is_set():
            producer.produce("pushed", b"v")
            producer.poll(0.05)
        producer.flush(TIMEOUT)

    thread = threading.Thread(target=produce)
    thread.start()
    page = browser.new_page()
    try:
        page.goto(dev_broker.http + "#/clients", timeout=TIMEOUT * 1000)
        page.wait_for_selector("#clients tr:has-text('pusher') a", timeout=TIMEOUT * 1000)
        row = page.locator("#clients tr:has-text('pusher')").first.locator("td").all_inner_texts()
        assert row[3] == "pusher" and row[4].startswith("confluent-kafka-python")
        page.click("#clients tr:has-text('pusher') a")
        page.wait_for_selector("#client-metrics tbody tr", timeout=TIMEOUT * 1000)
        assert page.locator("#client-id").inner_text() == "pusher"
        assert "org.apache.kafka.producer.request.latency.avg" in \
            page.locator("#client-metrics").inner_text()
        # the page refreshes itself and the plot grows with each push
        page.wait_for_function(
            "document.querySelector('#client-metric-plot')?.dataset.points >= 3",
            timeout=TIMEOUT * 1000)
        chosen = page.locator("#series").input_value()
        assert chosen.startswith("org.apache.kafka.producer.")
        other = page.locator("#series option").nth(0).get_attribute("value")
        page.select_option("#series", other)
        page.wait_for_function("location.hash.includes('series=')")
        page.wait_for_selector("#client-metric-plot", timeout=TIMEOUT * 1000)
    finally:
        page.close()
        stop.set()
        thread.join()
