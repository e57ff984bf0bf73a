#!/usr/bin/env python3
"""Share groups (KIP-932, issue 23), kbroker against Apache Kafka 4.4.0 (tools/kafka_ref) in one
run: share-consume throughput and the acknowledgement round trip.

A fresh kbroker and a fresh Kafka run side by side, with the same settings (run_kafka's
COMPARABLE_SETTINGS plus one share-state partition on both). The cells are measured one at a time,
alternating brokers, so that one broker's work does not slow the other's measurement; the same
client runs against both:

- throughput: ``--records`` records of ``--size`` bytes are produced (spread evenly over the
  partitions, in log batches of ``BATCH_RECORDS`` records on both brokers) to a topic of 1 and of 12 partitions, then Kafka's own
  ``org.apache.kafka.tools.ShareConsumerPerformance`` (KafkaShareConsumer, implicit
  acknowledgement) reads them all with 1, 3 and 10 consumers (``--threads``), each cell in a
  fresh share group that starts at the earliest offset. Records/s and MB/s are its figures.
  An unmeasured warm-up cell (``--warmup`` records, 12 partitions, 3 consumers) runs first on
  each broker, so that no measured cell times Kafka's cold JVM.
- acknowledgement round trip: a Java KafkaShareConsumer in explicit mode
  (tools/bench/ShareAckLatency.java, ``share.acquire.mode=record_limit``) accepts each poll's
  records (at most 10) and times
  ``commitSync()``; p50/p99 in milliseconds over ``--ack-records`` records.

Output: a table on stdout, ``--json`` (default bench-share.json) and ``--markdown``
(default bench-share.md) with the kbroker/Kafka ratios.

Run: ``python tools/bench_share.py`` (full, about 10 minutes: 200,000 records, 1/3/10 consumers)
or ``python tools/bench_share.py --records 20000 --consumers 1,3`` (smoke, under 2 minutes).
Needs Kafka's jars (``python tools/kafka_ref/run_kafka.py fetch``) and the Java driver jar
(``scripts/install-test-deps.sh``).
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,  # noqa: E402
                                   ConfigResource, NewTopic, ResourceType)

from tests.broker_process import BrokerProcess  # noqa: E402
from tools.kafka_ref.run_kafka import (COMPARABLE_SETTINGS, DEFAULT_VERSION,  # noqa: E402
                                       java_cmd, start_kafka)

SHARE_PERF = "org.apache.kafka.tools.ShareConsumerPerformance"
ACK_PROGRAM = ROOT / "tools" / "bench" / "ShareAckLatency.java"
JAVA_JAR = ROOT / "compat_tests" / "java" / "target" / "kbroker-java-driver.jar"
# Kafka's default is 50 share-state partitions; one node with one group at a time needs one, and
# both brokers get the same number. A share member learns its assignment from its next heartbeat,
# 5 s apart by default: that wait would be most of a smoke run's measured time, on both brokers,
# so both get a 500 ms heartbeat (the join still counts in ShareConsumerPerformance's time).
SHARED_SETTINGS = {**COMPARABLE_SETTINGS, "share.coordinator.state.topic.num.partitions": "1",
                   "group.share.heartbeat.interval.ms": "500",
                   "group.share.min.heartbeat.interval.ms": "500"}
BROKERS = ("kbroker", "kafka")


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(30)


def earliest_group(bootstrap: str, group: str) -> None:
    """A share group starts at the latest offset by default; the pre-produced records need the
    earliest (a group config, KIP-932's share.auto.offset.reset)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest",
                    incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)


# Records per log batch, the same on both brokers. With a short linger the producer's batches
# follow each broker's produce timing (one run: 240 records per batch on kbroker's 12-partition
# topic, 5,500 on Kafka's), and a share fetch takes whole batches, so the consume cells would
# compare two different logs. A long linger and a fixed count make both logs alike.
BATCH_RECORDS = 1000


def produce(bootstrap: str, topic: str, partitions: int, records: int, size: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 200,
                         "batch.num.messages": BATCH_RECORDS, "batch.size": 4 << 20,
                         "acks": "all",
                         "log_level": 4,
                         "queue.buffering.max.messages": 1_000_000})
    value = b"x" * size
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120) != 0:
        raise RuntimeError(f"{topic}: records left unsent")


def perf_timeout_ms(records: int) -> int:
    """ShareConsumerPerformance's ``--timeout``. It bounds both the wait between records and the
    whole run (the tool interrupts its consumers when its thread pool has not finished within it),
    so it must exceed the time to read everything even at a slow 1,000 records/s; the 30 s on top
    is the default record lock (a record acquired by a member that never acknowledges it comes
    back after 30 s, which then shows as a low figure rather than a failed cell)."""
    return int((30 + records / 1000) * 1000)


def share_perf(bootstrap: str, topic: str, group: str, records: int, consumers: int,
               version: str) -> dict:
    """ShareConsumerPerformance's result row as a dict of its header's names."""
    args = ["--bootstrap-server", bootstrap, "--topic", topic, "--group", group,
            "--num-records", str(records), "--threads", str(consumers),
            "--timeout", str(perf_timeout_ms(records))]
    cmd = java_cmd(SHARE_PERF, args, version, None, heap="512M")
    res = subprocess.run(cmd, capture_output=True, text=True,
                         timeout=2 * perf_timeout_ms(records) / 1000 + 60)
    if res.returncode != 0:
        log = Path(tempfile.mkstemp(prefix=f"share-perf-{group}-", suffix=".log")[1])
        log.write_text(res.stdout + "\n" + res.stderr)
        first = next((ln for ln in (res.stdout + res.stderr).splitlines() if "Exception" in ln),
                     "no exception printed")
        raise RuntimeError(f"ShareConsumerPerformance failed ({res.returncode}): {first} "
                           f"(all output in {log})")
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    header = next(ln for ln in lines if ln.startswith("start.time"))
    row = [ln for ln in lines if ln[0].isdigit()][-1]
    names = [n.strip() for n in header.split(",")]
    return dict(zip(names, (f.strip() for f in row.split(","))))


def throughput(bootstrap: str, partitions: int, consumers: int, records: int, size: int,
               version: str) -> dict:
    name = f"share-bench-{partitions}p-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, name, partitions)
    produce(bootstrap, name, partitions, records, size)
    group = f"g-{name}-{consumers}c"
    earliest_group(bootstrap, group)
    row = share_perf(bootstrap, name, group, records, consumers, version)
    consumed = int(row["data.consumed.in.nMsg"])
    if consumed < records:
        raise RuntimeError(f"{name}: ShareConsumerPerformance read {consumed} of {records}")
    return {"records_per_s": float(row["nMsg.sec"]), "mb_per_s": float(row["MB.sec"]),
            "records": consumed, "seconds": int(row["fetch.time.ms"]) / 1000, "raw": row}


def ack_latency(bootstrap: str, records: int, size: int) -> dict:
    name = f"share-ack-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, name, 1)
    produce(bootstrap, name, 1, records, size)
    group = f"g-{name}"
    earliest_group(bootstrap, group)
    res = subprocess.run(["java", "-cp", str(JAVA_JAR), str(ACK_PROGRAM), bootstrap, group, name,
                          str(records), "300"], capture_output=True, text=True, timeout=400)
    done = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
    if res.returncode != 0 or not done:
        raise RuntimeError(f"ShareAckLatency failed ({res.returncode}):\n{res.stdout[-2000:]}\n"
                           f"{res.stderr[-2000:]}")
    result = json.loads(done[-1])
    if result["records"] < records or result["errors"]:
        raise RuntimeError(f"ShareAckLatency: {result}")
    return result


def ratio(k: float | None, r: float | None) -> float | None:
    return round(k / r, 3) if k and r else None


def markdown(results: dict, args) -> str:
    out = [f"Records {args.records} x {args.size} B; ack round trip over {args.ack_records} "
           "records (polls of at most 10).", "",
           "| cell | kbroker | Kafka 4.4.0 | kbroker/Kafka |", "|---|---:|---:|---:|"]
    for key, cell in results["throughput"].items():
        k, r = cell.get("kbroker"), cell.get("kafka")
        for unit in ("records_per_s", "mb_per_s"):
            kv = k and k[unit]
            rv = r and r[unit]
            label = "records/s" if unit == "records_per_s" else "MB/s"
            out.append(f"| {key} {label} | {fmt(kv)} | {fmt(rv)} | {fmt(ratio(kv, rv))} |")
    ack = results["ack"]
    for q in ("p50_ms", "p99_ms"):
        kv = ack.get("kbroker") and ack["kbroker"][q]
        rv = ack.get("kafka") and ack["kafka"][q]
        out.append(f"| ack round trip {q[:3]} ms | {fmt(kv)} | {fmt(rv)} | {fmt(ratio(kv, rv))} |")
    for e in results["errors"]:
        out.append(f"\nerror: {e}")
    return "\n".join(out) + "\n"


def fmt(v) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}" if v >= 100 else f"{v:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100, help="record value bytes")
    parser.add_argument("--consumers", default="1,3,10")
    parser.add_argument("--partitions", default="1,12")
    parser.add_argument("--ack-records", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=100_000,
                        help="records of an unmeasured first cell on each broker (0: none)")
    parser.add_argument("--only", choices=BROKERS, help="one broker instead of both")
    parser.add_argument("--kafka-version", default=DEFAULT_VERSION)
    parser.add_argument("--port-base", type=int, default=29500,
                        help="kbroker listens on it, Kafka on the next two (client, controller)")
    parser.add_argument("--json", default="bench-share.json")
    parser.add_argument("--markdown", default="bench-share.md")
    args = parser.parse_args()
    if shutil.which("java") is None or not JAVA_JAR.exists():
        parser.error(f"needs java and {JAVA_JAR} (scripts/install-test-deps.sh)")
    consumers = [int(c) for c in args.consumers.split(",")]
    partition_counts = [int(p) for p in args.partitions.split(",")]
    which = [b for b in BROKERS if args.only in (None, b)]
    workdir = Path(tempfile.mkdtemp(prefix="bench-share-"))
    print(f"logs in {workdir}", flush=True)
    results: dict = {"throughput": {}, "ack": {}, "errors": [],
                     "settings": {"records": args.records, "size": args.size,
                                  "records_per_batch": BATCH_RECORDS,
                                  "warmup_records": args.warmup,
                                  "ack_records": args.ack_records,
                                  "broker_settings": SHARED_SETTINGS,
                                  "kafka_version": args.kafka_version,
                                  "machine": platform.platform()}}
    brokers: dict = {}
    started = time.monotonic()
    try:
        if "kbroker" in which:
            brokers["kbroker"] = BrokerProcess(workdir / "kbroker", SHARED_SETTINGS,
                                              port=args.port_base).start(timeout=60)
        if "kafka" in which:
            brokers["kafka"] = start_kafka(port=args.port_base + 1,
                                           controller_port=args.port_base + 2, data_dir=str(workdir / "kafka"),
                                           version=args.kafka_version,
                                           extra_props=SHARED_SETTINGS)

        def measure(label: str, target: dict, fn) -> None:
            for b in which:  # alternating: one cell, both brokers, then the next cell
                try:
                    target[b] = fn(brokers[b].bootstrap)
                    print(f"{label:24} {b:8} {summary(target[b])}", flush=True)
                except Exception as e:  # noqa: BLE001 - reported in the output, run goes on
                    results["errors"].append(f"{label} {b}: {e!r}")
                    print(f"{label:24} {b:8} failed: {e!r}", flush=True)

        if args.warmup:
            # Unmeasured: the first cell otherwise times a cold JVM on Kafka's side (one 12
            # partition, 3 consumer cell measured first: Kafka 36,000 records/s, 69,000 warm).
            measure("warm-up (not measured)", {}, lambda bs: throughput(
                bs, 12, 3, args.warmup, args.size, args.kafka_version))
        for p in partition_counts:
            for c in consumers:
                label = f"{p} partition(s), {c} consumer(s)"
                cell = results["throughput"].setdefault(label, {})
                measure(label, cell, lambda bs, p=p, c=c: throughput(
                    bs, p, c, args.records, args.size, args.kafka_version))
        measure("ack round trip", results["ack"],
                lambda bs: ack_latency(bs, args.ack_records, args.size))
    finally:
        for b in brokers.values():
            b.stop()
    results["seconds"] = round(time.monotonic() - started, 1)
    Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    table = markdown(results, args)
    Path(args.markdown).write_text(table)
    print(table)
    print(f"{results['seconds']} s; wrote {args.json} and {args.markdown}")
    return 1 if results["errors"] else 0


def summary(result: dict) -> str:
    if "records_per_s" in result:
        return (f"{result['records_per_s']:10,.0f} records/s {result['mb_per_s']:7.2f} MB/s "
                f"in {result['seconds']:.1f} s")
    return (f"p50 {result['p50_ms']:.2f} ms p99 {result['p99_ms']:.2f} ms "
            f"({result['commits']} commits)")


if __name__ == "__main__":
    sys.exit(main())
