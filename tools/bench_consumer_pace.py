#!/usr/bin/env python3
"""The consumer protocol's pace on subscription changes (issue 36), kbroker against Apache Kafka
4.4.0 (tools/kafka_ref) with the same settings, one after the other, with librdkafka
(confluent-kafka) on ``group.protocol=consumer``:

- **sliding**: one consumer over topics of 4 partitions changes its subscription every
  ``--cadence`` seconds (a window of 5 topics sliding by one, an unsubscribe every 7th step),
  and every 5th step measures the time until its assignment is exactly the window's partitions;
- **regex**: one consumer subscribes to a regex (matching 2 topics) and a literal topic at once:
  when the literal topic's partitions arrive, and when the regex's;
- **new topic**: a consumer on a regex; a topic matching it is created: the time until its
  partitions are assigned (Kafka re-resolves regexes at a heartbeat at most every 10 s).

Members joining and leaving are measured by tools/bench_consumer_groups.py (join, settle after
leave / join). Target (issue 36): the time to each new assignment within 1.5x Kafka's, median
and p95.

    python tools/bench_consumer_pace.py [--steps 60] [--cadence 0.6] [--only kbroker]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from confluent_kafka import Consumer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.broker_process import BrokerProcess  # noqa: E402
from tools.kafka_ref.run_kafka import free_port, start_kafka  # noqa: E402

SETTINGS = {"group.initial.rebalance.delay.ms": "0", "num.partitions": "1"}


def create(bootstrap: str, topics: list[str], partitions: int = 4) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, partitions, 1) for t in topics]).values():
        future.result(60)


def consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                     "group.protocol": "consumer", "auto.offset.reset": "earliest",
                     "enable.auto.commit": False})


def wait_for(c: Consumer, expected: set, timeout: float = 15.0) -> float | None:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        c.poll(0.02)
        if {(tp.topic, tp.partition) for tp in c.assignment()} == expected:
            return time.monotonic() - started
    return None


def sliding(bootstrap: str, steps: int, cadence: float, count: int = 70) -> list:
    prefix = f"pace-{uuid.uuid4().hex[:6]}"
    topics = [f"{prefix}-{i:03d}" for i in range(count)]
    create(bootstrap, topics)
    time.sleep(2)  # the topics reach the coordinator's metadata
    c = consumer(bootstrap, f"g-{prefix}")
    waits = []
    try:
        for step in range(1, steps + 1):
            window = topics[step % (count - 5): step % (count - 5) + 5]
            if step % 7 == 0:
                c.unsubscribe()
                c.poll(cadence)
                continue
            c.subscribe(window)
            if step % 5 == 0:
                waits.append(wait_for(c, {(t, p) for t in window for p in range(4)}))
            else:
                end = time.monotonic() + cadence
                while time.monotonic() < end:
                    c.poll(0.02)
    finally:
        c.close()
    return waits


def regex_and_literal(bootstrap: str) -> tuple:
    prefix = f"rx-{uuid.uuid4().hex[:6]}"
    literal, matched = f"{prefix}-lit", [f"{prefix}-m-{i}" for i in range(2)]
    create(bootstrap, [literal] + matched)
    time.sleep(2)
    c = consumer(bootstrap, f"g-{prefix}")
    seen = {}
    try:
        c.subscribe([literal, f"^{prefix}-m-.*"])
        started = time.monotonic()
        while time.monotonic() - started < 20 and len(seen) < 2:
            c.poll(0.02)
            topics = {tp.topic for tp in c.assignment()}
            if literal in topics and "literal" not in seen:
                seen["literal"] = time.monotonic() - started
            if set(matched) <= topics and "regex" not in seen:
                seen["regex"] = time.monotonic() - started
    finally:
        c.close()
    return seen.get("literal"), seen.get("regex")


def new_matching_topic(bootstrap: str) -> float | None:
    prefix = f"nt-{uuid.uuid4().hex[:6]}"
    create(bootstrap, [f"{prefix}-0"])
    time.sleep(2)
    c = consumer(bootstrap, f"g-{prefix}")
    try:
        c.subscribe([f"^{prefix}-.*"])
        if wait_for(c, {(f"{prefix}-0", p) for p in range(4)}, 20) is None:
            return None
        create(bootstrap, [f"{prefix}-1"])
        started = time.monotonic()
        if wait_for(c, {(f"{prefix}-{i}", p) for i in range(2) for p in range(4)}, 30) is None:
            return None
        return time.monotonic() - started
    finally:
        c.close()


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


def run(name: str, bootstrap: str, args) -> dict:
    waits = sliding(bootstrap, args.steps, args.cadence)
    done = [w for w in waits if w is not None]
    literal, regex = regex_and_literal(bootstrap)
    new_topic = new_matching_topic(bootstrap)
    result = {"checks": len(waits), "missed": len(waits) - len(done),
              "median": statistics.median(done) if done else None,
              "p95": p95(done) if done else None, "within_1s": sum(w < 1 for w in done),
              "waits": [round(w, 2) if w is not None else None for w in waits],
              "literal": literal, "regex": regex, "new_topic": new_topic}
    print(f"{name}: {result}", flush=True)
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--cadence", type=float, default=0.6, help="seconds between changes")
    ap.add_argument("--only", choices=["kafka", "kbroker"])
    args = ap.parse_args(argv)
    results = {}
    for name in ("kafka", "kbroker"):
        if args.only and name != args.only:
            continue
        if name == "kafka":
            handle = start_kafka(port=free_port(), extra_props=dict(SETTINGS))
            try:
                results[name] = run(name, handle.bootstrap, args)
            finally:
                handle.stop()
        else:
            broker = BrokerProcess(Path(tempfile.mkdtemp(prefix="pace-")) / "data", SETTINGS)
            broker.start()
            try:
                results[name] = run(name, broker.bootstrap, args)
            finally:
                broker.kill()
    print("| broker | checks | within 1 s | median | p95 | literal topic | regex topics | "
          "new matching topic |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, r in results.items():
        def s(v):
            return "-" if v is None else f"{v:.2f} s"
        print(f"| {name} | {r['checks']} ({r['missed']} missed) | {r['within_1s']} | "
              f"{s(r['median'])} | {s(r['p95'])} | {s(r['literal'])} | {s(r['regex'])} | "
              f"{s(r['new_topic'])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
