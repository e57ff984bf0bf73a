"""Share groups (KIP-932) on /metrics and in the console's API, with a live confluent-kafka
ShareConsumer: its membership, the records it holds (acquired, in flight) and the lag of the
share partition, before and after it acknowledges."""

from __future__ import annotations

import time

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   ResourceType)

from tests.integration.clients import ensure_topic
from tests.observability.conftest import http_get, http_json, with_http
from tests.observability.test_console import browser  # noqa: F401 - the Chromium fixture
from tests.observability.test_http_metrics import scrape, value

TIMEOUT = 20
SHARE_BROKER = {"dev.mode": "true", "offsets.topic.num.partitions": "1",
                "share.coordinator.state.topic.num.partitions": "1",
                "group.share.heartbeat.interval.ms": "200",
                "group.share.min.heartbeat.interval.ms": "100",
                "group.share.assignment.interval.ms": "0"}


def eventually(check, what):
    deadline = time.monotonic() + TIMEOUT
    while True:
        result = check()
        if result:
            return result
        assert time.monotonic() < deadline, f"timed out: {what}"
        time.sleep(0.2)


def test_share_group_members_in_flight_and_lag(broker_factory, browser):  # noqa: F811
    broker = with_http(broker_factory(SHARE_BROKER))
    topic, group = "queue", "workers"
    ensure_topic(broker.bootstrap, topic)
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest",
                    incremental_operation=AlterConfigOpType.SET)])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # kept until its future ends
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(10):
        producer.produce(topic, value=b"v%d" % i, partition=0)
    assert producer.flush(TIMEOUT) == 0

    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                              "client.id": "share-watcher",
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    try:
        held = []
        while len(held) < 10:
            held += [m for m in consumer.poll(0.5) if m.error() is None]
            assert len(held) <= 10
        labels = {"sharegroup": group, "topic": topic, "partition": "0"}
        # Holding all ten unacknowledged: one member, ten acquired in flight, lag ten.
        samples = eventually(lambda: (s := scrape(broker)) and value(
            s, "kafka_sharegroup_acquired_records", **labels) == 10 and s, "10 acquired")
        assert value(samples, "kafka_sharegroup_members", sharegroup=group) == 1
        assert value(samples, "kafka_sharegroup_in_flight_records", **labels) == 10
        assert value(samples, "kafka_sharegroup_lag", **labels) == 10
        assert value(samples, "kafka_sharegroup_start_offset", **labels) == 0

        listed = {g["group_id"]: g for g in http_json(broker, "/api/share-groups")}
        assert listed[group]["members"] == 1 and listed[group]["state"] == "STABLE"
        assert listed[group]["in_flight"] == 10 and listed[group]["lag"] == 10
        detail = http_json(broker, f"/api/share-groups/{group}")
        [member] = detail["members"]
        assert member["client_id"] == "share-watcher"
        assert member["assigned"] == [{"topic": topic, "partitions": [0]}]
        [partition] = detail["partitions"]
        assert partition == {"topic": topic, "partition": 0, "start_offset": 0,
                             "in_flight": 10, "acquired": 10, "lag": 10}
        page = browser.new_page()
        try:
            page.goto(broker.http, timeout=TIMEOUT * 1000)
            page.click("text=Share groups")
            page.wait_for_selector(f"#share-groups a:text('{group}')", timeout=TIMEOUT * 1000)
            row = page.locator("#share-groups tbody tr td").all_inner_texts()
            assert row == [group, "STABLE", "1", "10", "10"]
            page.click(f"#share-groups a:text('{group}')")
            page.wait_for_selector("#share-partitions tbody tr", timeout=TIMEOUT * 1000)
            assert page.locator("#share-partitions tbody tr td").all_inner_texts() == \
                [topic, "0", "0", "10", "10", "10"]
            assert "share-watcher" in page.locator("#share-members").inner_text()
        finally:
            page.close()

        # Accept four: the start offset moves past them, six remain in flight.
        for message in held[:4]:
            consumer.acknowledge(message, AcknowledgeType.ACCEPT)
        consumer.commit_sync(TIMEOUT)
        samples = eventually(lambda: (s := scrape(broker)) and value(
            s, "kafka_sharegroup_lag", **labels) == 6 and s, "lag 6 after accepting 4")
        assert value(samples, "kafka_sharegroup_acquired_records", **labels) == 6
        assert value(samples, "kafka_sharegroup_start_offset", **labels) == 4
    finally:
        consumer.close()
    # The member left: the group is empty, its records available again (still in flight).
    samples = eventually(lambda: (s := scrape(broker)) and value(
        s, "kafka_sharegroup_members", sharegroup=group) == 0 and s, "the member to leave")
    assert value(samples, "kafka_sharegroup_acquired_records", **labels) == 0
    assert value(samples, "kafka_sharegroup_in_flight_records", **labels) == 6
    assert http_json(broker, f"/api/share-groups/{group}")["state"] == "EMPTY"
    assert http_get(broker, "/api/share-groups/nobody")[0] == 404


def test_dead_letter_queue_meters(broker_factory):
    """KIP-1191's ShareGroupMetrics DLQ meters, per group: records written to the group's
    dead-letter queue and the produce requests that wrote them."""
    broker = with_http(broker_factory(SHARE_BROKER))
    topic, group, dlq = "orders", "order-workers", "dlq.orders"
    ensure_topic(broker.bootstrap, topic)
    ensure_topic(broker.bootstrap, dlq, 1, {"errors.deadletterqueue.group.enable": "true"})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in (
            ("share.auto.offset.reset", "earliest"),
            ("errors.deadletterqueue.topic.name", dlq))])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # kept until its future ends
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(4):
        producer.produce(topic, value=b"v%d" % i, partition=0)
    assert producer.flush(TIMEOUT) == 0
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    try:
        rejected = 0
        deadline = time.monotonic() + TIMEOUT
        while rejected < 4 and time.monotonic() < deadline:
            for message in consumer.poll(0.5):
                if message.error() is None:
                    consumer.acknowledge(message, AcknowledgeType.REJECT)
                    rejected += 1
            consumer.commit_sync(TIMEOUT)
        assert rejected == 4
    finally:
        consumer.close()
    prefix = "kafka_server_sharegroupmetrics_deadletterqueue"
    samples = eventually(lambda: (s := scrape(broker)) and value(
        s, f"{prefix}recordcount_total", group=group) == 4 and s, "4 DLQ records counted")
    produces = value(samples, f"{prefix}totalproducerequests_total", group=group)
    assert 1 <= produces <= 4  # one per acknowledgement that rejected (batched per ack)
    assert value(samples, f"{prefix}failedproducerequests_total", group=group) == 0
