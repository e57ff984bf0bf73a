"""A local multi-broker cluster for tests: ``kbroker cluster up --brokers N --json F`` as a child.

ZooKeeper plus N broker processes forming one cluster (:mod:`kbroker.cli.cluster_up`). What this
gives a test is the processes: ``bootstrap_servers``, each broker's address and PID,
``kill(broker_id, signal)``, ``restart(broker_id)`` (with the exact command the launcher wrote),
``registered(broker_id)`` (its ZooKeeper registration) and ``stop()``. ``settings`` go to every
broker (the launcher's ``--set``), e.g. ``{"min.insync.replicas": "2"}``.

Needs Apache ZooKeeper's jars (``scripts/install-test-deps.sh``, or ``KBROKER_ZOOKEEPER_JARS``);
without them start-up fails with the launcher's one-line explanation.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kbroker.cluster.processes import stop_process
from kbroker.testing import procfs


class KafkaCluster:
    def __init__(self, brokers: int = 3, *, data_dir: str | Path | None = None,
                 start_timeout: float = 120.0, settings: dict[str, str] | None = None) -> None:
        self.size = brokers
        self.settings = dict(settings or {})
        self._given_data_dir = data_dir
        self.start_timeout = start_timeout
        self.data_dir: Path | None = None
        self.launcher: subprocess.Popen | None = None
        self.info: dict = {}
        self._restarted: dict[int, subprocess.Popen] = {}  # ours to stop: the launcher is not
        self._zk = None  # a kazoo client, to see registrations

    def start(self) -> "KafkaCluster":
        self.data_dir = Path(self._given_data_dir or tempfile.mkdtemp(prefix="kbroker-cluster-"))
        self.data_dir.mkdir(parents=True, exist_ok=True)
        info_file = self.data_dir / "cluster.json"
        info_file.unlink(missing_ok=True)
        log = self.data_dir / "launcher.log"
        command = [sys.executable, "-m", "kbroker", "cluster", "up", "--brokers", str(self.size),
                   "--json", str(info_file), "--data-dir", str(self.data_dir / "nodes")]
        for key, value in self.settings.items():
            command += ["--set", f"{key}={value}"]
        with open(log, "ab") as out:
            self.launcher = subprocess.Popen(
                command,
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)
        deadline = time.monotonic() + self.start_timeout
        while not info_file.exists():
            if self.launcher.poll() is not None or time.monotonic() > deadline:
                output = log.read_text(errors="replace")[-3000:]
                self.stop()
                raise RuntimeError(f"kbroker cluster up did not start; its output:\n{output}")
            time.sleep(0.05)
        self.info = json.loads(info_file.read_text())
        return self

    @property
    def bootstrap_servers(self) -> str:
        return self.info["bootstrap_servers"]

    @property
    def brokers(self) -> list[dict]:
        """``{"id", "host", "port", "pid", "data_dir", "restart_command"}`` per broker."""
        return self.info["brokers"]

    def broker(self, broker_id: int) -> dict:
        for broker in self.brokers:
            if broker["id"] == broker_id:
                return broker
        raise KeyError(f"no broker {broker_id}; the cluster has {[b['id'] for b in self.brokers]}")

    def address(self, broker_id: int) -> str:
        broker = self.broker(broker_id)
        return f"{broker['host']}:{broker['port']}"

    def alive(self, broker_id: int) -> bool:
        pid = self.broker(broker_id)["pid"]
        restarted = self._restarted.get(broker_id)
        if restarted is not None:
            return restarted.poll() is None
        # the launcher's child stays a zombie until the launcher reaps it (every 0.2 s)
        return procfs.alive(pid)

    def kill(self, broker_id: int, sig: int = signal.SIGKILL, timeout: float = 30.0) -> None:
        """Send ``sig`` (SIGKILL: a crash; SIGTERM: a clean shutdown) and wait until it exited."""
        os.kill(self.broker(broker_id)["pid"], sig)
        deadline = time.monotonic() + timeout
        while self.alive(broker_id):
            if time.monotonic() > deadline:
                raise TimeoutError(f"broker {broker_id} still runs {timeout} s after signal {sig}")
            time.sleep(0.05)

    def registered(self, broker_id: int) -> bool:
        """Whether ``/brokers/ids/<id>`` is in ZooKeeper (a killed broker's stays there until its
        session times out: ``session_timeout_ms``)."""
        return self._zookeeper().exists(f"/brokers/ids/{broker_id}") is not None

    def _zookeeper(self):
        if self._zk is None:
            from kazoo.client import KazooClient

            self._zk = KazooClient(hosts=self.info["zookeeper"]["connect"])
            self._zk.start(timeout=30)
        return self._zk

    def restart(self, broker_id: int, timeout: float = 60.0) -> None:
        """Start a dead broker again with the launcher's command; wait until it serves and is
        registered. After a SIGKILL this first waits for ZooKeeper to expire the old session, as
        the broker would refuse to start while its id is still taken."""
        broker = self.broker(broker_id)
        if self.alive(broker_id):
            raise RuntimeError(f"broker {broker_id} is running: kill it first")
        deadline = time.monotonic() + timeout + self.info["session_timeout_ms"] / 1000
        while self.registered(broker_id):
            if time.monotonic() > deadline:
                raise TimeoutError(f"broker {broker_id}'s old registration is still in ZooKeeper")
            time.sleep(0.1)
        ready = Path(broker["data_dir"], "ready.json")
        ready.unlink(missing_ok=True)
        with open(Path(broker["data_dir"], "broker.log"), "ab") as out:
            process = subprocess.Popen(broker["restart_command"], stdout=out,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       start_new_session=True)
        self._restarted[broker_id] = process
        broker["pid"] = process.pid
        while not (ready.exists() and self.registered(broker_id)):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"broker {broker_id} did not restart (exit {process.poll()}); "
                                   f"see {broker['data_dir']}/broker.log")
            time.sleep(0.05)

    def stop(self, timeout: float = 60.0) -> None:
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
            self._zk = None
        for process in self._restarted.values():  # before ZooKeeper goes
            stop_process(process, timeout)
        self._restarted.clear()
        if self.launcher is not None:
            stop_process(self.launcher, timeout)  # it stops its brokers, then ZooKeeper
            self.launcher = None
        if self.data_dir is not None and self._given_data_dir is None:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> "KafkaCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
