"""Many partitions on one node (issue 11 item 2), the suite's small version of
tools/bench_partitions.py (which runs 10,000-100,000 and reports the timings).

3,000 partitions in three topics: Metadata lists every one of them; the broker's descriptors stay
bounded by ``log.open.files.max`` rather than growing with partitions (Kafka needs three per
segment); a kill -9 right after the creation (no sync of the new dirs yet) and a clean restart
bring every partition back.
"""

from __future__ import annotations

import os

from tests.broker_process import BrokerProcess
from tests.integration.clients import Wire, broker_tracebacks
from tests.metadata.helpers import create_topic

TOPICS, PER_TOPIC = 3, 1000
MAX_OPEN_FILES = 256
# Listeners, client connections, the lock file, epoll, logging, the interpreter's own.
OTHER_DESCRIPTORS = 100


def descriptors(broker: BrokerProcess) -> int:
    return len(os.listdir(f"/proc/{broker.proc.pid}/fd"))


def listed_partitions(broker: BrokerProcess) -> dict[str, int]:
    with Wire(broker.bootstrap, timeout=60) as wire:
        response = wire.metadata(None)
    return {t.name: len(t.partitions) for t in response.topics if t.name.startswith("wide-")}


def test_three_thousand_partitions_bounded_descriptors_and_restarts(tmp_path):
    broker = BrokerProcess(tmp_path / "data", {"log.open.files.max": MAX_OPEN_FILES}).start()
    expected = {f"wide-{i}": PER_TOPIC for i in range(TOPICS)}
    try:
        with Wire(broker.bootstrap, timeout=600) as wire:
            for name in expected:
                topic = create_topic(wire, name, PER_TOPIC, timeout_ms=600_000)
                assert topic.error_code == 0, topic.error_message
        assert listed_partitions(broker) == expected
        assert descriptors(broker) <= MAX_OPEN_FILES + OTHER_DESCRIPTORS

        broker.kill()  # a crash right after the creation: every partition must come back
        broker.start(timeout=120)
        assert listed_partitions(broker) == expected
        assert descriptors(broker) <= MAX_OPEN_FILES + OTHER_DESCRIPTORS

        assert broker.stop() == 0
        broker.start(timeout=120)
        assert listed_partitions(broker) == expected
        assert descriptors(broker) <= MAX_OPEN_FILES + OTHER_DESCRIPTORS
        assert len(list((tmp_path / "data").glob("wide-*"))) == TOPICS * PER_TOPIC
    finally:
        broker.stop()
    assert not broker_tracebacks(broker)
