"""The web console in a real headless Chromium (Debian's ``chromium``, driven by Playwright),
against a broker that real clients produced to and consumed from."""

from __future__ import annotations

import shutil
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
