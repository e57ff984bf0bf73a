#!/usr/bin/env python3
"""A 3-node Apache Kafka 3.9 cluster in ZooKeeper mode, the reference the cluster tools are
proven on.

    python tools/kafka_ref/zk_cluster.py up --brokers 3 --json cluster.json

Starts the real Apache ZooKeeper of :mod:`kbroker.cluster.zookeeper` and N ``kafka.Kafka`` JVMs
(jars: ``tools/kafka_ref/zk_mode/pom.xml``, fetched by ``scripts/install-test-deps.sh``), stays in
the foreground and stops everything on SIGINT/SIGTERM, exactly like ``kbroker cluster up``, and
writes the same ``--json`` shape, so every tool in tools/cluster_faults and tools/bench_cluster.py
runs against either::

    {"zookeeper": {"connect": "127.0.0.1:PORT/kafka", "pid": N, "port": PORT, "data_dir": "..."},
     "session_timeout_ms": 6000, "bootstrap_servers": "127.0.0.1:P1,...",
     "brokers": [{"id": 1, "host": "127.0.0.1", "port": P1, "pid": N, "data_dir": "...",
                  "restart_command": ["java", ..., "kafka.Kafka", ".../server.properties"]}, ...],
     "launcher_pid": N}

The PID is the broker's JVM itself; ``restart_command`` restarts it (same properties file, same
data dir). A broker that dies is reported, never restarted.

Network faults need proxies in front of every connection, and the fault tool owns them: it picks
the ports, starts its proxies, then launches with ``--ports`` (where brokers listen),
``--advertised-ports`` (what clients and the other brokers are told: the proxies),
``--internal-ports``/``--internal-advertised-ports`` (a second listener for inter-broker traffic,
so broker-to-broker cuts are separate from client cuts) and ``--broker-zookeeper-ports`` (each
broker reaches ZooKeeper through its own proxy). ``port`` in the JSON is then the advertised port;
``listen_port`` and friends say where the broker really is.

Settings are those the fault matrix asks for: replication factor 3 by default, min.insync.replicas
2, internal topics at RF 3, unclean leader election off, group rebalance delay 0.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
JARS = HERE / "zk_mode" / "target" / "jars"
sys.path.insert(0, str(REPO))

from kbroker.cluster.processes import free_port, start_logged, watch_brokers  # noqa: E402

CHROOT = "/kafka"
DEV_SESSION_TIMEOUT_MS = 6000
INSTALL_HINT = ("run `bash scripts/install-test-deps.sh`, or `mvn -q -B -f "
                "tools/kafka_ref/zk_mode/pom.xml dependency:copy-dependencies` (Kafka 3.9 from "
                "Maven Central), or point KBROKER_KAFKA39_JARS at a directory of its jars")

LOG4J = """log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.org.apache.zookeeper=WARN
"""


def jars_dir() -> Path:
    return Path(os.environ.get("KBROKER_KAFKA39_JARS") or JARS)


def classpath() -> str:
    """Java's directory wildcard: one short entry (restart commands stay readable)."""
    jars = sorted(jars_dir().glob("*.jar")) if jars_dir().is_dir() else []
    if not any(j.name.startswith("kafka_2.13-3.") for j in jars):
        raise SystemExit(f"Apache Kafka 3.9's jars are not in {jars_dir()}: {INSTALL_HINT}")
    return str(jars_dir().resolve() / "*")


def server_properties(broker_id: int, zk_connect: str, data_dir: Path, port: int, advertised: int,
                      internal: int | None, internal_advertised: int | None,
                      session_timeout_ms: int, brokers: int) -> str:
    rf = min(3, brokers)
    props = {
        "broker.id": broker_id,
        "zookeeper.connect": zk_connect,
        "zookeeper.session.timeout.ms": session_timeout_ms,
        "zookeeper.connection.timeout.ms": 30000,
        "log.dirs": data_dir / "logs",
        "num.partitions": 1,
        "default.replication.factor": rf,
        "min.insync.replicas": min(2, rf),
        "offsets.topic.replication.factor": rf,
        "offsets.topic.num.partitions": 10,
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": min(2, rf),
        "transaction.state.log.num.partitions": 10,
        "unclean.leader.election.enable": "false",
        "group.initial.rebalance.delay.ms": 0,
        "auto.create.topics.enable": "true",
        "delete.topic.enable": "true",
        "controlled.shutdown.enable": "true",
    }
    if internal is None:
        props["listeners"] = f"PLAINTEXT://127.0.0.1:{port}"
        props["advertised.listeners"] = f"PLAINTEXT://127.0.0.1:{advertised}"
    else:
        props["listeners"] = f"PLAINTEXT://127.0.0.1:{port},INTERNAL://127.0.0.1:{internal}"
        props["advertised.listeners"] = (f"PLAINTEXT://127.0.0.1:{advertised},"
                                         f"INTERNAL://127.0.0.1:{internal_advertised}")
        props["listener.security.protocol.map"] = "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"
        props["inter.broker.listener.name"] = "INTERNAL"
    return "".join(f"{k}={v}\n" for k, v in props.items())


def broker_command(data_dir: Path, heap: str) -> list[str]:
    java = shutil.which("java") or "java"
    return [java, f"-Xms{heap}", f"-Xmx{heap}", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
            "-Djava.awt.headless=true",
            f"-Dlog4j.configuration=file:{data_dir / 'log4j.properties'}",
            f"-Dkafka.logs.dir={data_dir}", "-cp", classpath(), "kafka.Kafka",
            str(data_dir / "server.properties")]


def _ports(text: str | None, n: int) -> list[int | None]:
    if not text:
        return [None] * n
    ports = [int(p) for p in text.split(",")]
    if len(ports) != n:
        raise SystemExit(f"expected {n} ports, got {text}")
    return ports


def _registered(zk_port: int, ids: list[int], timeout: float) -> None:
    """Wait until every broker is in /brokers/ids and a controller is elected."""
    from kazoo.client import KazooClient
    zk = KazooClient(f"127.0.0.1:{zk_port}{CHROOT}")
    zk.start(timeout=30)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            present = zk.exists("/brokers/ids") and zk.get_children("/brokers/ids")
            if present and sorted(map(int, present)) == sorted(ids) and zk.exists("/controller"):
                return
            time.sleep(0.2)
        raise SystemExit("brokers did not all register in ZooKeeper in time")
    finally:
        zk.stop()
        zk.close()


def _wait_listening(port: int, process: subprocess.Popen, log: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            tail = Path(log).read_text(errors="replace")[-3000:] if os.path.exists(log) else ""
            raise SystemExit(f"Kafka broker on port {port} did not start:\n{tail}")
        time.sleep(0.2)


def up(args) -> int:
    from kbroker.cluster.zookeeper import start_zookeeper

    n = args.brokers
    stopping: list[int] = []
    previous = {s: signal.signal(s, lambda signum, frame: stopping.append(signum))
                for s in (signal.SIGINT, signal.SIGTERM)}
    base = Path(args.data_dir or tempfile.mkdtemp(prefix="kafka-zk-cluster-"))
    base.mkdir(parents=True, exist_ok=True)
    ports = [p or free_port() for p in _ports(args.ports, n)]
    advertised = [a or p for a, p in zip(_ports(args.advertised_ports, n), ports)]
    internal = _ports(args.internal_ports, n)
    internal_adv = [a or i for a, i in zip(_ports(args.internal_advertised_ports, n), internal)]
    zk_via = _ports(args.broker_zookeeper_ports, n)
    processes: list[subprocess.Popen] = []
    brokers: list[dict] = []
    zookeeper = None
    try:
        zookeeper = start_zookeeper(port=args.zookeeper_port, data_dir=base / "zookeeper")
        zk_connect = zookeeper.connect + CHROOT
        for i in range(n):
            broker_id = i + 1
            data_dir = base / f"broker-{broker_id}"
            data_dir.mkdir(parents=True, exist_ok=True)
            connect = f"127.0.0.1:{zk_via[i] or zookeeper.port}{CHROOT}"
            (data_dir / "server.properties").write_text(server_properties(
                broker_id, connect, data_dir, ports[i], advertised[i], internal[i],
                internal_adv[i], args.session_timeout_ms, n))
            (data_dir / "log4j.properties").write_text(LOG4J.format(log=data_dir / "server.log"))
            command = broker_command(data_dir, args.heap)
            process = start_logged(command, data_dir / "broker.log", cwd=data_dir)
            processes.append(process)
            broker = {"id": broker_id, "host": "127.0.0.1", "port": advertised[i],
                      "pid": process.pid, "data_dir": str(data_dir / "logs"),
                      "restart_command": command}
            if advertised[i] != ports[i] or internal[i]:
                broker.update(listen_port=ports[i], internal_port=internal[i],
                              internal_advertised_port=internal_adv[i],
                              zookeeper_port=zk_via[i] or zookeeper.port)
            brokers.append(broker)
        for b, process, port in zip(brokers, processes, ports):
            _wait_listening(port, process, str(Path(b["data_dir"]).parent / "broker.log"), 120)
        _registered(zookeeper.port, [b["id"] for b in brokers], 120)
        bootstrap = ",".join(f"127.0.0.1:{b['port']}" for b in brokers)
        info = {"zookeeper": {"connect": zk_connect, "pid": zookeeper.pid, "port": zookeeper.port,
                              "data_dir": str(zookeeper.data_dir)},
                "session_timeout_ms": args.session_timeout_ms, "bootstrap_servers": bootstrap,
                "brokers": brokers, "launcher_pid": os.getpid(),
                "implementation": "apache-kafka-3.9 (zookeeper mode)"}
        if args.json:
            tmp = args.json + ".tmp"
            Path(tmp).write_text(json.dumps(info, indent=2))
            os.replace(tmp, args.json)
        print(f"kafka zk cluster up: {n} broker(s), ZooKeeper {zk_connect} (pid {zookeeper.pid}), "
              f"session timeout {args.session_timeout_ms} ms\n  bootstrap servers  {bootstrap}",
              flush=True)
        watch_brokers(brokers, processes, stopping, "kafka zk cluster")
        return 0
    finally:
        # Kafka's controlled shutdown needs the others alive: stop brokers in parallel.
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 60
        for process in processes:
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if zookeeper is not None:
            zookeeper.stop()
        if not args.data_dir:
            shutil.rmtree(base, ignore_errors=True)
        for s, handler in previous.items():
            signal.signal(s, handler)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("up", help="start ZooKeeper and N Kafka 3.9 brokers (Ctrl-C stops all)")
    p.add_argument("--brokers", type=int, default=3)
    p.add_argument("--json", metavar="FILE")
    p.add_argument("--data-dir", metavar="DIR", help="default: a temp dir removed at exit")
    p.add_argument("--session-timeout-ms", type=int, default=DEV_SESSION_TIMEOUT_MS)
    p.add_argument("--heap", default="512m")
    p.add_argument("--zookeeper-port", type=int)
    for name in ("ports", "advertised-ports", "internal-ports", "internal-advertised-ports",
                 "broker-zookeeper-ports"):
        p.add_argument(f"--{name}", metavar="P1,P2,...")
    sub.add_parser("classpath", help="print Kafka 3.9's classpath")
    args = ap.parse_args(argv)
    if args.cmd == "classpath":
        print(classpath())
        return 0
    return up(args)


if __name__ == "__main__":
    sys.exit(main())
