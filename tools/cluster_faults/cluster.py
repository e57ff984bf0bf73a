"""A cluster as the fault tools see it: whatever ``kbroker cluster up --json`` (or
tools/kafka_ref/zk_cluster.py, same shape) describes, plus the processes the tools restarted.

Truth about leaders, ISRs and the controller is read from ZooKeeper (Kafka's znode layout, which
kbroker's cluster mode writes too), never from a broker that may be paused or partitioned.
"""
from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from kazoo.client import KazooClient

from kbroker.testing.procfs import alive
from kbroker.testing.waiting import wait_for

# kazoo narrates every reconnect at WARNING; ZooKeeper going away is what these tools do on purpose
logging.getLogger("kazoo").setLevel(logging.ERROR)

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


class Cluster:
    """Process control and ZooKeeper-read state of a running cluster."""

    def __init__(self, info: dict, launcher: subprocess.Popen | None = None, proxies=None,
                 name: str = "cluster"):
        self.info = info
        self.name = name
        self.launcher = launcher
        self.proxies = proxies  # a ProxyLoop when the launcher was given proxy ports, else None
        self.session_timeout_s = info["session_timeout_ms"] / 1000
        self.pids = {b["id"]: b["pid"] for b in info["brokers"]}
        self.zk_pid = info["zookeeper"]["pid"]
        self._restarted: list[subprocess.Popen] = []
        self._stale_owner: dict[int, int | None] = {}
        self._zk_server = None
        self._zk: KazooClient | None = None

    # ---------------------------------------------------------------- description
    @property
    def bootstrap(self) -> str:
        return self.info["bootstrap_servers"]

    @property
    def broker_ids(self) -> list[int]:
        return [b["id"] for b in self.info["brokers"]]

    def broker(self, broker_id: int) -> dict:
        return next(b for b in self.info["brokers"] if b["id"] == broker_id)

    # ---------------------------------------------------------------- ZooKeeper reads
    def zk(self) -> KazooClient:
        if self._zk is None:
            self._zk = KazooClient(self.info["zookeeper"]["connect"], timeout=10,
                                   connection_retry={"max_tries": -1, "max_delay": 1})
            self._zk.start(timeout=30)
        return self._zk

    def _read(self, path: str):
        try:
            data, _ = self.zk().get(path)
            return json.loads(data)
        except Exception:
            return None

    def controller(self) -> int | None:
        node = self._read("/controller")
        return node and node.get("brokerid")

    def registered(self) -> list[int]:
        try:
            return sorted(int(i) for i in self.zk().get_children("/brokers/ids"))
        except Exception:
            return []

    def assignment(self, topic: str) -> dict[int, list[int]]:
        node = self._read(f"/brokers/topics/{topic}") or {}
        return {int(p): r for p, r in (node.get("partitions") or {}).items()}

    def state(self, topic: str, partition: int) -> dict | None:
        return self._read(f"/brokers/topics/{topic}/partitions/{partition}/state")

    def leader(self, topic: str, partition: int = 0) -> int | None:
        state = self.state(topic, partition)
        return state["leader"] if state and state["leader"] >= 0 else None

    def follower(self, topic: str, partition: int = 0) -> int | None:
        state = self.state(topic, partition)
        if not state:
            return None
        others = [b for b in state["isr"] if b != state["leader"]]
        return others[0] if others else None

    def healthy(self, topic: str | None = None) -> bool:
        """Every broker alive and registered, a controller, every replica of the topic in ISR."""
        return not self.unhealthy(topic)

    def unhealthy(self, topic: str | None = None) -> str:
        """What keeps the cluster from being healthy (empty when it is), for the error a stuck
        schedule reports."""
        dead = [b for b, pid in self.pids.items() if not alive(pid)]
        if dead or not alive(self.zk_pid):
            return f"dead: brokers {dead}" + ("" if alive(self.zk_pid) else ", ZooKeeper")
        if self.registered() != sorted(self.broker_ids):
            return f"registered {self.registered()} of {sorted(self.broker_ids)}"
        if self.controller() is None:
            return "no controller"
        if topic:
            assignment = self.assignment(topic)
            if not assignment:
                return f"{topic} has no assignment"
            for partition, replicas in sorted(assignment.items()):
                state = self.state(topic, partition)
                if not state or sorted(state["isr"]) != sorted(replicas) or state["leader"] < 0:
                    return f"{topic}-{partition}: replicas {replicas}, state {state}"
        return ""

    def wait_healthy(self, topic: str | None = None, timeout: float = 120) -> None:
        try:
            wait_for(lambda: self.healthy(topic), f"{self.name} healthy ({topic or 'brokers'})",
                     timeout, 0.5)
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}: {self.unhealthy(topic) or 'healthy just now'}") from None

    # ---------------------------------------------------------------- broker processes
    def signal(self, broker_id: int, sig: int) -> None:
        os.kill(self.pids[broker_id], sig)

    def stop(self, broker_id: int, timeout: float = 60) -> float:
        """Clean shutdown (SIGTERM); returns how long the broker took to exit."""
        start = time.monotonic()
        self.signal(broker_id, signal.SIGTERM)
        pid = self.pids[broker_id]
        try:
            wait_for(lambda: not alive(pid), f"broker {broker_id} to stop", timeout, 0.05)
        except TimeoutError:
            os.kill(pid, signal.SIGKILL)
        return time.monotonic() - start

    def kill(self, broker_id: int) -> None:
        self.signal(broker_id, signal.SIGKILL)
        pid = self.pids[broker_id]
        wait_for(lambda: not alive(pid), f"broker {broker_id} to die", 30, 0.02)

    def _registration_owner(self, broker_id: int) -> int | None:
        try:
            stat = self.zk().exists(f"/brokers/ids/{broker_id}")
        except Exception:
            return None
        return stat.ephemeralOwner if stat else None

    def start(self, broker_id: int) -> None:
        """Restart with the cluster's own restart_command; the tools stop it at close()."""
        broker = self.broker(broker_id)
        assert not alive(self.pids[broker_id]), f"broker {broker_id} is still running"
        # A killed broker's registration outlives it until its session expires, and a broker
        # whose id is still registered by another session refuses to start (Kafka exits with
        # NodeExists; so does kbroker). A supervisor would retry; we wait for the expiry first.
        wait_for(lambda: self._registration_owner(broker_id) is None,
                 f"broker {broker_id}'s old registration to expire",
                 3 * self.session_timeout_s + 10, 0.2)
        self._stale_owner[broker_id] = None
        log_path = Path(broker["data_dir"]).parent / f"broker-{broker_id}.restarts.log"
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        with open(log_path, "ab") as log:
            process = subprocess.Popen(broker["restart_command"], stdout=log,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       start_new_session=True, env=env)
        self._restarted.append(process)
        self.pids[broker_id] = process.pid

    def wait_registered(self, broker_id: int, timeout: float = 120) -> None:
        stale = self._stale_owner.get(broker_id)
        wait_for(lambda: self._registration_owner(broker_id) not in (None, stale),
                 f"broker {broker_id} to register", timeout, 0.2)

    def restart_dead(self) -> list[int]:
        """Restart brokers (and ZooKeeper) that died on their own, as a supervisor would (Kafka
        exits when its session expires during start-up, for one); returns the broker ids."""
        if not alive(self.zk_pid):
            self.zk_start()
        dead = [b for b, pid in self.pids.items() if not alive(pid)]
        for broker_id in dead:
            self.start(broker_id)
        for broker_id in dead:
            self.wait_registered(broker_id)
        return dead

    # ---------------------------------------------------------------- ZooKeeper process
    def zk_signal(self, sig: int) -> None:
        os.kill(self.zk_pid, sig)

    def zk_stop(self, hard: bool) -> None:
        pid = self.zk_pid
        os.kill(pid, signal.SIGKILL if hard else signal.SIGTERM)
        wait_for(lambda: not alive(pid), "ZooKeeper to stop", 30, 0.05)

    def zk_start(self) -> None:
        """Same port, same data dir: the brokers' sessions may survive if it is back in time."""
        from kbroker.cluster.zookeeper import start_zookeeper
        zk = self.info["zookeeper"]
        self._zk_server = start_zookeeper(port=zk["port"], data_dir=zk["data_dir"])
        self.zk_pid = self._zk_server.pid

    # ---------------------------------------------------------------- teardown
    def close(self) -> None:
        """Stop what the tools restarted, then the launcher (which stops what it started)."""
        if self._zk is not None:
            try:
                self._zk.stop()
                self._zk.close()
            except Exception:
                pass
        for broker_id, pid in self.pids.items():  # a paused broker would never exit
            if alive(pid):
                os.kill(pid, signal.SIGCONT)
        if alive(self.zk_pid):
            os.kill(self.zk_pid, signal.SIGCONT)
        for process in self._restarted:
            if process.poll() is None:
                process.terminate()
        for process in self._restarted:
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self.launcher is not None and self.launcher.poll() is None:
            self.launcher.terminate()
            try:
                self.launcher.wait(90)
            except subprocess.TimeoutExpired:
                self.launcher.kill()
                self.launcher.wait()
        if self._zk_server is not None:
            self._zk_server.stop()
        if self.proxies is not None:
            self.proxies.close()


def _free_ports(n: int) -> list[int]:
    import socket
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def launch(kind: str, workdir: str | os.PathLike, brokers: int = 3, proxied: bool = False,
           session_timeout_ms: int = 6000, timeout: float = 240,
           settings: dict[str, str] | None = None, ports: list[int] | None = None,
           kafka_heap: str | None = None) -> Cluster:
    """Start a cluster of ``kind`` ("kafka": the Apache Kafka 3.9 reference; "kbroker": ``kbroker
    cluster up``) in the foreground of a launcher process and wait for its JSON.

    ``proxied``: every broker's client listener, inter-broker listener and ZooKeeper connection go
    through proxies owned here (both launchers take the port plan).
    ``settings``: broker settings for every broker (kbroker only: ``cluster up --set``).
    ``ports``: without proxies, ZooKeeper's port then one per broker (a caller with a port
    range of its own), instead of free ephemeral ports.
    ``kafka_heap``: each Kafka broker's heap (zk_cluster.py's ``--heap``; its default is 512m).
    """
    from .proxy import ProxyLoop

    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    info_file = workdir / f"{kind}.json"
    info_file.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proxies = None
    if kind == "kafka":
        command = [PYTHON, str(REPO / "tools/kafka_ref/zk_cluster.py"), "up"]
    elif kind == "kbroker":
        command = [PYTHON, "-m", "kbroker.cli.main", "cluster", "up"]
    else:
        raise ValueError(f"unknown cluster kind {kind!r} (kafka or kbroker)")
    command += ["--brokers", str(brokers), "--json", str(info_file),
                "--data-dir", str(workdir / f"{kind}-data"),
                "--session-timeout-ms", str(session_timeout_ms)]
    if kafka_heap:
        if kind != "kafka":
            raise ValueError("kafka_heap is for Kafka clusters")
        command += ["--heap", kafka_heap]
    if settings:
        if kind != "kbroker":
            raise ValueError("settings are for kbroker clusters (kbroker cluster up --set)")
        for key, value in settings.items():
            command += ["--set", f"{key}={value}"]
    if ports is not None:
        if proxied or len(ports) != 1 + brokers:
            raise ValueError(f"ports: ZooKeeper's and {brokers} brokers', without proxies")
        command += ["--zookeeper-port", str(ports[0]),
                    "--ports", ",".join(map(str, ports[1:]))]
    if proxied:  # both launchers take the same port plan
        (zk_port, *ports) = _free_ports(1 + 6 * brokers)
        listen, advertised = ports[:brokers], ports[brokers:2 * brokers]
        internal, internal_adv = ports[2 * brokers:3 * brokers], ports[3 * brokers:4 * brokers]
        zk_via = ports[4 * brokers:5 * brokers]
        proxies = ProxyLoop()
        for i in range(brokers):
            proxies.add(f"client-{i + 1}", advertised[i], listen[i])
            proxies.add(f"inter-{i + 1}", internal_adv[i], internal[i])
            proxies.add(f"zk-{i + 1}", zk_via[i], zk_port)
        join = lambda ps: ",".join(map(str, ps))  # noqa: E731
        command += ["--zookeeper-port", str(zk_port), "--ports", join(listen),
                    "--advertised-ports", join(advertised), "--internal-ports", join(internal),
                    "--internal-advertised-ports", join(internal_adv),
                    "--broker-zookeeper-ports", join(zk_via)]
    log = open(workdir / f"{kind}-launcher.log", "ab")
    launcher = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                                cwd=workdir, stdin=subprocess.DEVNULL)
    log.close()
    try:
        wait_for(lambda: info_file.exists() or launcher.poll() is not None,
                 f"{kind} launcher", timeout, 0.2)
        if launcher.poll() is not None:
            raise RuntimeError(f"{kind} launcher exited {launcher.returncode}: "
                               + (workdir / f"{kind}-launcher.log").read_text()[-3000:])
    except BaseException:
        if launcher.poll() is None:
            launcher.terminate()
            launcher.wait(90)
        if proxies is not None:
            proxies.close()
        raise
    return Cluster(json.loads(info_file.read_text()), launcher, proxies, name=kind)


def attach(json_file: str | os.PathLike) -> Cluster:
    """A cluster someone else launched (its owner stops it); no proxies, so no network faults."""
    return Cluster(json.loads(Path(json_file).read_text()), name=str(json_file))
