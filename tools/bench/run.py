#!/usr/bin/env python3
"""kbroker vs Apache Kafka on this machine, in one run, alternating, medians and ratios.

    .venv/bin/python tools/bench/run.py            # the full matrix (3 rounds, ~15-25 min here)
    .venv/bin/python tools/bench/run.py --quick    # 1 round, fewer records (a few minutes)
    .venv/bin/python tools/bench/run.py --only 'produce-perf-1024' --rounds 3

Each round starts a fresh kbroker and a fresh single-node KRaft Kafka (jars from Maven Central,
cached by tools/kafka_ref), one after the other, timing each to its first ApiVersions answer,
then runs every workload against both, alternating which broker goes first. Workloads:

- produce: RECORDS records of 1024 and of 100 bytes, acks=1 and acks=-1, no compression and lz4,
  with Kafka's ProducerPerformance (kafka-tools, client defaults) and with confluent-kafka
  (librdkafka defaults), each into a fresh one-partition topic that is deleted afterwards;
- consume: a 1 GiB topic (1 KiB records, written by confluent-kafka in ~1 MB batches) read back
  with ConsumerPerformance (a consumer group) and with confluent-kafka (assign());
- consume with Java defaults on both sides, the case a harness cannot hide: ProducerPerformance
  with nothing but ``compression.type`` set (16 KiB batches, linger 5 ms; none and lz4) writes the
  topic, ConsumerPerformance with its defaults (1 MiB per partition per fetch) reads it back and
  prints the consumer's own metrics: ``fetch-size-avg`` (bytes per fetch response) and
  ``fetch-latency-avg`` are reported next to the throughput;
- end-to-end latency p50/p99 at a fixed 5,000 records/s (100-byte records, confluent-kafka), and
  Kafka's own EndToEndLatency tool (one 100-byte record at a time, acks=1, send then poll until
  it arrives: avg and p99);
- start-up time, idle RSS (5 s after start-up) and peak RSS (VmHWM at the end of the round).

Throughputs are in MB/s (10^6 bytes of record values per second). The report (markdown) goes to
stdout and, with --report, to a file; raw samples go to --json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import brokers  # noqa: E402
from brokers import REPO, run_kafka  # noqa: E402
import topics  # noqa: E402
from kafka_perf import (CONSUMER_PERF, PRODUCER_PERF, consumed_fields, java_tool,  # noqa: E402
                        produced_per_s)
from topics import create_topic  # noqa: E402

CLIENTS = str(Path(__file__).resolve().parent / "clients.py")
GIB_OF_1K = 1024 * 1024  # 1 KiB records in 1 GiB


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def delete_topic(bootstrap: str, topic: str) -> None:
    topics.delete_topic(bootstrap, topic, log)


# ---------------------------------------------------------------- workloads

def client(args: list[str], timeout: float) -> dict:
    res = subprocess.run([sys.executable, CLIENTS, *map(str, args)], capture_output=True,
                         text=True, timeout=timeout)
    if res.returncode != 0:
        raise RuntimeError(f"clients.py {args[0]} failed:\n{res.stdout[-2000:]}\n"
                           f"{res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def produce_perf(broker, topic, records, size, acks, codec, version) -> float:
    out = java_tool(PRODUCER_PERF, [
        "--topic", topic, "--num-records", str(records), "--record-size", str(size),
        "--throughput", "-1", "--command-property", f"bootstrap.servers={broker.bootstrap}",
        f"acks={acks}", f"compression.type={codec}"], version, timeout=900)
    return produced_per_s(out) * size / 1e6


def produce_confluent(broker, topic, records, size, acks, codec, _version) -> float:
    return client(["produce", broker.bootstrap, topic, records, size, acks, codec],
                  timeout=900)["mb_per_s"]


def consume_perf(broker, topic, records, size, version, group) -> float:
    out = java_tool(CONSUMER_PERF, [
        "--bootstrap-server", broker.bootstrap, "--topic", topic, "--num-records", str(records),
        "--group", group, "--timeout", "60000"], version, timeout=900)
    fields = consumed_fields(out, records)
    # fetch.nMsg.sec: the rate once the group is joined (join time is reported separately).
    return float(fields[9]) * size / 1e6


def consume_java_defaults(broker, topic, records, codec, version, group) -> dict:
    """Fill with ProducerPerformance defaults, read with ConsumerPerformance defaults."""
    out = java_tool(PRODUCER_PERF, [
        "--topic", topic, "--num-records", str(records), "--record-size", "1024",
        "--throughput", "-1", "--command-property", f"bootstrap.servers={broker.bootstrap}",
        f"compression.type={codec}"], version, timeout=900)
    produced = produced_per_s(out) * 1024 / 1e6
    out = java_tool(CONSUMER_PERF, [
        "--bootstrap-server", broker.bootstrap, "--topic", topic, "--num-records", str(records),
        "--group", group, "--timeout", "60000", "--print-metrics"], version, timeout=900)
    fields = consumed_fields(out, records)

    def metric(name):
        # The client-wide figure ("{client-id=...}"), not the per-topic one.
        for ln in out.splitlines():
            if f":{name}:{{client-id=" in ln and "topic=" not in ln:
                return float(ln.rsplit(":", 1)[1])
        raise RuntimeError(f"ConsumerPerformance printed no {name}")

    return {"produce_mb_per_s": produced, "mb_per_s": float(fields[9]) * 1024 / 1e6,
            "fetch_size_avg_kb": metric("fetch-size-avg") / 1e3,
            "fetch_latency_avg_ms": metric("fetch-latency-avg")}


def end_to_end_latency(broker, topic, records, version) -> dict:
    """Kafka's EndToEndLatency: send one record (acks=1), poll until it arrives, repeat."""
    out = java_tool("org.apache.kafka.tools.EndToEndLatency",
                    [broker.bootstrap, topic, str(records), "1", "100"], version, timeout=600)
    avg = float(re.search(r"Avg latency: ([\d.]+) ms", out).group(1))
    p99 = float(re.search(r"99th = ([\d.]+)", out).group(1))
    return {"avg_ms": avg, "p99_ms": p99}


def consume_confluent(broker, topic, records, size, _version, _group) -> float:
    return client(["consume", broker.bootstrap, topic, records], timeout=900)["mb_per_s"]


# ---------------------------------------------------------------- the matrix

def cells(cfg) -> list[dict]:
    """Every workload: a name, how to run it against one broker, and what it yields."""
    out = []
    for tool, fn in (("perf", produce_perf), ("confluent", produce_confluent)):
        for size in (1024, 100):
            for acks in ("1", "-1"):
                for codec in ("none", "lz4"):
                    out.append({"name": f"produce-{tool}-{size}B-acks{acks}-{codec}",
                                "kind": "produce", "fn": fn, "size": size, "acks": acks,
                                "codec": codec})
    out.append({"name": "consume-1GiB", "kind": "consume"})
    for codec in ("none", "lz4"):
        out.append({"name": f"consume-java-defaults-{codec}", "kind": "consume-java",
                    "codec": codec})
    out.append({"name": "latency-5000rps", "kind": "latency"})
    out.append({"name": "latency-e2e-java", "kind": "e2e"})
    return [c for c in out if re.search(cfg.only, c["name"])]


def run_cell(cell, broker, cfg, round_, results) -> None:
    def record(name, value):
        results.setdefault(name, {}).setdefault(broker.name, []).append(value)

    tag = f"r{round_}-{int(time.time() * 1000) % 10**8}"
    if cell["kind"] == "produce":
        topic = f"{cell['name']}-{tag}".replace("=", "")
        create_topic(broker.bootstrap, topic)
        try:
            value = cell["fn"](broker, topic, cfg.records, cell["size"], cell["acks"],
                               cell["codec"], cfg.kafka_version)
        finally:
            delete_topic(broker.bootstrap, topic)
        record(cell["name"], value)
        log(f"{cell['name']} {broker.name}: {value:.1f} MB/s")
    elif cell["kind"] == "consume":
        topic = f"consume-{tag}"
        create_topic(broker.bootstrap, topic)
        try:
            fill = client(["produce", broker.bootstrap, topic, cfg.consume_records, 1024, "1",
                           "none"], timeout=900)
            log(f"filled {topic} on {broker.name} ({fill['mb_per_s']:.0f} MB/s)")
            for tool, fn in (("perf", consume_perf), ("confluent", consume_confluent)):
                name = f"consume-{tool}-1KiB"
                value = fn(broker, topic, cfg.consume_records, 1024, cfg.kafka_version,
                           f"bench-{tag}")
                record(name, value)
                log(f"{name} {broker.name}: {value:.1f} MB/s")
        finally:
            delete_topic(broker.bootstrap, topic)
    elif cell["kind"] == "consume-java":
        codec = cell["codec"]
        topic = f"consume-java-{codec}-{tag}"
        create_topic(broker.bootstrap, topic)
        try:
            res = consume_java_defaults(broker, topic, cfg.consume_records, codec,
                                        cfg.kafka_version, f"bench-java-{tag}")
        finally:
            delete_topic(broker.bootstrap, topic)
        record(f"produce-java-defaults-{codec}", res["produce_mb_per_s"])
        record(f"consume-java-defaults-{codec}", res["mb_per_s"])
        record(f"fetch-size-avg-java-{codec}-kb", res["fetch_size_avg_kb"])
        record(f"fetch-latency-avg-java-{codec}-ms", res["fetch_latency_avg_ms"])
        log(f"java defaults {codec} {broker.name}: produce {res['produce_mb_per_s']:.1f} MB/s, "
            f"consume {res['mb_per_s']:.1f} MB/s, fetch-size-avg "
            f"{res['fetch_size_avg_kb']:.0f} KB, fetch-latency-avg "
            f"{res['fetch_latency_avg_ms']:.2f} ms")
    elif cell["kind"] == "e2e":
        topic = f"e2e-{tag}"
        create_topic(broker.bootstrap, topic)
        try:
            res = end_to_end_latency(broker, topic, cfg.e2e_records, cfg.kafka_version)
        finally:
            delete_topic(broker.bootstrap, topic)
        record("latency-e2e-java-avg-ms", res["avg_ms"])
        record("latency-e2e-java-p99-ms", res["p99_ms"])
        log(f"EndToEndLatency {broker.name}: avg {res['avg_ms']:.2f} ms, p99 {res['p99_ms']} ms")
    elif cell["kind"] == "latency":
        topic = f"latency-{tag}"
        create_topic(broker.bootstrap, topic)
        try:
            res = client(["latency", broker.bootstrap, topic, 5000, cfg.latency_seconds, 100],
                         timeout=300)
        finally:
            delete_topic(broker.bootstrap, topic)
        record("latency-p50-ms", res["p50_ms"])
        record("latency-p99-ms", res["p99_ms"])
        log(f"latency {broker.name}: p50 {res['p50_ms']:.2f} ms, p99 {res['p99_ms']:.2f} ms")


def run(cfg, on_round=None) -> dict:
    results: dict = {}
    matrix = cells(cfg)
    for round_ in range(cfg.rounds):
        order = ["kbroker", "kafka"] if round_ % 2 == 0 else ["kafka", "kbroker"]
        running = {}
        try:
            for name in order:
                kwargs = {"version": cfg.kafka_version} if name == "kafka" else {}
                running[name] = brokers.make(name, **kwargs)
                log(f"round {round_ + 1}: {name} up in "
                    f"{running[name].startup_s * 1000:.0f} ms")
            time.sleep(5)
            for name, broker in running.items():
                results.setdefault("startup-ms", {}).setdefault(name, []).append(
                    broker.startup_s * 1000)
                results.setdefault("idle-rss-mb", {}).setdefault(name, []).append(
                    broker.rss_mb())
            for i, cell in enumerate(matrix):
                for name in (order if i % 2 == 0 else order[::-1]):
                    run_cell(cell, running[name], cfg, round_, results)
            for name, broker in running.items():
                results.setdefault("peak-rss-mb", {}).setdefault(name, []).append(
                    broker.peak_rss_mb())
        finally:
            for broker in running.values():
                broker.stop()
        if on_round is not None:
            on_round(results, round_ + 1)
    return results


# ---------------------------------------------------------------- report

LOWER_IS_BETTER = ("startup-ms", "idle-rss-mb", "peak-rss-mb", "latency-p50-ms",
                   "latency-p99-ms", "latency-e2e-java-avg-ms", "latency-e2e-java-p99-ms",
                   "fetch-latency-avg-java-none-ms", "fetch-latency-avg-java-lz4-ms")


def machine() -> dict:
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem_kb = int(f.readline().split()[1])
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    return {"nproc": os.cpu_count(), "memory_gib": round(mem_kb / 2**20, 1), "cpu": model,
            "kernel": platform.release(), "python": platform.python_version(),
            "java": java.splitlines()[0] if java else "?"}


def _num(v: float) -> str:
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"


def report(results: dict, cfg, started: float, rounds_done: int,
           elapsed_min: float | None = None) -> str:
    m = machine()
    elapsed_min = (time.time() - started) / 60 if elapsed_min is None else elapsed_min
    lines = [
        f"Run {time.strftime('%Y-%m-%d %H:%M', time.localtime(started))}, "
        f"{elapsed_min:.1f} min; {rounds_done} of {cfg.rounds} round(s); produce "
        f"{cfg.records:,} records per cell; consume {cfg.consume_records:,} x 1 KiB; latency "
        f"{cfg.latency_seconds:g} s at 5,000 records/s; Apache Kafka {cfg.kafka_version}.",
        f"Machine: {m['nproc']} CPUs ({m['cpu']}), {m['memory_gib']} GiB, Linux {m['kernel']}, "
        f"Python {m['python']}, {m['java']}.",
        "",
        "| workload | kbroker | Kafka | kbroker / Kafka | samples (kbroker; Kafka) |",
        "|---|---:|---:|---:|---|",
    ]
    for name, per in results.items():
        kb, ka = per.get("kbroker", []), per.get("kafka", [])
        if not kb or not ka:
            continue
        mk, ma = statistics.median(kb), statistics.median(ka)
        unit = ("ms" if name.endswith("-ms") else "MB" if name.endswith("-mb")
                else "KB" if name.endswith("-kb") else "MB/s")
        lines.append(f"| {name} ({unit}) | {_num(mk)} | {_num(ma)} | {mk / ma:.2f} | "
                     f"{', '.join(_num(v) for v in kb)}; "
                     f"{', '.join(_num(v) for v in ka)} |")
    lines.append("")
    lines.append("Throughput ratios above 1 favour kbroker; for start-up, RSS and latency "
                 "(lower is better) ratios below 1 favour kbroker. fetch-size-avg (KB per fetch "
                 "response, the Java consumer's metric) should be equal.")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="1 round, 200k produce records, 256 MiB consume, 5 s latency")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--records", type=int, help="records per produce cell (default 1,000,000)")
    ap.add_argument("--consume-records", type=int, help="1 KiB records to read back")
    ap.add_argument("--latency-seconds", type=float)
    ap.add_argument("--e2e-records", type=int,
                    help="records for Kafka's EndToEndLatency (default 10,000)")
    ap.add_argument("--only", default="", help="regex on workload names")
    ap.add_argument("--kafka-version", default=os.environ.get("KBROKER_KAFKA_VERSION",
                                                               run_kafka.DEFAULT_VERSION))
    ap.add_argument("--json", help="write raw samples here")
    ap.add_argument("--report", help="write the markdown report here too")
    ap.add_argument("--render", metavar="JSON", help="only print the report of an earlier --json")
    cfg = ap.parse_args(argv)
    if cfg.render:
        saved = json.loads(Path(cfg.render).read_text())
        old = argparse.Namespace(**saved["config"])
        print(report(saved["results"], old, saved.get("started", time.time()),
                     saved["rounds_done"], saved.get("elapsed_min")))
        return 0
    quick = cfg.quick
    cfg.rounds = cfg.rounds or (1 if quick else 3)
    cfg.records = cfg.records or (200_000 if quick else 1_000_000)
    cfg.consume_records = cfg.consume_records or (GIB_OF_1K // 4 if quick else GIB_OF_1K)
    cfg.latency_seconds = cfg.latency_seconds or (5 if quick else 15)
    cfg.e2e_records = cfg.e2e_records or (2_000 if quick else 10_000)
    run_kafka.fetch(cfg.kafka_version)  # Maven Central, once; cached in ~/.cache/kbroker
    started = time.time()

    def save(results, rounds_done):
        """After every round, so an interrupted run still leaves its samples."""
        text = report(results, cfg, started, rounds_done)
        if cfg.report:
            Path(cfg.report).write_text(text + "\n")
        if cfg.json:
            Path(cfg.json).write_text(json.dumps(
                {"config": vars(cfg), "machine": machine(), "rounds_done": rounds_done,
                 "started": started, "elapsed_min": (time.time() - started) / 60,
                 "results": results},
                indent=1) + "\n")
        return text

    results = run(cfg, save)
    print(save(results, cfg.rounds))
    return 0


if __name__ == "__main__":
    os.chdir(REPO)
    sys.exit(main())
