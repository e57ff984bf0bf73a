"""One reference Apache Kafka 4.4.0 per test session, for every module that compares kbroker with it.

Starting Kafka (a JVM, storage format, KRaft election) costs 15-20 s on the 2-core CI machine,
and a dozen modules used to start their own. They now ask this pytest plugin (loaded by the root
conftest.py) for the session's broker, started on first use and stopped at the end of the session:

    def brokers(reference_kafka):
        kafka = reference_kafka.get(SETTINGS)   # the module's settings, checked against the broker's

``SHARED_SETTINGS`` is a superset of what those modules set; ``get`` fails the module if it asks for
a setting the shared broker does not have, so a module with special needs (an authorizer, a SASL
listener, a restart) keeps its own broker instead of silently running against other settings.
Modules that share it use unique topic, group and resource names and change no broker setting; one
restarts it cleanly (test_producer_state_loss_reference.py, same data and port) between its steps.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest

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
SHARED_SETTINGS = {
    "group.min.session.timeout.ms": "1000",
    "log.retention.check.interval.ms": "500",
    "log.initial.task.delay.ms": "500",
    "share.coordinator.state.topic.num.partitions": "50",
    "group.streams.initial.rebalance.delay.ms": "0",
}


def _run_kafka():
    if str(ROOT / "tools" / "kafka_ref") not in sys.path:
        sys.path.insert(0, str(ROOT / "tools" / "kafka_ref"))
    import run_kafka
    return run_kafka


class SharedKafka:
    """The session's reference broker, started by the first ``get``."""

    def __init__(self, root: Path):
        self._root = root
        self._started = 0
        self._handle = None
        self._properties: dict[str, str] = {}

    def get(self, settings: dict[str, str] | None = None):
        """The running broker's handle; ``settings`` must all be the broker's own values."""
        run_kafka = _run_kafka()
        if self._handle is not None and not self._handle.alive():
            # a module that restarts it (test_producer_state_loss_reference.py) failed half-way:
            # the next modules get a fresh broker rather than fail for it
            warnings.warn(f"the session's reference Kafka (pid {self._handle.pid}) has died (see "
                          f"{self._handle.data_dir}/kafka.out); starting a new one")
            self._handle = None
        if self._handle is None:
            self._started += 1
            data_dir = self._root / f"kafka{self._started}"  # a dead one's stays to be read
            self._handle = run_kafka.start_kafka(port=run_kafka.free_port(), heap="512M",
                                                 data_dir=str(data_dir), temp=True,
                                                 extra_props=dict(SHARED_SETTINGS))
            text = (data_dir / "server.properties").read_text()
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

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.stop()
            self._handle = None


_session: dict = {"shared": None, "last_user": None}


@pytest.fixture(scope="session")
def reference_kafka(tmp_path_factory):
    """The session's Apache Kafka 4.4.0 (see the module docstring); started by the first ``get``."""
    shared = _session["shared"] = SharedKafka(tmp_path_factory.mktemp("reference-kafka"))
    yield shared
    shared.stop()
    _session["shared"] = None


def pytest_collection_finish(session):
    users = [item for item in session.items
             if "reference_kafka" in getattr(item, "fixturenames", ())]
    _session["last_user"] = users[-1] if users else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield
    # The users come early in a whole run (tests/cli, tests/integration): an idle JVM would take
    # its share of the 2 cores for the rest of it. A later ``get`` would start a new one.
    if item is _session["last_user"] and _session["shared"] is not None:
        _session["shared"].stop()
