#!/usr/bin/env python3
"""Fresh broker per test: median time from fixture start to the first answered Metadata.

Measures what ``fresh_kafka_broker`` costs a test: start a broker (in-process, or ``--mode
subprocess``), open a socket, send Metadata v0, read the answer, stop. Target: median < 100 ms
in-process. Run: ``python tools/bench_fixture.py [-n 30] [--mode inprocess|subprocess]``.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kbroker.testing import KafkaBroker, SubprocessKafkaBroker  # noqa: E402
from tools.kafka_ref import run_kafka  # noqa: E402

def first_metadata(bootstrap: str) -> None:
    """Metadata v0 for all topics (an empty array) and its answer."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        run_kafka.request(sock, 3, 0, 1, struct.pack(">i", 0), client=b"bench")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=30, help="brokers to start (default 30)")
    parser.add_argument("--mode", choices=["inprocess", "subprocess"], default="inprocess")
    args = parser.parse_args()
    factory = KafkaBroker if args.mode == "inprocess" else SubprocessKafkaBroker
    first_metadata_ms, stop_ms = [], []
    with tempfile.TemporaryDirectory() as root:
        for i in range(args.n):
            started = time.perf_counter()
            broker = factory(data_dir=Path(root) / str(i)).start()
            first_metadata(broker.bootstrap_servers)
            first_metadata_ms.append((time.perf_counter() - started) * 1000)
            stopping = time.perf_counter()
            broker.stop()
            stop_ms.append((time.perf_counter() - stopping) * 1000)
    median = statistics.median(first_metadata_ms)
    print(f"{args.mode}: {args.n} fresh brokers; start to first Metadata: median {median:.1f} ms, "
          f"min {min(first_metadata_ms):.1f}, max {max(first_metadata_ms):.1f}; "
          f"stop: median {statistics.median(stop_ms):.1f} ms; target < 100 ms: "
          f"{'met' if median < 100 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
