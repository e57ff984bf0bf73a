"""The pytest plugin (entry point ``pytest11: kbroker``), loaded automatically once kbroker is
installed.

Fixtures:

* ``kafka_broker`` (session): one real broker per test session (per xdist worker: each worker is
  its own session, so its own broker on its own port and data dir). ``kafka_broker.bootstrap_servers``
  plus the helpers of :class:`kbroker.testing.helpers.KafkaHelpers` (``create_topics``,
  ``produce``, ``consume_all``, ``lag``, ``wait_for_lag_zero``).
* ``kafka_topic`` (function): a factory, ``kafka_topic(partitions=3, config={...})``, creating a
  fresh uniquely named topic on ``kafka_broker`` and returning its name.
* ``fresh_kafka_broker`` (function): a broker of the test's own, settings from
  ``@pytest.mark.kafka_settings({...})`` on top of the session settings;
  ``@pytest.mark.kafka_security(...)`` (the fields of
  :class:`kbroker.testing.security.BrokerSecurity`, or none for all) makes it a secured one.
* ``kafka_secure_broker`` (session): a broker with ``PLAINTEXT``, ``SSL``, ``MTLS``,
  ``SASL_PLAINTEXT`` and ``SASL_SSL`` listeners, PLAIN and SCRAM-SHA-256/512 users ``alice`` and
  ``bob`` (passwords ``alice-secret``, ``bob-secret``) and certificates made at start;
  ``kafka_secure_broker.security.client("SASL_SSL", "SCRAM-SHA-512").librdkafka_config`` is what a
  client needs. It always starts its own broker (``--kafka-bootstrap-servers`` does not apply).
* ``kafka_cluster`` (session, EXPERIMENTAL): ``kbroker cluster up`` (ZooKeeper and
  ``--kafka-cluster-brokers`` brokers, 3 by default) as a child process, started only by tests
  that ask for it: ``bootstrap_servers``, ``brokers`` (id, port, PID, restart command),
  ``kill(broker_id, signal)``, ``restart(broker_id)`` (:class:`kbroker.testing.cluster.KafkaCluster`).

Options (command line, or the ini key in brackets): ``--kafka-broker-mode inprocess|subprocess``
[``kafka_broker_mode``], ``--kafka-setting KEY=VALUE`` repeatable [``kafka_settings``, one per
line], ``--kafka-keep-data`` [``kafka_keep_data``] keeps the data dirs of a session with failures,
``--kafka-bootstrap-servers HOST:PORT`` [``kafka_bootstrap_servers``] uses a running broker
(Apache Kafka, say) instead of starting one.
"""

from __future__ import annotations

import re
import uuid

import pytest

from kbroker.testing.helpers import KafkaHelpers

MODES = ("inprocess", "subprocess")


def pytest_addoption(parser) -> None:
    group = parser.getgroup("kbroker", "kbroker Kafka broker fixtures")
    group.addoption("--kafka-broker-mode", choices=MODES, default=None,
                    help="run kafka_broker in this process (a thread; default) or as a subprocess")
    group.addoption("--kafka-setting", action="append", default=[], metavar="KEY=VALUE",
                    help="broker setting (Kafka's names); repeatable")
    group.addoption("--kafka-keep-data", action="store_true", default=None,
                    help="keep broker data dirs when tests failed (paths are reported)")
    group.addoption("--kafka-bootstrap-servers", default=None, metavar="HOST:PORT",
                    help="use this running broker for kafka_broker instead of starting one")
    group.addoption("--kafka-cluster-brokers", type=int, default=None, metavar="N",
                    help="brokers in kafka_cluster (default 3)")
    parser.addini("kafka_cluster_brokers", "brokers in kafka_cluster", default="3")
    parser.addini("kafka_broker_mode", "inprocess or subprocess", default="inprocess")
    parser.addini("kafka_settings", "broker settings, KEY=VALUE per line", type="linelist", default=[])
    parser.addini("kafka_keep_data", "keep data dirs of failed sessions", type="bool", default=False)
    parser.addini("kafka_bootstrap_servers", "use this running broker", default="")


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "kafka_settings(settings): broker settings (a dict with "
                                       "Kafka's names) for fresh_kafka_broker")
    config.addinivalue_line("markers", "kafka_security(listeners=..., users=..., mechanisms=...): "
                                       "fresh_kafka_broker with SSL, mTLS and SASL listeners")


class BrokerHandle:
    """What the fixtures hand out: the broker's addresses plus the admin helpers."""

    def __init__(self, broker, helpers: KafkaHelpers) -> None:
        self.broker = broker  # KafkaBroker, SubprocessKafkaBroker or None (an external broker)
        self.helpers = helpers
        self.bootstrap_servers = helpers.bootstrap_servers

    @property
    def security(self):
        """:class:`kbroker.testing.security.SecurityInfo` of a secured broker, else None."""
        return getattr(self.broker, "security", None)

    @property
    def data_dir(self):
        return getattr(self.broker, "data_dir", None)

    def __getattr__(self, name):  # create_topics, produce, consume_all, lag, wait_for_lag_zero
        return getattr(self.helpers, name)


def _settings(config) -> dict[str, str]:
    settings = {}
    for item in list(config.getini("kafka_settings")) + list(config.getoption("kafka_setting")):
        key, sep, value = item.partition("=")
        if not sep:
            raise pytest.UsageError(f"kafka setting {item!r}: expected KEY=VALUE")
        settings[key.strip()] = value.strip()
    return settings


def _start(config, settings: dict, data_dir, security=None):
    mode = config.getoption("kafka_broker_mode") or config.getini("kafka_broker_mode")
    if mode not in MODES:
        raise pytest.UsageError(f"kafka_broker_mode {mode!r}: expected one of {', '.join(MODES)}")
    if mode == "subprocess":
        from kbroker.testing.subprocess_broker import SubprocessKafkaBroker

        return SubprocessKafkaBroker(settings, data_dir=data_dir, security=security).start()
    from kbroker.testing.inprocess import KafkaBroker

    return KafkaBroker(settings, data_dir=data_dir, security=security).start()


def _keep_data(config) -> bool:
    option = config.getoption("kafka_keep_data")
    return bool(option) if option is not None else config.getini("kafka_keep_data")


def _finish(request, broker, data_dir, failed: bool) -> None:
    import shutil

    broker.stop()
    if failed and _keep_data(request.config):
        request.config.stash.setdefault(_KEPT, []).append(str(data_dir))
    else:
        shutil.rmtree(data_dir, ignore_errors=True)


_KEPT = pytest.StashKey[list]()


def pytest_terminal_summary(terminalreporter, config) -> None:
    for path in config.stash.get(_KEPT, []):
        terminalreporter.write_line(f"kbroker: kept broker data of a failed run in {path}")


@pytest.fixture(scope="session")
def kafka_broker(request, tmp_path_factory):
    config = request.config
    external = config.getoption("kafka_bootstrap_servers") or config.getini("kafka_bootstrap_servers")
    if external:
        helpers = KafkaHelpers(external)
        yield BrokerHandle(None, helpers)
        helpers.close()
        return
    data_dir = tmp_path_factory.mktemp("kafka-broker", numbered=True)
    broker = _start(config, _settings(config), data_dir)
    helpers = KafkaHelpers(broker.bootstrap_servers)
    try:
        yield BrokerHandle(broker, helpers)
    finally:
        helpers.close()
        _finish(request, broker, data_dir, request.session.testsfailed > 0)


@pytest.fixture(scope="session")
def kafka_secure_broker(request, tmp_path_factory):
    """A session broker with every secured listener kind (see the module docstring)."""
    data_dir = tmp_path_factory.mktemp("kafka-secure-broker", numbered=True)
    broker = _start(request.config, _settings(request.config), data_dir, security=True)
    helpers = KafkaHelpers(broker.bootstrap_servers)
    try:
        yield BrokerHandle(broker, helpers)
    finally:
        helpers.close()
        _finish(request, broker, data_dir, request.session.testsfailed > 0)


@pytest.fixture(scope="session")
def kafka_cluster(request):
    """ZooKeeper and N broker processes (experimental: no replication yet), for tests that ask."""
    from kbroker.testing.cluster import KafkaCluster

    size = request.config.getoption("kafka_cluster_brokers") or int(
        request.config.getini("kafka_cluster_brokers"))
    cluster = KafkaCluster(size).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def fresh_kafka_broker(request, tmp_path):
    """A broker for this test alone (``@pytest.mark.kafka_settings({...})`` adds settings)."""
    settings = _settings(request.config)
    for marker in reversed(list(request.node.iter_markers("kafka_settings"))):
        settings.update({k: str(v) for k, v in (marker.args[0] if marker.args else marker.kwargs).items()})
    security = None
    marker = request.node.get_closest_marker("kafka_security")
    if marker is not None:
        from kbroker.testing.security import BrokerSecurity

        security = BrokerSecurity(*marker.args, **marker.kwargs)
    data_dir = tmp_path / "kafka-broker"
    data_dir.mkdir()
    broker = _start(request.config, settings, data_dir, security)
    helpers = KafkaHelpers(broker.bootstrap_servers)
    try:
        yield BrokerHandle(broker, helpers)
    finally:
        helpers.close()
        report = getattr(request.node, "_kbroker_call_report", None)
        _finish(request, broker, data_dir, failed=report is not None and report.failed)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item._kbroker_call_report = report
    return report


@pytest.fixture
def kafka_topic(request, kafka_broker):
    """``kafka_topic(partitions=1, config=None) -> name``: a new topic named after the test."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name)[:150]

    def create(partitions: int = 1, config: dict | None = None, replication_factor: int = 1) -> str:
        name = f"{base}-{uuid.uuid4().hex[:8]}"
        kafka_broker.create_topics(name, partitions=partitions, configs=config,
                                   replication_factor=replication_factor)
        return name

    return create
