"""Kafka Connect workers for the pipeline tests: Apache Kafka Connect in distributed mode
(``org.apache.kafka.connect.cli.ConnectDistributed``; 4.3.1, as tools/connect/pom.xml explains:
connect-file and connect-mirror 4.4.0 are not served here), one JVM per worker, with the jars of
``tools/connect`` (``scripts/install-test-deps.sh`` resolves them from Maven Central), driven
through its REST API the way users drive it (``curl`` is urllib here).

``ConnectWorker.start()`` waits until the worker answers ``GET /`` and has joined its group
(``GET /connectors`` answers); ``kill()`` is a kill -9; ``log()`` reads its log file.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
JARS = ROOT / "tools" / "connect" / "target" / "jars"
PLUGINS = ROOT / "tools" / "connect" / "debezium" / "target" / "plugins"
INSTALL = "run scripts/install-test-deps.sh (it resolves tools/connect/pom.xml)"
CONNECT_VERSION = "4.3.1"  # tools/connect/pom.xml's connect.version
DEBEZIUM_VERSION = "3.6.1.Final"  # tools/connect/debezium/pom.xml

LOG4J2 = """\
status = error
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.reflections.name = org.reflections
logger.reflections.level = ERROR
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def missing() -> str | None:
    """Why workers cannot start here, or None."""
    if not (JARS / f"connect-runtime-{CONNECT_VERSION}.jar").exists():
        return f"Kafka Connect's jars are not resolved: {INSTALL}"
    return None


def worker_properties(bootstrap: str, group: str, port: int, **overrides) -> dict:
    """A distributed worker's settings: string converters, the group's three internal topics,
    KIP-618's exactly-once source support, plugins found through their ServiceLoader manifests
    (KIP-898: no class path scan, seconds faster), and timings short enough for a test (a lost worker's
    tasks move after ``scheduled.rebalance.max.delay.ms``, Kafka's default being five minutes)."""
    props = {
        "bootstrap.servers": bootstrap, "group.id": group,
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        "config.storage.topic": f"{group}-configs", "offset.storage.topic": f"{group}-offsets",
        "status.storage.topic": f"{group}-status",
        "config.storage.replication.factor": "1", "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1", "offset.storage.partitions": "3",
        "status.storage.partitions": "1",
        "listeners": f"http://127.0.0.1:{port}", "rest.advertised.host.name": "127.0.0.1",
        "rest.advertised.port": str(port),
        "plugin.path": str(PLUGINS), "plugin.discovery": "service_load",
        "exactly.once.source.support": "enabled",
        "offset.flush.interval.ms": "500", "scheduled.rebalance.max.delay.ms": "3000",
        "session.timeout.ms": "6000", "heartbeat.interval.ms": "1000",
        "task.shutdown.graceful.timeout.ms": "3000",
    }
    props.update(overrides)
    return props


class ConnectWorker:
    def __init__(self, directory: Path, name: str, properties: dict, heap: str = "384m"):
        self.directory = Path(directory)
        self.name = name
        self.properties = properties
        self.port = int(properties["listeners"].rsplit(":", 1)[1])
        self.heap = heap
        self.proc: subprocess.Popen | None = None
        self.log_path = self.directory / f"{name}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def worker_id(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 90, wait: bool = True) -> "ConnectWorker":
        self.directory.mkdir(parents=True, exist_ok=True)
        props = self.directory / f"{self.name}.properties"
        props.write_text("".join(f"{k}={v}\n" for k, v in self.properties.items()))
        log4j = self.directory / f"{self.name}-log4j2.properties"
        log4j.write_text(LOG4J2.format(log=self.log_path))
        command = ["java", f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                   f"-Dlog4j2.configurationFile={log4j}", "-cp", f"{JARS}/*",
                   "org.apache.kafka.connect.cli.ConnectDistributed", str(props)]
        out = open(self.directory / f"{self.name}.out", "ab")
        self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        out.close()
        if wait:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Connect worker {self.name} exited ({self.proc.returncode})"
                                   f"\n{self.log()[-3000:]}")
            try:
                self.get("/connectors")
                return
            except (OSError, RestError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"Connect worker {self.name} not ready after {timeout} s"
                                   f"\n{self.log()[-3000:]}")
            time.sleep(0.3)

    def log(self) -> str:
        text = ""
        for path in (self.log_path, self.directory / f"{self.name}.out"):
            if path.exists():
                text += path.read_text(errors="replace")
        return text

    def kill(self) -> None:
        """kill -9."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self, timeout: float = 30) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # --- the REST API ---------------------------------------------------------------------------

    def request(self, method: str, path: str, body=None, timeout: float = 30):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json",
                                                  "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as reply:
                text = reply.read().decode()
                return reply.status, json.loads(text) if text else None
        except urllib.error.HTTPError as exc:
            text = exc.read().decode()
            try:
                payload = json.loads(text)
            except ValueError:
                payload = {"message": text}
            raise RestError(exc.code, payload) from None

    def get(self, path: str):
        return self.request("GET", path)[1]

    def put_connector(self, name: str, config: dict):
        return self.request("PUT", f"/connectors/{name}/config", config)[1]

    def status(self, name: str):
        return self.get(f"/connectors/{name}/status")


class RestError(Exception):
    def __init__(self, status: int, payload: dict):
        super().__init__(f"HTTP {status}: {payload.get('message', payload)}")
        self.status = status
        self.payload = payload
