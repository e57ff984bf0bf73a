#!/usr/bin/env python3
"""Cluster benchmarks, kbroker against a 3-node Apache Kafka 3.9 (ZooKeeper mode) on the same
machine in one run, with ratios (issue 13, Performance):

- ``acks=all`` produce to an RF 3 topic (min.insync.replicas 2): throughput unthrottled, and p99
  latency at a paced rate (``--paced``, 2,000 records/s: unthrottled, latency is only the time a
  record waits in the producer's full buffer), by Kafka's own ProducerPerformance with client
  defaults plus ``acks=all``;
- consume throughput from the leaders, by Kafka's ConsumerPerformance;
- failover: ``kill -9`` of a partition's leader to the next acknowledged ``acks=all`` write, with an
  idempotent confluent-kafka producer writing one record at a time (median of ``--failovers``);
- controlled shutdown: SIGTERM of a leader under the same load, time until leadership moved (read
  from ZooKeeper) and until the process exited, the longest gap between acks, and the client
  errors (delivery failures) seen.

    python tools/bench_cluster.py                       # both clusters (kafka, kbroker)
    python tools/bench_cluster.py --targets kafka       # the reference alone
    python tools/bench_cluster.py --attach kbroker=cluster.json   # a cluster already running

A cluster that cannot run a benchmark (say, kbroker before replication lands) gets its reason in
the table instead of figures; the others still run.
"""
from __future__ import annotations

import argparse
import json
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tools.cluster_faults.cluster import Cluster, alive, attach, launch, wait_for  # noqa: E402
from tools.cluster_faults.drivers import kafka_tools_classpath  # noqa: E402


def java(main: str, args: list[str], timeout: float = 600) -> str:
    command = ["java", "-Xmx512m", "-cp", kafka_tools_classpath(), main] + args
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"{main.rsplit('.', 1)[1]} failed: {result.stderr[-1500:]}")
    return result.stdout


def create_topic(cluster: Cluster, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(topic, partitions, 3,
                                  config={"min.insync.replicas": "2"})])[topic].result(60)
    assignment = wait_for(lambda: cluster.assignment(topic), f"{topic} in ZooKeeper", 60, 0.2)
    if any(len(r) != 3 for r in assignment.values()):
        raise RuntimeError(f"{topic} was not created with 3 replicas: {assignment}")
    cluster.wait_healthy(topic, 60)


_PERF = re.compile(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg "
                   r"latency, ([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th")


def _producer_performance(cluster: Cluster, topic: str, records: int, size: int,
                          throughput: int) -> tuple:
    out = java("org.apache.kafka.tools.ProducerPerformance",
               ["--topic", topic, "--num-records", str(records), "--record-size", str(size),
                "--throughput", str(throughput), "--command-property",
                f"bootstrap.servers={cluster.bootstrap}", "acks=all"])
    m = _PERF.findall(out)
    if not m:
        raise RuntimeError(f"no summary from ProducerPerformance: {out[-500:]}")
    return m[-1]  # sent, records/s, MB/s, avg ms, max ms, p50, p95, p99


def produce(cluster: Cluster, records: int, size: int, paced: int) -> dict:
    """Unthrottled for throughput (its latencies are time queued in a full buffer, reported as
    such); then ``paced`` records/s for 10 s, whose p99 is the cluster's latency."""
    create_topic(cluster, "bench-produce", 6)
    _, rps, mbps, _, _, _, _, p99_saturated = _producer_performance(
        cluster, "bench-produce", records, size, -1)
    create_topic(cluster, "bench-latency", 6)
    _, _, _, avg, mx, p50, _, p99 = _producer_performance(
        cluster, "bench-latency", paced * 10, size, paced)
    return {"produce_records_s": float(rps), "produce_mb_s": float(mbps),
            "produce_p99_saturated_ms": int(p99_saturated), "produce_paced_records_s": paced,
            "produce_p50_ms": int(p50), "produce_p99_ms": int(p99), "produce_max_ms": float(mx)}


def consume(cluster: Cluster, records: int) -> dict:
    out = java("org.apache.kafka.tools.ConsumerPerformance",
               ["--bootstrap-server", cluster.bootstrap, "--topic", "bench-produce",
                "--num-records", str(records), "--timeout", "60000"])
    # start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, ...
    line = [ln for ln in out.splitlines() if ln and ln[0].isdigit()][-1]
    fields = [f.strip() for f in line.split(",")]
    if int(float(fields[4])) < records:
        raise RuntimeError(f"ConsumerPerformance read {fields[4]} of {records} records in 60 s")
    return {"consume_mb_s": float(fields[3]), "consume_records_s": float(fields[5])}


class AckRecorder:
    """An idempotent acks=all confluent-kafka producer: one record in flight at a time (so the
    ack times show exactly when the cluster could take writes), recording ack times and errors."""

    def __init__(self, bootstrap: str, topic: str):
        from confluent_kafka import Producer
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 0,
                                  "message.timeout.ms": 120000, "log_level": 0})
        self.topic = topic
        self.acks: list[float] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            done = threading.Event()

            def delivered(err, msg):
                if err is None:
                    self.acks.append(time.monotonic())
                else:
                    self.errors.append(str(err))
                done.set()
            self.producer.produce(self.topic, str(n).encode(), partition=0, on_delivery=delivered)
            n += 1
            while not done.is_set():
                self.producer.poll(0.005)

    def first_ack_after(self, t0: float, timeout: float = 120) -> float:
        found = wait_for(lambda: next((t for t in self.acks if t > t0), None),
                         "an ack after the fault", timeout, 0.005)
        return found - t0

    def max_gap(self, start: float, end: float) -> float:
        times = [start] + [t for t in self.acks if start < t < end] + [end]
        return max(b - a for a, b in zip(times, times[1:]))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(130)
        self.producer.flush(30)


def failover(cluster: Cluster, repeats: int) -> dict:
    create_topic(cluster, "bench-failover", 1)
    times = []
    for _ in range(repeats):
        cluster.wait_healthy("bench-failover", 180)
        recorder = AckRecorder(cluster.bootstrap, "bench-failover")
        try:
            wait_for(lambda: len(recorder.acks) > 50, "steady acks", 60, 0.2)
            leader = cluster.leader("bench-failover")
            pid = cluster.pids[leader]
            t0 = time.monotonic()
            cluster.signal(leader, signal.SIGKILL)
            # an ack already on its way from the dying leader is not the next write
            dead = wait_for(lambda: not alive(pid) and time.monotonic(), "the kill", 10, 0.001)
            times.append(recorder.first_ack_after(dead) + (dead - t0))
        finally:
            recorder.stop()
        cluster.start(leader)
        cluster.wait_registered(leader)
    cluster.wait_healthy("bench-failover", 180)
    return {"failover_kill9_s": round(statistics.median(times), 2),
            "failover_kill9_all_s": [round(t, 2) for t in times]}


def controlled_shutdown(cluster: Cluster) -> dict:
    if not cluster.assignment("bench-failover"):  # the failover step did not get to make it
        create_topic(cluster, "bench-failover", 1)
    cluster.wait_healthy("bench-failover", 180)
    recorder = AckRecorder(cluster.bootstrap, "bench-failover")
    try:
        wait_for(lambda: len(recorder.acks) > 50, "steady acks", 60, 0.2)
        leader = cluster.leader("bench-failover")
        t0 = time.monotonic()
        cluster.signal(leader, signal.SIGTERM)
        moved = wait_for(lambda: cluster.leader("bench-failover") not in (None, leader)
                         and time.monotonic(), "leadership to move", 120, 0.01) - t0
        pid = cluster.pids[leader]
        exited = wait_for(lambda: not alive(pid) and time.monotonic(), "the broker to exit",
                          120, 0.01) - t0
        time.sleep(1)
        gap = recorder.max_gap(t0, time.monotonic())
    finally:
        recorder.stop()
    cluster.start(leader)
    cluster.wait_registered(leader)
    return {"controlled_leader_moved_s": round(moved, 2), "controlled_exit_s": round(exited, 2),
            "controlled_max_ack_gap_s": round(gap, 3),
            "controlled_client_errors": len(recorder.errors)}


def bench(cluster: Cluster, args) -> dict:
    figures: dict = {}
    for name, step in (("produce", lambda: produce(cluster, args.records, args.record_size,
                                                   args.paced)),
                       ("consume", lambda: consume(cluster, args.records)),
                       ("failover", lambda: failover(cluster, args.failovers)),
                       ("controlled", lambda: controlled_shutdown(cluster))):
        try:
            figures.update(step())
        except Exception as e:  # noqa: BLE001 - reported in the table, the others still run
            figures[f"{name}_error"] = f"{type(e).__name__}: {e}"[:300]
        print(f"  {cluster.name} {name}: "
              + json.dumps({k: v for k, v in figures.items() if k.startswith(name)}), flush=True)
    return figures


# higher is better for throughput, lower for latencies and times
ROWS = [("produce_records_s", "acks=all RF3 produce, records/s", "up"),
        ("produce_mb_s", "acks=all RF3 produce, MB/s", "up"),
        ("produce_p99_saturated_ms", "  its p99, ms (time queued in a full buffer)", "down"),
        ("produce_p50_ms", "acks=all RF3 produce at --paced records/s: p50 latency, ms", "down"),
        ("produce_p99_ms", "  p99 latency, ms", "down"),
        ("consume_records_s", "consume from leaders, records/s", "up"),
        ("consume_mb_s", "consume, MB/s", "up"),
        ("failover_kill9_s", "kill -9 leader -> next acked write, s (median)", "down"),
        ("controlled_leader_moved_s", "controlled shutdown: leadership moved, s", "down"),
        ("controlled_exit_s", "controlled shutdown: broker exited, s", "down"),
        ("controlled_max_ack_gap_s", "controlled shutdown: longest ack gap, s", "down"),
        ("controlled_client_errors", "controlled shutdown: client errors", "down")]


def table(results: dict[str, dict]) -> str:
    names = list(results)
    lines = ["| metric | " + " | ".join(names) + (" | kbroker/kafka |" if
                                                   {"kafka", "kbroker"} <= set(names) else " |"),
             "|---" * (len(names) + 1 + ({"kafka", "kbroker"} <= set(names))) + "|"]
    for key, label, _ in ROWS:
        cells = []
        for name in names:
            value = results[name].get(key)
            error = results[name].get(key.split("_")[0] + "_error")
            cells.append(str(value) if value is not None else ("failed" if error else "-"))
        if {"kafka", "kbroker"} <= set(names):
            a, b = results["kafka"].get(key), results["kbroker"].get(key)
            cells.append(f"{b / a:.2f}x" if isinstance(a, (int, float)) and a and
                         isinstance(b, (int, float)) else "pending")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    for name in names:
        for key, value in results[name].items():
            if key.endswith("_error"):
                lines.append(f"\n{name} {key}: {value}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--targets", default="kafka,kbroker",
                    help="clusters to launch, in order (kafka, kbroker)")
    ap.add_argument("--attach", action="append", default=[], metavar="NAME=JSON",
                    help="a running cluster instead of launching one")
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--paced", type=int, default=2000,
                    help="records/s of the latency run (10 s)")
    ap.add_argument("--failovers", type=int, default=3)
    ap.add_argument("--workdir")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench-cluster-"))
    results: dict[str, dict] = {}
    targets = [(t, None) for t in args.targets.split(",") if t] if not args.attach else []
    targets += [tuple(a.split("=", 1)) for a in args.attach]
    for name, json_file in targets:
        print(f"== {name}", flush=True)
        try:
            cluster = attach(json_file) if json_file else launch(name, workdir)
            cluster.name = name
        except Exception as e:  # noqa: BLE001
            results[name] = {"launch_error": f"{type(e).__name__}: {e}"[:300]}
            continue
        try:
            results[name] = bench(cluster, args)
        finally:
            cluster.close()
    print(table(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
