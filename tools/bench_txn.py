#!/usr/bin/env python3
"""Transaction benchmarks, kbroker against Apache Kafka (the reference version of tools/kafka_ref,
4.4.0) in the same run, alternating:

- transactional produce throughput, Java producer, 100 and 10,000 records per transaction
  (100-byte values, 3 partitions); target kbroker/Kafka >= 1.0;
- EndTxn latency p50/p99 (``commitTransaction`` after an explicit flush, so the EndTxn round trip
  and its markers); target kbroker/Kafka <= 1.0;
- read_committed consume throughput (Java consumer over the 100-per-transaction topic, markers
  and all); target >= 1.0.

Needs the Java driver jar (``mvn -B -f compat_tests/java/pom.xml package``) and the Kafka jars
(``python tools/kafka_ref/run_kafka.py fetch``).
Run: ``python tools/bench_txn.py [--records 100000] [--rounds 2]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.broker_process import BrokerProcess  # noqa: E402
from tools.kafka_ref.run_kafka import DEFAULT_VERSION, free_port, start_kafka  # noqa: E402

JAR = ROOT / "compat_tests" / "java" / "target" / "kbroker-java-driver.jar"
PARTITIONS = 3


def java(*args: str) -> dict:
    out = subprocess.run(["java", "-jar", str(JAR), *args], capture_output=True, text=True,
                         timeout=600)
    lines = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
    if out.returncode != 0 or not lines or lines[-1].get("event") == "error":
        raise RuntimeError(f"java {args[0]} failed: {out.stdout[-2000:]} {out.stderr[-2000:]}")
    return lines[-1]


def new_topic(bootstrap: str) -> str:
    topic = f"txn-bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    return topic


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def one_round(bootstrap: str, records: int) -> dict:
    cells = {}
    for per_txn in (100, 10_000):
        topic = new_topic(bootstrap)
        r = java("txn-produce", "--bootstrap", bootstrap, "--topic", topic, "--records",
                 str(records), "--per-txn", str(per_txn), "--transactional-id", f"bench-{topic}")
        cells[f"produce_{per_txn}_rps"] = records / r["seconds"]
        if per_txn == 100:
            cells["endtxn_p50_ms"] = statistics.median(r["endTxnMs"])
            cells["endtxn_p99_ms"] = pct(r["endTxnMs"], 0.99)
            c = java("txn-consume", "--bootstrap", bootstrap, "--topic", topic,
                     "--records", str(records))
            cells["read_committed_rps"] = c["records"] / c["seconds"]
    return cells


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-txn-"))
    kbroker = BrokerProcess(work / "kbroker", {"num.partitions": PARTITIONS}).start()
    kafka = start_kafka(port=free_port(), data_dir=str(work / "kafka"))
    results: dict[str, list[dict]] = {"kbroker": [], "kafka": []}
    try:
        for i in range(args.rounds):
            order = [("kbroker", kbroker.bootstrap), ("kafka", kafka.bootstrap)]
            for name, bootstrap in order if i % 2 == 0 else order[::-1]:
                cells = one_round(bootstrap, args.records)
                results[name].append(cells)
                print(f"round {i} {name}: " + ", ".join(f"{k}={v:,.1f}" for k, v in cells.items()),
                      flush=True)
    finally:
        kbroker.kill()
        kafka.stop()
    print(f"\n| metric | kbroker | Kafka {DEFAULT_VERSION} | ratio |\n| --- | ---: | ---: | ---: |")
    for key in results["kbroker"][0]:
        k = statistics.median(c[key] for c in results["kbroker"])
        a = statistics.median(c[key] for c in results["kafka"])
        print(f"| {key} | {k:,.1f} | {a:,.1f} | {k / a:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
