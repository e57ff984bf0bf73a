"""One reference Apache Kafka 4.4.0 per test run, shared by every module (and every xdist worker)
that compares kbroker with it.

Starting Kafka (a JVM, storage format, KRaft election) costs 15-20 s of CPU on the 2-core CI
machine, and a dozen modules used to start their own; under pytest-xdist each worker would start
one again. They now ask this pytest plugin (loaded by the root conftest.py) for the run's broker,
started by the first worker that needs it and stopped when the run ends:

    def brokers(reference_kafka):
        kafka = reference_kafka.get(SETTINGS)   # the module's settings, checked against the broker's

The broker's handle is kept in the run's directory (tests/parallel.py), and a lock file there makes
sure one worker starts it while the others wait and attach. The run's process (the xdist
controller, or pytest itself without workers) stops it at the end.

``SHARED_SETTINGS`` is a superset of what those modules set; ``get`` fails the module if it asks for
a setting the shared broker does not have, so a module with special needs (an authorizer, a SASL
listener, a restart) keeps its own broker instead of silently running against other settings.
Modules that share it use unique topic, group and resource names, change no broker setting and
never stop or restart it (test_producer_state_loss_reference.py restarts a Kafka of its own).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import warnings
from pathlib import Path

import pytest

from tests.parallel import flock, is_worker, run_dir, run_known

ROOT = Path(__file__).resolve().parents[1]

# Beyond run_kafka's defaults (one partition everywhere, rebalance delay 0):
# - a 1 s minimum session timeout (tests/integration/test_group_edges.py: its 1-3 s sessions); the
#   other modules' groups use sessions of 10 s and more, which both minimums accept;
# - retention checked every 500 ms, the first check 500 ms after a start instead of Kafka's 30 s
#   (test_producer_state_loss_reference.py restarts the broker, then waits for retention to
#   delete a segment); only topics made with a short retention.ms see a difference;
# - no initial rebalance delay for streams groups either (test_streams_reference.py: its groups
#   are answered at once, as kbroker's with the same setting);
# - Kafka's default 50 partitions of __share_group_state, written out so that a module can ask
#   for them (test_share_state_reference.py computes the partition of its records).
# Two log dirs (data, data2), so that moving a replica between them
# (test_log_dir_moves_reference.py) can be compared; partitions are spread over both.
LOG_DIR_COUNT = 2
SHARED_SETTINGS = {
    "group.min.session.timeout.ms": "1000",
    "log.retention.check.interval.ms": "500",
    "log.initial.task.delay.ms": "500",
    "share.coordinator.state.topic.num.partitions": "50",
    "group.streams.initial.rebalance.delay.ms": "0",
}


HANDLE_FILE = "reference-kafka.json"


def run_kafka_tool():
    if str(ROOT / "tools" / "kafka_ref") not in sys.path:
        sys.path.insert(0, str(ROOT / "tools" / "kafka_ref"))
    import run_kafka
    return run_kafka


class SharedKafka:
    """The run's reference broker, started by the first ``get`` of any worker."""

    def __init__(self, directory: Path):
        self._dir = directory
        self._handle = None
        self._properties: dict[str, str] = {}

    def _attach_or_start(self):
        run_kafka = run_kafka_tool()
        state = self._dir / HANDLE_FILE
        with flock(self._dir / "reference-kafka.lock"):
            if state.exists():
                handle = run_kafka.KafkaHandle(**json.loads(state.read_text()))
                if handle.alive():
                    return handle
                warnings.warn(f"the run's reference Kafka (pid {handle.pid}) has died (see "
                              f"{handle.data_dir}/kafka.out); starting a new one")
            started = len(list(self._dir.glob("kafka*"))) + 1
            data_dir = self._dir / f"kafka{started}"  # a dead one's stays to be read
            handle = run_kafka.start_kafka(port=run_kafka.free_port(), heap="512M",
                                           data_dir=str(data_dir), temp=True,
                                           extra_props=dict(SHARED_SETTINGS),
                                           log_dir_count=LOG_DIR_COUNT)
            state.write_text(json.dumps(dataclasses.asdict(handle)))
            return handle

    def get(self, settings: dict[str, str] | None = None):
        """The running broker's handle; ``settings`` must all be the broker's own values."""
        if self._handle is None or not self._handle.alive():
            self._handle = self._attach_or_start()
            text = (Path(self._handle.data_dir) / "server.properties").read_text()
            self._properties = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
        different = {key: (value, self._properties.get(key))
                     for key, value in (settings or {}).items()
                     if self._properties.get(key) != value}
        if different:
            pytest.fail("the shared reference Kafka does not have these settings "
                        f"(wanted, has): {different}; add them to tests/shared_kafka.py's "
                        "SHARED_SETTINGS if no other module's answers change, else start a "
                        "broker of the module's own", pytrace=False)
        return self._handle

    def log_dirs(self) -> list[str]:
        """The running broker's ``log.dirs``, in order."""
        self.get()
        return self._properties["log.dirs"].split(",")


@pytest.hookimpl(tryfirst=True)  # before tests/parallel.py removes the run's directory
def pytest_unconfigure(config):
    """The run's process stops the run's reference broker, if one was started."""
    if is_worker(config) or not run_known():
        return
    state = run_dir() / HANDLE_FILE
    if state.exists():
        run_kafka_tool().KafkaHandle(**json.loads(state.read_text())).stop()
        state.unlink()


@pytest.fixture(scope="session")
def reference_kafka():
    """The run's Apache Kafka 4.4.0 (see the module docstring); started by the first ``get``."""
    return SharedKafka(run_dir())
