"""docker-compose.yml's cluster agrees with `kbroker cluster up` (no Docker engine runs here, so
the file is checked by reading it): the ZooKeeper version and settings, and each broker's
`kbroker serve` settings, which must also load as a valid broker configuration."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from kbroker.cli import cluster_up
from kbroker.cluster import zookeeper
from kbroker.config import BrokerConfig

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
BROKERS = [SERVICES[f"kbroker-{n}"] for n in (1, 2, 3)]


def _settings(serve_args):
    return dict(serve_args[i + 1].split("=", 1)
                for i, a in enumerate(serve_args) if a == "--set")


def test_the_single_node_service_is_still_there():
    single = SERVICES["kbroker"]
    assert single["command"][:2] == ["serve", "--dev"]
    # the image's ENTRYPOINT adds listeners, advertised listeners and http.port from these
    env = single["environment"]
    settings = {**_settings(single["command"]), "listeners": env["KBROKER_LISTENERS"],
                "advertised.listeners": env["KBROKER_ADVERTISED"], "http.port": "8080"}
    BrokerConfig(settings)
    assert "EXTERNAL://localhost:9092" in settings["advertised.listeners"]
    assert "8080:8080" in single["ports"]


def _internal_bootstrap() -> str:
    """Where the pipeline's containers reach the single node: its INTERNAL advertised listener."""
    advertised = SERVICES["kbroker"]["environment"]["KBROKER_ADVERTISED"].split(",")
    return next(a for a in advertised if a.startswith("INTERNAL://")).removeprefix("INTERNAL://")


def test_postgres_is_the_one_debezium_runs_against_in_the_tests():
    from compat_tests.pipeline import postgres

    service = SERVICES["postgres"]
    installed = postgres.bin_dir()
    assert installed is not None, "PostgreSQL is not installed: run scripts/install-test-deps.sh"
    assert service["image"] == f"postgres:{installed.parent.name}"
    command = service["command"]
    settings = dict(command[i + 1].split("=", 1) for i, a in enumerate(command) if a == "-c")
    assert settings["wal_level"] == "logical"  # Debezium's pgoutput needs logical decoding
    assert int(settings["max_replication_slots"]) >= 1


def test_connect_is_the_debezium_and_worker_settings_the_tests_run():
    from compat_tests.pipeline.connect import DEBEZIUM_VERSION, worker_properties

    service = SERVICES["connect"]
    assert service["image"] == f"quay.io/debezium/connect:{DEBEZIUM_VERSION}"
    env = service["environment"]
    assert env["BOOTSTRAP_SERVERS"] == _internal_bootstrap()
    tested = worker_properties(_internal_bootstrap(), env["GROUP_ID"], 8083)
    for key in ("config.storage.topic", "offset.storage.topic", "status.storage.topic",
                "config.storage.replication.factor", "offset.storage.replication.factor",
                "status.storage.replication.factor"):
        assert env[key.upper().replace(".", "_")] == tested[key], key
    assert env["CONNECT_EXACTLY_ONCE_SOURCE_SUPPORT"] == tested["exactly.once.source.support"]
    assert set(service["depends_on"]) == {"kbroker", "postgres"}


def test_the_schema_registry_keeps_its_schemas_on_the_single_node():
    env = SERVICES["schema-registry"]["environment"]
    assert env["SCHEMA_REGISTRY_KAFKASTORE_BOOTSTRAP_SERVERS"] == \
        f"PLAINTEXT://{_internal_bootstrap()}"
    assert env["SCHEMA_REGISTRY_KAFKASTORE_TOPIC_REPLICATION_FACTOR"] == "1"  # one broker


def test_zookeeper_matches_the_jars_and_settings_the_launcher_uses():
    pom = (ROOT / "tools" / "zookeeper" / "pom.xml").read_text()
    version = re.search(r"<zookeeper.version>([^<]+)</zookeeper.version>", pom).group(1)
    zk = SERVICES["zookeeper"]
    assert zk["image"] == f"zookeeper:{version}"
    assert zk["environment"]["ZOO_ADMINSERVER_ENABLED"] == "false"
    assert int(zk["environment"]["ZOO_TICK_TIME"]) == zookeeper.TICK_MS


def test_three_brokers_configured_like_the_launcher():
    ids, ports = [], []
    for service in BROKERS:
        assert service["build"] == "."
        assert service["entrypoint"] == ["kbroker"]
        assert service["depends_on"] == ["zookeeper"]
        command = service["command"]
        assert command[:2] == ["serve", "--dev"]
        settings = _settings(command)
        broker_id = int(settings["broker.id"])
        port = int(service["ports"][0].split(":")[0])
        # Every key the launcher sets, with the launcher's value where it does not depend on
        # the host (listeners and the data dir do).
        launcher = cluster_up.broker_settings("zookeeper:2181" + cluster_up.CHROOT, broker_id,
                                              "0.0.0.0", port, "/var/lib/kbroker/data",
                                              cluster_up.DEV_SESSION_TIMEOUT_MS, 3)
        for key, value in launcher.items():
            if key != "listeners":
                assert settings[key] == value, key
        assert f"EXTERNAL://0.0.0.0:{port}" in settings["listeners"]
        assert f"EXTERNAL://localhost:{port}" in settings["advertised.listeners"]
        assert f"INTERNAL://kbroker-{broker_id}:9092" in settings["advertised.listeners"]
        assert service["ports"] == [f"{port}:{port}"]
        BrokerConfig(settings)  # a valid configuration (listener names, inter-broker listener)
        ids.append(broker_id)
        ports.append(port)
    assert ids == [1, 2, 3] and len(set(ports)) == 3


def test_the_launchers_own_broker_command_is_a_plain_serve():
    command = cluster_up.broker_command("127.0.0.1:2181/kbroker", 2, 9999, "/tmp/d", 6000)
    assert command[1:5] == ["-m", "kbroker", "serve", "--dev"]
    settings = _settings(command)
    assert settings["zookeeper.connect"] == "127.0.0.1:2181/kbroker"
    assert (settings["broker.id"], settings["zookeeper.session.timeout.ms"]) == ("2", "6000")
    assert settings["listeners"] == "PLAINTEXT://127.0.0.1:9999"
    BrokerConfig(settings)


def test_the_launchers_port_plan_for_network_faults():
    """``kbroker cluster up --ports/--advertised-ports/--internal-ports/...`` (the fault tools'
    proxies): clients are told the proxy ports, brokers reach each other on an INTERNAL listener
    through theirs, and the result is a valid configuration."""
    command = cluster_up.broker_command("127.0.0.1:7001/kbroker", 2, 9999, "/tmp/d", 6000,
                                        extra={"min.insync.replicas": "2"}, advertised=8888,
                                        internal=9998, internal_advertised=8887)
    settings = _settings(command)
    assert settings["listeners"] == "PLAINTEXT://127.0.0.1:9999,INTERNAL://127.0.0.1:9998"
    assert settings["advertised.listeners"] == \
        "PLAINTEXT://127.0.0.1:8888,INTERNAL://127.0.0.1:8887"
    assert settings["inter.broker.listener.name"] == "INTERNAL"
    assert settings["min.insync.replicas"] == "2"
    BrokerConfig(settings)
