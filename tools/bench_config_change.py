#!/usr/bin/env python3
"""A topic config change on a broker holding many partitions (issue 34, deltas to listeners).

One kbroker (single node, a fresh data dir) with ``--partitions`` partitions in topics of
``--per-topic``, plus one small topic; then ``--changes`` IncrementalAlterConfigs of the small
topic's ``retention.ms``, one at a time. The controller answers a write once every image listener
has applied it (replica manager, coordinators, followers...), so the round trip is the time from
AlterConfigs to every listener done. Median and p95, and the same on a broker with the small
topic alone.

    python tools/bench_config_change.py [--partitions 100000] [--per-topic 1000] [--changes 30]

Run it from two trees to compare them (the tree's own kbroker is used: PYTHONPATH=TREE).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kbroker.protocol import messages  # noqa: E402
from tests.broker_process import BrokerProcess  # noqa: E402
from tests.integration.clients import Wire  # noqa: E402
from tests.metadata.helpers import create_topic  # noqa: E402

INCREMENTAL_ALTER_CONFIGS = 44
TOPIC_RESOURCE = 2


def alter(wire: Wire, topic: str, value: str) -> float:
    cls = messages.request_class(INCREMENTAL_ALTER_CONFIGS)
    request = cls(resources=[cls.AlterConfigsResource(
        resource_type=TOPIC_RESOURCE, resource_name=topic, configs=[cls.AlterableConfig(
            name="retention.ms", config_operation=0, value=value)])], validate_only=False)
    started = time.perf_counter()
    response = wire.call(INCREMENTAL_ALTER_CONFIGS, 1, request)
    elapsed = time.perf_counter() - started
    assert response.responses[0].error_code == 0, response
    return elapsed * 1000


def measure(partitions: int, per_topic: int, changes: int) -> dict:
    broker = BrokerProcess(Path(tempfile.mkdtemp(prefix="bench-config-")) / "data",
                           {"num.partitions": "1"})
    broker.start()
    try:
        with Wire(broker.bootstrap, timeout=600) as wire:
            made, started = 0, time.monotonic()
            while made < partitions:
                n = min(per_topic, partitions - made)
                result = create_topic(wire, f"bulk-{made // per_topic:05d}", n, timeout_ms=600000)
                assert result.error_code == 0, result
                made += n
            created_s = time.monotonic() - started
            assert create_topic(wire, "small", 1).error_code == 0
            alter(wire, "small", "3600000")  # warm-up
            times = sorted(alter(wire, "small", str(3600000 + i)) for i in range(changes))
        return {"partitions": partitions, "create_s": created_s,
                "median_ms": statistics.median(times),
                "p95_ms": times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))]}
    finally:
        broker.kill()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--per-topic", type=int, default=1000)
    ap.add_argument("--changes", type=int, default=30)
    args = ap.parse_args(argv)
    print("| partitions besides | create s | AlterConfigs median | p95 |")
    print("| ---: | ---: | ---: | ---: |")
    for count in (0, args.partitions):
        r = measure(count, args.per_topic, args.changes)
        print(f"| {count:,} | {r['create_s']:.1f} | {r['median_ms']:.2f} ms | "
              f"{r['p95_ms']:.2f} ms |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
