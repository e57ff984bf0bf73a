"""Python stream processors on kbroker: a Quix Streams application (``processing_guarantee=
"exactly-once"``, state in RocksDB with its changelog topic) here, and a Faust (``faust-streaming``)
agent with a table in test_faust.py (`make test-long`: over a minute). Each counts records per key through a broker kill -9 and an application kill -9
whose local state is gone (its changelog topic restores it): read_committed, every key's counts
are exactly 1..N, in order.

The applications run in their own virtualenv (``.venv-processors``, pyproject's ``processors``
extra): Quix Streams requires confluent-kafka < 2.13, the test extra pins 2.16.1. If an
application exits (a broker going away can end it), the test starts it again, as a supervisor
would, and says so in the cell's notes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from compat_tests.pipeline.test_connect import create_topic, read_committed
from tests.broker_process import BrokerProcess
from tests.integration.clients import wait_until

ROOT = Path(__file__).resolve().parents[2]
PYTHON = ROOT / ".venv-processors" / "bin" / "python"
HERE = Path(__file__).resolve().parent / "processors"
KEYS, PER_ROUND = 10, 200


def versions() -> dict:
    if not PYTHON.exists():
        return {}
    out = subprocess.run([str(PYTHON), "-c", "import importlib.metadata as m, json; print("
                          "json.dumps({p: m.version(p) for p in ('quixstreams', "
                          "'faust-streaming', 'confluent-kafka', 'aiokafka')}))"],
                         capture_output=True, text=True)
    return json.loads(out.stdout) if out.returncode == 0 else {}


VERSIONS = versions()


class App:
    """One stream-processing application process."""

    def __init__(self, command: list[str], directory: Path, name: str):
        self.command, self.directory, self.name = command, directory, name
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        out = open(self.directory / f"{self.name}.log", "ab")
        self.proc = subprocess.Popen(self.command, stdout=out, stderr=subprocess.STDOUT,
                                     cwd=self.directory, start_new_session=True)
        out.close()
        self.starts += 1

    def keep_running(self) -> None:
        if self.proc.poll() is not None:
            self.start()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def log(self) -> str:
        return (self.directory / f"{self.name}.log").read_text(errors="replace")


def produce_round(bootstrap: str, topic: str, round_: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 5})
    for i in range(PER_ROUND):
        producer.produce(topic, key=f"key-{i % KEYS}", value=f"r{round_}-{i}")
    assert producer.flush(60) == 0


def counts(bootstrap: str, topic: str, parse) -> dict[str, list[int]]:
    """Each key's counts in the output, read_committed, in offset order."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4()}",
                         "isolation.level": "read_committed", "enable.partition.eof": True})
    found: dict[str, list[int]] = {}
    try:
        try:
            consumer.get_watermark_offsets(TopicPartition(topic, 0), 10)
        except KafkaException:
            return found
        consumer.assign([TopicPartition(topic, 0, 0)])
        while True:
            message = consumer.poll(5)
            if message is None or (message.error() and message.error().code() == -191):
                break
            if message.error():
                raise AssertionError(message.error())
            found.setdefault(message.key().decode(), []).append(parse(message.value()))
    finally:
        consumer.close()
    return found


def scenario(tmp_path, cell, make_app, parse, state_dirs=()):
    broker = BrokerProcess(tmp_path / "data", {"group.initial.rebalance.delay.ms": "0",
                                               "transaction.state.log.num.partitions": "1",
                                               "offsets.topic.num.partitions": "1"}).start()
    source, sink = f"in-{uuid.uuid4().hex[:6]}", f"out-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, source)
    create_topic(broker.bootstrap, sink)
    app = make_app(broker.bootstrap, source, sink)
    expected_total = 0

    def settled(total):
        app.keep_running()
        found = counts(broker.bootstrap, sink, parse)
        return sum(len(v) for v in found.values()) >= total and found

    try:
        app.start()
        for round_ in range(3):
            if round_ == 1:  # the broker crashes under the running application
                broker.kill()
                broker.start()
            if round_ == 2:  # the application crashes and loses its local state
                app.kill()
                for directory in state_dirs:
                    shutil.rmtree(directory, ignore_errors=True)
                app.start()
            produce_round(broker.bootstrap, source, round_)
            expected_total += PER_ROUND
            found = wait_until(lambda: settled(expected_total), 150, 1,
                               f"{expected_total} counted records\n{app.log()[-3000:]}")
        per_key = PER_ROUND * 3 // KEYS
        assert {key: values for key, values in found.items()} == \
            {f"key-{k}": list(range(1, per_key + 1)) for k in range(KEYS)}
        cell.note(f"{expected_total} records in 3 rounds; the application ran "
                  f"{app.starts} times ({app.starts - 2} restart(s) after it exited by itself)")
    finally:
        app.kill()
        broker.kill()


def need_processors():
    if not PYTHON.exists() or not VERSIONS:
        pytest.fail("the processors' virtualenv is missing: run scripts/install-test-deps.sh "
                    "(it makes .venv-processors from pyproject's processors extra)")


@pytest.mark.compat("quix streams: exactly-once count with state, broker kill -9, restore",
                    client="quix-streams", version=f"{VERSIONS.get('quixstreams', '?')} "
                    f"(confluent-kafka {VERSIONS.get('confluent-kafka', '?')})")
def test_quix_streams_counts_exactly_once(tmp_path, cell):
    need_processors()
    state = tmp_path / "quix-state"

    def make(bootstrap, source, sink):
        return App([str(PYTHON), str(HERE / "quix_count.py"), bootstrap, source, sink,
                    str(state), f"quix-{uuid.uuid4().hex[:6]}"], tmp_path, "quix")

    scenario(tmp_path, cell, make, lambda v: json.loads(v)["count"], state_dirs=[state])
