"""docker-compose.yml's cluster agrees with `kbroker cluster up` (no Docker engine runs here, so
the file is checked by reading it): the ZooKeeper version and settings, and each broker's
command as the member process parses it."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from kbroker.cli import cluster_up
from kbroker.cluster import member, zookeeper

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
BROKERS = [SERVICES[f"kbroker-{n}"] for n in (1, 2, 3)]


def _settings(serve_args):
    return dict(serve_args[i + 1].split("=", 1)
                for i, a in enumerate(serve_args) if a == "--set")


def test_the_single_node_service_is_still_there():
    assert SERVICES["kbroker"]["command"] == ["serve", "--dev"]


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
        assert service["entrypoint"] == ["python", "-m", "kbroker.cluster.member"]
        assert service["depends_on"] == ["zookeeper"]
        args = member._parser().parse_args(service["command"])
        hosts, chroot = args.zookeeper_connect.split("/", 1)
        assert hosts == "zookeeper:2181" and "/" + chroot == cluster_up.CHROOT
        assert args.session_timeout_ms == cluster_up.DEV_SESSION_TIMEOUT_MS
        serve = [a for a in args.serve_args if a != "--"]
        assert serve[:2] == ["serve", "--dev"]
        settings = _settings(serve)
        # Registered endpoint = advertised listener, on the port published to the host.
        assert settings["advertised.listeners"] == f"PLAINTEXT://{args.host}:{args.port}"
        assert settings["listeners"] == f"PLAINTEXT://0.0.0.0:{args.port}"
        assert service["ports"] == [f"{args.port}:{args.port}"]
        ids.append(args.broker_id)
        ports.append(args.port)
    assert ids == [1, 2, 3] and len(set(ports)) == 3


def test_the_launchers_own_broker_command_parses_the_same_way():
    command = cluster_up.broker_command("127.0.0.1:2181/kbroker", 2, 9999, "/tmp/d", 6000)
    assert command[1:3] == ["-m", "kbroker.cluster.member"]
    args = member._parser().parse_args(command[3:])
    assert (args.broker_id, args.port, args.session_timeout_ms) == (2, 9999, 6000)
    assert _settings([a for a in args.serve_args if a != "--"])["listeners"] == \
        "PLAINTEXT://127.0.0.1:9999"
