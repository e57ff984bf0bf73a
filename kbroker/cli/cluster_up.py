"""``kbroker cluster up --brokers N``: a real ZooKeeper and N broker processes on free local ports.

Starts Apache ZooKeeper (:mod:`kbroker.cluster.zookeeper`, admin server off) and N brokers, each a
plain ``kbroker serve --set zookeeper.connect=...`` process (the PID written is the broker's),
prints the bootstrap servers and stays in the foreground; SIGINT or SIGTERM stops the brokers
(SIGTERM: controlled shutdown, then a clean one) and then ZooKeeper. A broker that dies is
reported, never restarted: tests restart it with the exact ``restart_command`` from
``--json FILE``::

    {"zookeeper": {"connect": "127.0.0.1:PORT/kbroker", "pid": N, "port": PORT},
     "session_timeout_ms": 6000, "bootstrap_servers": "127.0.0.1:P1,...",
     "brokers": [{"id": 1, "host": "127.0.0.1", "port": P1, "pid": N, "data_dir": "...",
                  "restart_command": ["python", "-m", "kbroker", "serve", ...]}, ...]}

The brokers form one cluster through ZooKeeper: shared topics placed over the brokers with their
replication factor, one controller electing leaders when a broker goes, and the internal topics
at ``min(3, N)`` replicas (``offsets.topic.replication.factor``,
``transaction.state.log.replication.factor``, ``schema.registry.topic.replication.factor``). Each
broker serves the schema registry (dev mode: 8081 for the first, free ports for the others); the
JSON names each broker's ``schema_registry`` URL. docker-compose.yml runs the same brokers (a test
checks they agree). ``--set KEY=VALUE`` (repeatable) adds a setting to every broker.

A port plan puts proxies the caller owns on every link, for network faults
(tools/cluster_faults, the same flags as tools/kafka_ref/zk_cluster.py): ``--ports`` (where the
brokers listen), ``--advertised-ports`` (what clients are told: the client proxies),
``--internal-ports``/``--internal-advertised-ports`` (a second listener, ``INTERNAL``, named in
``inter.broker.listener.name``, so broker-to-broker links can be cut apart from clients'),
``--broker-zookeeper-ports`` (each broker's ``zookeeper.connect`` goes through its own proxy) and
``--zookeeper-port``. The JSON's ``port`` is then the advertised port, and ``listen_port``,
``internal_port``, ``internal_advertised_port`` and ``zookeeper_port`` say where things really are.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The dev default: short, so tests see a dead broker quickly; ZooKeeper's minimum at its default
# 2 s tick is 4 s.
DEV_SESSION_TIMEOUT_MS = 6000
CHROOT = "/kbroker"


def register(cluster_sub) -> None:
    p = cluster_sub.add_parser(
        "up", help="start ZooKeeper and N brokers locally (Ctrl-C stops all)",
        description=__doc__.split("\n\n")[0])
    p.add_argument("--brokers", type=int, default=3, metavar="N", help="number of brokers (3)")
    p.add_argument("--json", metavar="FILE", help="write ports, PIDs and restart commands here")
    p.add_argument("--data-dir", metavar="DIR",
                   help="where ZooKeeper's and the brokers' data go (default: a temp dir, removed "
                        "at exit)")
    p.add_argument("--session-timeout-ms", type=int, default=DEV_SESSION_TIMEOUT_MS,
                   help=f"zookeeper.session.timeout.ms for the brokers ({DEV_SESSION_TIMEOUT_MS})")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="settings",
                   help="a broker setting for every broker (repeatable)")
    plan = p.add_argument_group("port plan (proxies owned by the caller, for network faults)")
    plan.add_argument("--zookeeper-port", type=int, metavar="PORT", help="ZooKeeper's port")
    for name, what in (("ports", "where the brokers listen"),
                       ("advertised-ports", "what clients are told (default: --ports)"),
                       ("internal-ports", "an INTERNAL listener for inter-broker traffic"),
                       ("internal-advertised-ports", "what the other brokers are told for it"),
                       ("broker-zookeeper-ports", "each broker's way to ZooKeeper")):
        plan.add_argument(f"--{name}", metavar="P1,P2,...", help=what)
    p.set_defaults(run=run, help_parser=p)


def broker_settings(zk_connect: str, broker_id: int, host: str, port: int, data_dir: str,
                    session_timeout_ms: int, brokers: int, *, advertised: int | None = None,
                    internal: int | None = None,
                    internal_advertised: int | None = None) -> dict[str, str]:
    """The settings of one broker of the cluster (docker-compose.yml uses the same keys; the
    port plan's listeners are the launcher's alone)."""
    internal_rf = str(min(3, brokers))
    settings = {"zookeeper.connect": zk_connect, "broker.id": str(broker_id),
                "zookeeper.session.timeout.ms": str(session_timeout_ms),
                "listeners": f"PLAINTEXT://{host}:{port}", "log.dirs": data_dir,
                "offsets.topic.replication.factor": internal_rf,
                "transaction.state.log.replication.factor": internal_rf,
                "schema.registry.topic.replication.factor": internal_rf}
    if internal is not None:
        settings["listeners"] += f",INTERNAL://{host}:{internal}"
        settings["listener.security.protocol.map"] = "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"
        settings["inter.broker.listener.name"] = "INTERNAL"
    if advertised is not None or internal is not None:
        listeners = [f"PLAINTEXT://{host}:{advertised or port}"]
        if internal is not None:
            listeners.append(f"INTERNAL://{host}:{internal_advertised or internal}")
        settings["advertised.listeners"] = ",".join(listeners)
    return settings


def broker_command(zk_connect: str, broker_id: int, port: int, data_dir: str,
                   session_timeout_ms: int, brokers: int = 3, extra: dict[str, str] | None = None,
                   **plan: int | None) -> list[str]:
    command = [sys.executable, "-m", "kbroker", "serve", "--dev"]
    settings = broker_settings(zk_connect, broker_id, "127.0.0.1", port, data_dir,
                               session_timeout_ms, brokers, **plan)
    for key, value in {**settings, **(extra or {})}.items():
        command += ["--set", f"{key}={value}"]
    return command + ["--ready-file", os.path.join(data_dir, "ready.json")]


def _ports(option: str, text: str | None, n: int) -> list[int | None]:
    """One port per broker from ``P1,P2,...``, or N Nones when the option is not given."""
    from kbroker.cli.commands.common import CommandError

    if not text:
        return [None] * n
    try:
        ports = [int(p) for p in text.split(",")]
    except ValueError:
        raise CommandError(f"--{option} takes comma-separated port numbers, got {text!r}",
                           2) from None
    if len(ports) != n:
        raise CommandError(f"--{option} needs {n} ports (one per broker), got {text!r}", 2)
    return ports


def _extra_settings(pairs: list[str]) -> dict[str, str]:
    from kbroker.cli.commands.common import CommandError

    extra = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise CommandError(f"--set takes KEY=VALUE, got {pair!r}", 2)
        extra[key.strip()] = value
    return extra


def run(args) -> int:
    from kbroker.cli.commands.common import CommandError
    from kbroker.cluster.processes import free_port, start_logged, stop_process, watch_brokers
    from kbroker.cluster.zookeeper import ZooKeeperNotInstalled, start_zookeeper

    if args.brokers < 1:
        raise CommandError("--brokers must be at least 1", 2)
    n = args.brokers
    listen = _ports("ports", args.ports, n)
    advertised = _ports("advertised-ports", args.advertised_ports, n)
    internal = _ports("internal-ports", args.internal_ports, n)
    internal_advertised = _ports("internal-advertised-ports", args.internal_advertised_ports, n)
    zk_via = _ports("broker-zookeeper-ports", args.broker_zookeeper_ports, n)
    if args.internal_advertised_ports and not args.internal_ports:
        raise CommandError("--internal-advertised-ports needs --internal-ports", 2)
    extra = _extra_settings(args.settings)
    stopping = []

    def on_signal(signum, frame):
        stopping.append(signum)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    base = Path(args.data_dir or tempfile.mkdtemp(prefix="kbroker-cluster-"))
    base.mkdir(parents=True, exist_ok=True)
    brokers: list[dict] = []
    processes: list[subprocess.Popen] = []
    zookeeper = None
    try:
        try:
            zookeeper = start_zookeeper(port=args.zookeeper_port, data_dir=base / "zookeeper")
        except ZooKeeperNotInstalled as exc:
            raise CommandError(str(exc), 1) from None
        zk_connect = zookeeper.connect + CHROOT
        for i in range(n):
            broker_id = i + 1
            port = listen[i] or free_port()
            data_dir = str(base / f"broker-{broker_id}")
            os.makedirs(data_dir, exist_ok=True)
            # through the broker's own proxy when the plan has one, so its link can be cut alone
            connect = (f"127.0.0.1:{zk_via[i]}{CHROOT}" if zk_via[i] else zk_connect)
            command = broker_command(connect, broker_id, port, data_dir, args.session_timeout_ms,
                                     n, extra, advertised=advertised[i], internal=internal[i],
                                     internal_advertised=internal_advertised[i])
            process = start_logged(command, os.path.join(data_dir, "broker.log"))
            processes.append(process)
            broker = {"id": broker_id, "host": "127.0.0.1", "port": advertised[i] or port,
                      "pid": process.pid, "data_dir": data_dir, "restart_command": command}
            if advertised[i] or internal[i] or zk_via[i]:
                broker.update(listen_port=port, internal_port=internal[i],
                              internal_advertised_port=internal_advertised[i] or internal[i],
                              zookeeper_port=zk_via[i] or zookeeper.port)
            brokers.append(broker)
        _wait_ready(brokers, processes, stopping)
        for b in brokers:  # what each broker's ready file says of its registry
            try:
                ready = json.loads(Path(b["data_dir"], "ready.json").read_text())
                b["schema_registry"] = ready.get("schema_registry")
            except (OSError, ValueError):
                b["schema_registry"] = None
        bootstrap = ",".join(f"127.0.0.1:{b['port']}" for b in brokers)
        info = {"zookeeper": {"connect": zk_connect, "pid": zookeeper.pid, "port": zookeeper.port,
                              "data_dir": str(zookeeper.data_dir)},
                "session_timeout_ms": args.session_timeout_ms, "bootstrap_servers": bootstrap,
                "brokers": brokers, "launcher_pid": os.getpid()}
        if args.json:
            tmp = args.json + ".tmp"
            with open(tmp, "w") as f:
                json.dump(info, f, indent=2)
            os.replace(tmp, args.json)
        print(f"kbroker cluster up: {args.brokers} broker(s), ZooKeeper {zk_connect} "
              f"(pid {zookeeper.pid}), session timeout {args.session_timeout_ms} ms")
        print(f"  bootstrap servers  {bootstrap}")
        for b in brokers:
            via = f" (listens on {b['listen_port']})" if "listen_port" in b else ""
            print(f"  broker {b['id']}  127.0.0.1:{b['port']}{via}  pid {b['pid']}  "
                  f"{b['data_dir']}")
        print("  stop               Ctrl-C, or kill", os.getpid(), flush=True)
        watch_brokers(brokers, processes, stopping, "kbroker cluster up")
        return 0
    finally:
        for process in processes:
            stop_process(process, 30.0)
        if zookeeper is not None:
            zookeeper.stop()
        if not args.data_dir:
            import shutil
            shutil.rmtree(base, ignore_errors=True)
        for s, handler in previous.items():
            signal.signal(s, handler)


def _wait_ready(brokers, processes, stopping, timeout: float = 60.0) -> None:
    from kbroker.cli.commands.common import CommandError

    deadline = time.monotonic() + timeout
    for b, process in zip(brokers, processes):
        ready = os.path.join(b["data_dir"], "ready.json")
        while not os.path.exists(ready):
            if stopping:
                return
            if process.poll() is not None or time.monotonic() > deadline:
                tail = Path(b["data_dir"], "broker.log").read_text(errors="replace")[-2000:]
                raise CommandError(f"broker {b['id']} did not start:\n{tail}", 1)
            time.sleep(0.05)
