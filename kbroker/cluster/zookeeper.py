"""Start and stop a real Apache ZooKeeper server (standalone) on a free local port.

The jars come from Maven Central through ``tools/zookeeper/pom.xml`` (``scripts/install-test-deps.sh``
copies them into ``tools/zookeeper/target/jars``); ``KBROKER_ZOOKEEPER_JARS`` points elsewhere.
When they are missing, :class:`ZooKeeperNotInstalled` says exactly how to get them.

The server runs with its admin server off (``admin.enableServer=false``: otherwise it binds
port 8080 and two servers on one machine collide) and a tick of 2000 ms, so the session timeouts
it grants range from 4 s (2 ticks) to 40 s (20 ticks); a broker asking for 6 s gets 6 s.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from kbroker.cluster.processes import free_port, start_logged, stop_process

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_JARS = REPO_ROOT / "tools" / "zookeeper" / "target" / "jars"
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
TICK_MS = 2000
INSTALL_HINT = ("run `bash scripts/install-test-deps.sh` from the kbroker checkout, or just "
                "`mvn -q -B -f tools/zookeeper/pom.xml dependency:copy-dependencies` (needs java 11+ "
                "and Maven; fetches Apache ZooKeeper from Maven Central), or point "
                "KBROKER_ZOOKEEPER_JARS at a directory holding zookeeper-3.*.jar and its dependencies")

_LOGBACK = """<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>{log}</file>
    <encoder><pattern>%d{{ISO8601}} %-5level [%thread] %logger{{36}} - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
"""


class ZooKeeperNotInstalled(RuntimeError):
    pass


def jars_dir() -> Path:
    return Path(os.environ.get("KBROKER_ZOOKEEPER_JARS") or DEFAULT_JARS)


def classpath() -> str:
    """The server's classpath, or ZooKeeperNotInstalled naming the install command."""
    directory = jars_dir()
    jars = sorted(directory.glob("*.jar")) if directory.is_dir() else []
    if not any(j.name.startswith("zookeeper-3") for j in jars):
        raise ZooKeeperNotInstalled(f"Apache ZooKeeper's jars are not in {directory}: {INSTALL_HINT}")
    for needed in ("metrics-core", "snappy-java"):
        if not any(j.name.startswith(needed) for j in jars):
            raise ZooKeeperNotInstalled(f"{needed} is missing from {directory} (ZooKeeper's server "
                                        f"needs it): {INSTALL_HINT}")
    if shutil.which("java") is None:
        raise ZooKeeperNotInstalled("java is not on PATH; ZooKeeper needs Java 11 or newer "
                                    "(e.g. apt-get install openjdk-17-jre-headless)")
    return os.pathsep.join(str(j) for j in jars)


def is_serving(port: int, timeout: float = 1.0) -> bool:
    """ZooKeeper's `srvr` four-letter word answers once the server is up (whitelisted below)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(b"srvr")
            return b"Zookeeper version" in s.recv(4096)
    except OSError:
        return False


@dataclass
class ZooKeeperServer:
    """A running standalone server: ``connect`` is its connect string (no chroot)."""

    port: int
    data_dir: Path
    process: subprocess.Popen
    owns_data_dir: bool

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM, then SIGKILL if it lingers; removes a data dir it made itself."""
        stop_process(self.process, timeout)
        if self.owns_data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> "ZooKeeperServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_zookeeper(port: int | None = None, data_dir: str | os.PathLike | None = None,
                    timeout: float = 60.0, heap: str = "256m") -> ZooKeeperServer:
    """Start a server and wait until it answers; raise with its log's tail if it does not."""
    cp = classpath()
    owns = data_dir is None
    data = Path(data_dir or tempfile.mkdtemp(prefix="kbroker-zk-"))
    data.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    (data / "zoo.cfg").write_text(
        f"tickTime={TICK_MS}\n"
        f"dataDir={data / 'data'}\n"
        f"clientPort={port}\n"
        "clientPortAddress=127.0.0.1\n"
        "maxClientCnxns=0\n"
        "admin.enableServer=false\n"
        "4lw.commands.whitelist=srvr,ruok\n"
        "initLimit=5\nsyncLimit=2\n")
    (data / "logback.xml").write_text(_LOGBACK.format(log=data / "zookeeper.log"))
    # C1 only and the serial collector: a local cluster's ZooKeeper (kbroker cluster up, the
    # tests) carries a few brokers' metadata, and C2 compiling for a load that never comes costs
    # more than it saves: start 1.45 -> 0.97 s of CPU, 4,000 kazoo creates and reads 4.4 -> 2.7 s.
    command = ["java", f"-Xmx{heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               f"-Dlogback.configurationFile={data / 'logback.xml'}",
               "-Dzookeeper.admin.enableServer=false",
               "-cp", cp, MAIN_CLASS, str(data / "zoo.cfg")]
    # Its own session, so a Ctrl-C meant for a foreground launcher reaches it only through us.
    process = start_logged(command, data / "zookeeper.out")
    server = ZooKeeperServer(port, data, process, owns)
    deadline = time.monotonic() + timeout
    while not is_serving(port):
        # A server whose start-up thread died keeps its JVM up but never serves: fail fast.
        if (process.poll() is not None or time.monotonic() > deadline
                or " died" in _tail(data / "zookeeper.log", 200)):
            tail = _tail(data / "zookeeper.log") or _tail(data / "zookeeper.out")
            server.stop()
            raise RuntimeError(f"ZooKeeper did not start on port {port}:\n{tail}")
        time.sleep(0.1)
    return server


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
