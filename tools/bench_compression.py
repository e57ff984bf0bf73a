#!/usr/bin/env python3
"""Broker-side compression benchmarks (issue 24): kbroker vs Apache Kafka, in one run.

    .venv/bin/python tools/bench_compression.py                       # 2 rounds, ~8 min here
    .venv/bin/python tools/bench_compression.py --rounds 1 --records 100000 --only zstd

Each round starts a fresh kbroker and a fresh single-node KRaft Kafka (tools/bench/brokers.py),
then for each topic type (``producer``, the baseline that keeps the producer's codec, then
``lz4`` and ``zstd``, which make the broker recompress every batch), against both brokers,
alternating which goes first:

- ``produce-<type>``: Kafka's ProducerPerformance writes ``--records`` 1 KiB records with
  ``compression.type=none`` into a fresh one-partition topic created with
  ``compression.type=<type>`` (client defaults otherwise: acks=all, batch.size 16 KiB,
  linger.ms 5). Its payload is random upper-case letters, which compress to about 60%;
- ``consume-<type>``: Kafka's ConsumerPerformance reads the topic back (a group; the rate once
  joined): what a consumer pays for the recompressed batches (Kafka's consumers decompress);
- ``cpu-produce-<type>``, ``cpu-consume-<type>``: the broker process's CPU seconds (user +
  system, /proc) per GB of record values during that cell; lower is better.

Both brokers use the topic's default levels (KIP-390: lz4 9, Kafka's fast lz4 compressor; zstd
3). Throughput is MB/s of record values (10^6 bytes); the report gives medians and kbroker/Kafka
ratios (> 1 favours kbroker for throughput, < 1 for CPU per GB).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tools" / "bench"))
import brokers  # noqa: E402
from brokers import run_kafka  # noqa: E402
import topics  # noqa: E402
from kafka_perf import (CONSUMER_PERF, PRODUCER_PERF, consumed_fields, java_tool,  # noqa: E402
                        produced_per_s)

from kbroker.testing.procfs import cpu_seconds  # noqa: E402

TOPIC_TYPES = ("producer", "lz4", "zstd")


def log(msg: str) -> None:
    print(f"[bench-compression {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def produce_perf(bootstrap: str, topic: str, records: int, version: str) -> float:
    out = java_tool(PRODUCER_PERF, ["--topic", topic, "--num-records", str(records),
                                    "--record-size", "1024", "--throughput", "-1",
                                    "--command-property", f"bootstrap.servers={bootstrap}",
                                    "compression.type=none"], version)
    return produced_per_s(out) * 1024 / 1e6


def consume_perf(bootstrap: str, topic: str, records: int, version: str) -> float:
    out = java_tool(CONSUMER_PERF, [
        "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(records),
        "--group", f"g-{topic}", "--timeout", "60000"], version)
    return float(consumed_fields(out, records)[9]) * 1024 / 1e6  # fetch.nMsg.sec


def run_round(name: str, cfg, round_: int, results: dict) -> None:
    def record(workload: str, value: float) -> None:
        results.setdefault(workload, {}).setdefault(name, []).append(round(value, 2))
        log(f"  {name} {workload}: {value:.2f}")

    broker = brokers.make(name, **({"version": cfg.version} if name == "kafka" else {}))
    try:
        for topic_type in TOPIC_TYPES:
            if not re.search(cfg.only, topic_type):
                continue
            topic = f"cmp-{topic_type}-{round_}"
            topics.create_topic(broker.bootstrap, topic, {"compression.type": topic_type})
            gigabytes = cfg.records * 1024 / 1e9
            before = cpu_seconds(broker.pid)
            record(f"produce-{topic_type}", produce_perf(broker.bootstrap, topic, cfg.records,
                                                         cfg.version))
            record(f"cpu-produce-{topic_type}", (cpu_seconds(broker.pid) - before) / gigabytes)
            before = cpu_seconds(broker.pid)
            record(f"consume-{topic_type}", consume_perf(broker.bootstrap, topic, cfg.records,
                                                         cfg.version))
            record(f"cpu-consume-{topic_type}", (cpu_seconds(broker.pid) - before) / gigabytes)
            topics.delete_topic(broker.bootstrap, topic, log)
    finally:
        broker.stop()


def fmt(value: float) -> str:
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def render(results: dict, meta: dict) -> str:
    out = [f"Run {meta['started']}, {meta['minutes']} min; {meta['rounds']} round(s); "
           f"{meta['records']:,} x 1 KiB records per cell; Apache Kafka {meta['version']}.", "",
           "| workload | kbroker | Kafka | kbroker / Kafka | samples (kbroker; Kafka) |",
           "|---|---:|---:|---:|---|"]
    for workload, by in results.items():
        unit = "broker CPU-s/GB" if workload.startswith("cpu") else "MB/s"
        k, a = by.get("kbroker", []), by.get("kafka", [])
        mk = statistics.median(k) if k else float("nan")
        ma = statistics.median(a) if a else float("nan")
        out.append(f"| {workload} ({unit}) | {fmt(mk)} | {fmt(ma)} | {mk / ma:.2f} | "
                   f"{', '.join(map(str, k))}; {', '.join(map(str, a))} |")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--only", default=".", help="regex over topic types")
    parser.add_argument("--version", default=run_kafka.DEFAULT_VERSION)
    parser.add_argument("--json", help="write raw samples here")
    cfg = parser.parse_args()
    run_kafka.fetch(cfg.version)
    started = time.time()
    results: dict = {}
    for round_ in range(cfg.rounds):
        order = ("kbroker", "kafka") if round_ % 2 == 0 else ("kafka", "kbroker")
        for name in order:
            log(f"round {round_ + 1}/{cfg.rounds}: {name}")
            run_round(name, cfg, round_, results)
    meta = {"started": time.strftime("%Y-%m-%d %H:%M", time.gmtime(started)),
            "minutes": round((time.time() - started) / 60, 1), "rounds": cfg.rounds,
            "records": cfg.records, "version": cfg.version}
    if cfg.json:
        Path(cfg.json).write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    print(render(results, meta))
    return 0


if __name__ == "__main__":
    os.chdir(REPO)
    sys.exit(main())
