"""The two brokers under test, each started fresh with a throwaway data dir.

Start-up time is measured the same way for both: from spawning the server process to the first
answered ApiVersions request (polled every 5 ms over a raw socket). For Kafka the one-off
``StorageTool format`` step runs before the clock starts (it is the equivalent of creating an
empty data dir, which kbroker does itself while starting). After the first answer we wait until a
Metadata request lists a broker, so workloads never race the start-up.
"""

from __future__ import annotations

import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO / "tools" / "kafka_ref"))
sys.path.insert(0, str(REPO))
import run_kafka  # noqa: E402  (stdlib-only helper next door)

from kbroker.cluster.processes import stop_process  # noqa: E402
from kbroker.testing.procfs import memory_mb  # noqa: E402


def api_versions_ok(port: int) -> bool:
    """One ApiVersions v0 round trip with a whole, well-formed answer."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.settimeout(1)
            body = run_kafka.request(s, 18, 0, 7, b"", client=b"bench")
            return struct.unpack_from(">h", body)[0] == 0
    except (OSError, ConnectionError, RuntimeError, struct.error):
        return False


class Broker:
    name = "?"
    proc: subprocess.Popen
    port: int
    startup_s: float

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def rss_mb(self) -> float:
        return memory_mb(self.pid, "VmRSS")

    def peak_rss_mb(self) -> float:
        return memory_mb(self.pid, "VmHWM")

    def _wait_ready(self, started: float, timeout: float = 120.0) -> None:
        deadline = started + timeout
        while not api_versions_ok(self.port):
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited during start-up ({self.proc.returncode})")
            if time.perf_counter() > deadline:
                raise RuntimeError(f"{self.name} did not answer ApiVersions in {timeout}s")
            time.sleep(0.005)
        self.startup_s = time.perf_counter() - started
        while not run_kafka.probe("127.0.0.1", self.port):
            if time.perf_counter() > deadline:
                raise RuntimeError(f"{self.name} lists no broker in Metadata")
            time.sleep(0.05)

    def stop(self) -> None:
        stop_process(self.proc, 60)
        shutil.rmtree(self.data_dir, ignore_errors=True)


class KBroker(Broker):
    name = "kbroker"

    def __init__(self, python: str = sys.executable, extra: list[str] | None = None,
                 port: int | None = None):
        self.port = port or run_kafka.free_port()
        self.data_dir = tempfile.mkdtemp(prefix="kbroker-bench-")
        args = [python, "-m", "kbroker.cli.main", "serve",
                "--set", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                "--set", f"log.dirs={self.data_dir}",
                # the reference Kafka runs its internal topics with one partition, too
                "--set", "offsets.topic.num.partitions=1",
                # ... and joins a new group at once (run_kafka.server_properties)
                "--set", "group.initial.rebalance.delay.ms=0",
                "--log-level", "WARNING"]
        for kv in extra or ():
            args += ["--set", kv]
        self.log = open(Path(self.data_dir).with_suffix(".out"), "wb")
        started = time.perf_counter()
        self.proc = subprocess.Popen(args, cwd=REPO, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        self._wait_ready(started)

    def stop(self) -> None:
        super().stop()
        self.log.close()
        Path(self.log.name).unlink(missing_ok=True)


class Kafka(Broker):
    name = "kafka"

    def __init__(self, version: str = run_kafka.DEFAULT_VERSION, heap: str = "1G",
                 extra_props: dict[str, str] | None = None, port: int | None = None,
                 jvm: list[str] | None = None):
        """``extra_props``: more server.properties entries (e.g. secure listeners, which then
        list PLAINTEXT on ``port`` and CONTROLLER themselves); ``jvm``: more JVM options
        (system properties such as Kafka 4's OAUTHBEARER URL allow-list)."""
        self.version = version
        self.port = port or run_kafka.free_port()
        cport = run_kafka.free_port()
        ddir = Path(tempfile.mkdtemp(prefix="kbroker-bench-kafka-"))
        self.data_dir = str(ddir)
        props = ddir / "server.properties"
        # Deleted topics go at once (default 60 s later), so the disk does not fill up.
        extra = {"log.segment.delete.delay.ms": "0",
                 **{k: v.replace("{controller_port}", str(cport))
                    for k, v in (extra_props or {}).items()}}
        props.write_text(run_kafka.server_properties(self.port, cport, ddir / "data",
                                                     f"127.0.0.1:{self.port}", extra))
        log4j = ddir / "log4j2.properties"
        log4j.write_text(run_kafka.LOG4J2.format(console_level="WARN",
                                                 log_file=ddir / "server.log"))
        jvm = [f"-Dlog4j2.configurationFile={log4j}", f"-Dkafka.logs.dir={ddir}", *(jvm or [])]
        cluster_id = run_kafka.new_cluster_id()
        fmt = run_kafka.java_cmd(run_kafka.STORAGE_MAIN,
                                 ["format", "-t", cluster_id, "-c", str(props)],
                                 version, None, heap="256M", extra=jvm)
        subprocess.run(fmt, check=True, capture_output=True)
        cmd = run_kafka.java_cmd(run_kafka.SERVER_MAIN, [str(props)], version, None, heap=heap,
                                 extra=jvm)
        self.log = open(ddir / "kafka.out", "wb")
        started = time.perf_counter()
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=ddir)
        self._wait_ready(started)

    def stop(self) -> None:
        self.log.close()
        super().stop()


def make(name: str, **kwargs) -> Broker:
    return {"kbroker": KBroker, "kafka": Kafka}[name](**kwargs)
