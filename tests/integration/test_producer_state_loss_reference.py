"""An idempotent producer whose batches the log no longer holds, on kbroker and on Apache Kafka
4.4.0 side by side (issue 21, deliverable 4).

When DeleteRecords or retention moves the log start offset past all of a producer's batches,
the partition keeps the producer in memory, so its next batch continues its sequence. Across a
restart it forgets it: the snapshots at or below the log start offset are dropped and no batch
of the producer is left to replay, so its next batch is the first of a producer the partition
does not know, accepted at any sequence (Kafka since 2.5; librdkafka's tests expect it). Each
scenario writes, moves the log start, restarts both brokers cleanly, and produces again with
the same producer id and epoch; the traces must be equal.
"""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from kbroker.protocol import messages
from tests.broker_process import BrokerProcess
from tests.shared_kafka import SHARED_SETTINGS, run_kafka_tool
from tests.integration.clients import Wire, ensure_topic, wait_for_leaders, wait_until
from tests.integration.test_producer_sequences_reference import Producer, error_name


SETTINGS = {"group.initial.rebalance.delay.ms": "0", "num.partitions": "1",
            "log.retention.check.interval.ms": "500"}
DELETE_RECORDS, LIST_OFFSETS = 21, 2


class Brokers:
    """kbroker and Kafka 4.4.0 with the same settings; ``restart()`` restarts both cleanly."""

    def __init__(self, tmp_path):
        # A Kafka of the module's own: the run's shared one (tests/shared_kafka.py) must never be
        # restarted under the modules using it. Its settings are the shared one's.
        run_kafka = run_kafka_tool()
        self.kafka = run_kafka.start_kafka(port=run_kafka.free_port(), heap="512M",
                                           data_dir=str(tmp_path / "kafka"), temp=True,
                                           extra_props=dict(SHARED_SETTINGS))
        self.kbroker = BrokerProcess(tmp_path / "data", SETTINGS)
        self.kbroker.start()

    def bootstraps(self) -> dict:
        return {"kafka": self.kafka.bootstrap, "kbroker": self.kbroker.bootstrap}

    def restart(self) -> None:
        with ThreadPoolExecutor(2) as pool:
            for done in [pool.submit(self.kafka.restart), pool.submit(self.kbroker.restart)]:
                done.result()

    def stop(self) -> None:
        self.kbroker.kill()
        self.kafka.stop()


@pytest.fixture(scope="module")
def brokers(tmp_path_factory):
    started = Brokers(tmp_path_factory.mktemp("state-loss"))
    yield started
    started.stop()


def both(brokers, step, *args):
    """``step(name, bootstrap, *args)`` on both brokers at once: {name: result}."""
    with ThreadPoolExecutor(2) as pool:
        futures = {name: pool.submit(step, name, bootstrap, *args)
                   for name, bootstrap in brokers.bootstraps().items()}
        return {name: future.result() for name, future in futures.items()}


def assert_same(traces):
    assert traces["kbroker"] == traces["kafka"], \
        "\n".join(f"{name:8} {trace}" for name, trace in traces.items())


def log_start(wire: Wire, topic: str) -> int:
    return wire.list_offset(topic, 0, -2).offset


@pytest.mark.parametrize("how", ["delete_records", "retention"])
def test_a_producer_the_log_no_longer_holds(brokers, how):
    topic = f"loss-{how}-{uuid.uuid4().hex[:6]}"
    producers: dict = {}

    def write(name, bootstrap):
        config = {"retention.ms": "1000", "segment.ms": "200"} if how == "retention" else {}
        ensure_topic(bootstrap, topic, config=config)
        p = producers[name] = Producer(bootstrap, topic)
        return [p.produce(0), p.produce(3)]

    def move_log_start(name, bootstrap):
        p = producers[name]
        if how == "delete_records":
            cls = messages.request_class(DELETE_RECORDS)
            deleted = p.wire.call(DELETE_RECORDS, 2, cls(timeout_ms=10000, topics=[
                cls.DeleteRecordsTopic(name=topic, partitions=[
                    cls.DeleteRecordsPartition(partition_index=0, offset=-1)])]))
            return error_name(deleted.topics[0].partitions[0].error_code)
        # Another producer's batch after segment.ms rolls the segment; retention then deletes
        # the producer's segment once it is older than retention.ms, and then the other one
        # (an expired active segment rolls and goes too). Waiting for both keeps the restart
        # deterministic: the clean-shutdown snapshot is taken at the log end, and a snapshot
        # above the log start still holds the first producer, on Kafka as on kbroker
        # (truncateAndReload drops only snapshots at or below the log start).
        time.sleep(0.5)
        other = Producer(bootstrap, topic)
        other.produce(0)
        log_end = p.wire.list_offset(topic, 0, -1).offset
        wait_until(lambda: log_start(p.wire, topic) >= log_end, 30, 0.2,
                   f"retention to delete every segment of {topic} on {name}")
        return "moved"

    def produce_again(name, bootstrap, *seqs):
        old = producers[name]
        p = Producer.__new__(Producer)
        p.wire, p.topic, p.transactional_id = Wire(bootstrap, timeout=30), topic, None
        p.pid, p.epoch, p.base = old.pid, old.epoch, old.base
        return [(seq, p.produce(seq)) for seq in seqs]

    assert_same(both(brokers, write))
    assert_same(both(brokers, move_log_start))
    brokers.restart()
    for bootstrap in brokers.bootstraps().values():
        wait_for_leaders(bootstrap, topic, 1, timeout=60)
    # A gap: refused from a producer the partition knows, accepted from one it forgot.
    assert_same(both(brokers, produce_again, 10, 13, 20))
