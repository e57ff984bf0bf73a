"""Benchmark: one broker with many partitions (issue 11 item 2).

For each count (default 10,000, 50,000 and 100,000) on a fresh data dir: create the partitions
(topics of ``--per-topic`` partitions, one CreateTopics each), then measure a Metadata request for
every topic, the broker's RSS and open descriptors; stop cleanly and restart (time to the ready
line), measure again; kill -9 and restart, and check every partition is still there. The
descriptor target is the machine's hard ``RLIMIT_NOFILE`` (20,000 here) at 100,000 partitions,
and a Metadata answer for all of them in under 1 s.

    python tools/bench_partitions.py [--counts 10000 50000 100000] [--per-topic 1000]
    python tools/bench_partitions.py --kafka --counts 10000   # Apache Kafka (KRaft, 1 GiB heap)

With ``--kafka`` the same steps run against Apache Kafka (tools/kafka_ref); it keeps a descriptor
per segment file, so past the hard limit it cannot hold the count at all.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kbroker.testing.procfs import memory_mb  # noqa: E402
from tests.broker_process import BrokerProcess  # noqa: E402
from tests.integration.clients import Wire  # noqa: E402
from tests.metadata.helpers import create_topic  # noqa: E402

METADATA = 3


def descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def metadata_all(wire: Wire) -> tuple[float, float, int]:
    """(seconds to the response's last byte, seconds to decode it, partitions listed) of one
    Metadata request for every topic."""
    from kbroker.protocol.messages.metadata import MetadataRequest

    version = wire.version(METADATA)
    request = MetadataRequest(topics=None, allow_auto_topic_creation=False)
    started = time.monotonic()
    wire.send(METADATA, version, request)
    frame = wire.recv_frame()
    answered = time.monotonic() - started
    _, response = wire.receive(METADATA, version, frame)
    decoded = time.monotonic() - started - answered
    return answered, decoded, sum(len(t.partitions) for t in response.topics)


def measure(broker: BrokerProcess, label: str, expected: int) -> dict:
    with Wire(broker.bootstrap, timeout=600) as wire:
        wire.api_versions()
        trips = []
        for _ in range(5):
            answered, decoded, listed = metadata_all(wire)
            assert listed == expected, f"{label}: Metadata lists {listed} of {expected} partitions"
            trips.append(answered)
    pid = broker.proc.pid
    return {"metadata_s": statistics.median(trips), "metadata_max_s": max(trips),
            "decode_s": decoded, "rss_mb": memory_mb(pid, "VmRSS"), "fds": descriptors(pid)}


class KafkaBroker:
    """Apache Kafka behind the few calls :func:`run` makes of a BrokerProcess."""

    def __init__(self, data_dir: Path):
        from tools.kafka_ref import run_kafka
        self.kafka = run_kafka
        self.data_dir = data_dir
        self.handle = None
        self.proc = None

    @property
    def bootstrap(self) -> str:
        return self.handle.bootstrap

    def start(self, timeout: float = 1800) -> None:
        rk = self.kafka
        if self.handle is None:  # first start: format the storage
            self.handle = rk.start_kafka(port=rk.free_port(), data_dir=str(self.data_dir),
                                         timeout=timeout, temp=False)
        else:  # restart on the same storage, as kafka-server-start.sh would
            ddir = Path(self.handle.data_dir)
            extra = [f"-Dlog4j2.configurationFile={ddir / 'log4j2.properties'}",
                     f"-Dkafka.logs.dir={ddir}"]
            cmd = rk.java_cmd(rk.SERVER_MAIN, [str(ddir / "server.properties")],
                              self.handle.version, None, heap="1G", extra=extra)
            with open(ddir / "kafka.out", "ab") as out:
                proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, start_new_session=True, cwd=ddir)
            self.handle.pid = proc.pid
            deadline = time.monotonic() + timeout
            while not rk.probe("127.0.0.1", self.handle.port):
                assert proc.poll() is None and time.monotonic() < deadline, "Kafka did not start"
                time.sleep(0.2)
        self.proc = type("Pid", (), {"pid": self.handle.pid})

    def stop(self, timeout: float = 600) -> int:
        if self.handle is not None and self.handle.alive():
            self.kafka.stop_pid(self.handle.pid, timeout)
        return 0

    def kill(self) -> None:
        os.kill(self.handle.pid, signal.SIGKILL)
        while self.handle.alive():
            time.sleep(0.1)


def start(broker) -> float:
    started = time.monotonic()
    broker.start(timeout=1800)
    return time.monotonic() - started


def run(count: int, per_topic: int, overrides: dict, kafka: bool = False) -> dict:
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        broker = (KafkaBroker(Path(tmp) / "kafka") if kafka
                  else BrokerProcess(Path(tmp) / "data", overrides))
        result = {"count": count}
        try:
            start(broker)
            started = time.monotonic()
            with Wire(broker.bootstrap, timeout=3600) as wire:
                made = 0
                while made < count:
                    n = min(per_topic, count - made)
                    topic = create_topic(wire, f"bench-{made // per_topic:05d}", n,
                                         timeout_ms=3_600_000)
                    assert topic.error_code == 0, (topic.error_code, topic.error_message)
                    made += n
                # Kafka answers CreateTopics before its broker has the partitions: creation ends
                # when Metadata lists every one of them.
                while metadata_all(wire)[2] < count:
                    time.sleep(0.5)
            result["create_s"] = time.monotonic() - started
            result["served"] = measure(broker, "after create", count)
            started = time.monotonic()
            assert broker.stop(timeout=900) == 0, "clean stop failed"
            result["stop_s"] = time.monotonic() - started
            result["restart_s"] = start(broker)
            result["restarted"] = measure(broker, "after restart", count)
            broker.kill()
            result["kill9_restart_s"] = start(broker)
            result["after_kill9"] = measure(broker, "after kill -9", count)
        finally:
            broker.stop(timeout=600)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[10_000, 50_000, 100_000])
    parser.add_argument("--per-topic", type=int, default=1000)
    parser.add_argument("--kafka", action="store_true", help="run against Apache Kafka instead")
    parser.add_argument("--open-files-max", type=int, default=None,
                        help="log.open.files.max (default: the broker's)")
    args = parser.parse_args()
    overrides = {}
    if args.open_files_max is not None:
        overrides["log.open.files.max"] = args.open_files_max
    print(f"{'Apache Kafka' if args.kafka else 'kbroker'}: hard RLIMIT_NOFILE {resource.getrlimit(resource.RLIMIT_NOFILE)[1]}, "
          f"{os.cpu_count()} CPUs")
    print("partitions | create s | clean stop s | restart s | kill -9 restart s | Metadata (all) ms "
          "median/max | RSS MB | descriptors (served / restarted / after kill -9)")
    for count in args.counts:
        r = run(count, args.per_topic, overrides, args.kafka)
        s, rs, k = r["served"], r["restarted"], r["after_kill9"]
        print(f"{count} | {r['create_s']:.1f} | {r['stop_s']:.1f} | {r['restart_s']:.1f} | "
              f"{r['kill9_restart_s']:.1f} | {s['metadata_s'] * 1000:.0f}/"
              f"{max(s['metadata_max_s'], rs['metadata_max_s'], k['metadata_max_s']) * 1000:.0f} "
              f"| {s['rss_mb']:.0f} / {rs['rss_mb']:.0f} / {k['rss_mb']:.0f} | "
              f"{s['fds']} / {rs['fds']} / {k['fds']}", flush=True)
        print(f"  (client-side decode of the Metadata response: {s['decode_s']:.2f} s, "
              f"not counted above)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
