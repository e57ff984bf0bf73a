#!/usr/bin/env python3
"""Broker-level benchmark of a single kbroker (not a test; the Kafka comparison lives in
tools/bench/): start-up time to the first ApiVersions answer, idle RSS, confluent-kafka produce and
consume throughput with 1 KiB records, and peak RSS under that load.

    .venv/bin/python tools/bench_broker.py [--records 200000] [--record-size 1024] [--rounds 3]

Targets from issue 3: start-up under 0.5 s, idle RSS under 80 MB.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kbroker.cluster.processes import free_port  # noqa: E402
from kbroker.testing.procfs import memory_mb  # noqa: E402


def api_versions_ok(port: int) -> bool:
    """One ApiVersions v0 round trip over a raw socket."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            body = struct.pack(">hhih", 18, 0, 1, 5) + b"bench"
            s.sendall(struct.pack(">i", len(body)) + body)
            head = s.recv(4)
            return len(head) == 4
    except OSError:
        return False


def start_broker(data_dir: str, port: int):
    args = [sys.executable, "-m", "kbroker.cli.main", "serve",
            "--set", f"listeners=PLAINTEXT://127.0.0.1:{port}", "--set", f"log.dirs={data_dir}",
            "--log-level", "WARNING"]
    started = time.perf_counter()
    proc = subprocess.Popen(args, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not api_versions_ok(port):
        if proc.poll() is not None:
            raise RuntimeError("broker exited during start-up")
        time.sleep(0.005)
    return proc, time.perf_counter() - started


def produce(bootstrap: str, topic: str, count: int, size: int) -> float:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": 1,
                         "batch.size": 1_000_000, "queue.buffering.max.kbytes": 1_048_576})
    value = os.urandom(size)
    started = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 10000 == 0:
            producer.poll(0)
    producer.flush(120)
    return time.perf_counter() - started


def consume(bootstrap: str, topic: str, count: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench",
                         "enable.auto.commit": False, "fetch.max.bytes": 52_428_800,
                         "max.partition.fetch.bytes": 10_485_760})
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen = 0
    started = time.perf_counter()
    while seen < count:
        messages = consumer.consume(10000, 5)
        if not messages:
            raise RuntimeError(f"consumer stalled after {seen} records")
        seen += len(messages)
    elapsed = time.perf_counter() - started
    consumer.close()
    return elapsed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)

    startups, idle, produce_rates, consume_rates, peaks = [], [], [], [], []
    megabytes = args.records * args.record_size / 1e6
    for round_ in range(args.rounds):
        data_dir = tempfile.mkdtemp(prefix="kbroker-bench-")
        port = free_port()
        proc, startup = start_broker(data_dir, port)
        try:
            startups.append(startup)
            time.sleep(1.0)
            idle.append(memory_mb(proc.pid, "VmRSS"))
            bootstrap = f"127.0.0.1:{port}"
            topic = f"bench-{round_}"
            produce_rates.append(megabytes / produce(bootstrap, topic, args.records,
                                                     args.record_size))
            consume_rates.append(megabytes / consume(bootstrap, topic, args.records))
            peaks.append(memory_mb(proc.pid, "VmHWM"))
        finally:
            proc.terminate()
            proc.wait(30)
            shutil.rmtree(data_dir, ignore_errors=True)
        print(f"round {round_ + 1}: start-up {startup * 1000:.0f} ms, idle RSS {idle[-1]:.1f} MB, "
              f"produce {produce_rates[-1]:.1f} MB/s, consume {consume_rates[-1]:.1f} MB/s, "
              f"peak RSS {peaks[-1]:.1f} MB", flush=True)

    med = statistics.median
    print(f"\nmedians over {args.rounds} rounds, {args.records:,} records of {args.record_size} B "
          f"(confluent-kafka, acks=1, no compression):")
    print(f"  start-up to first ApiVersions answer  {med(startups) * 1000:8.0f} ms")
    print(f"  idle RSS                              {med(idle):8.1f} MB")
    print(f"  produce throughput                    {med(produce_rates):8.1f} MB/s "
          f"({med(produce_rates) * 1e6 / args.record_size:,.0f} records/s)")
    print(f"  consume throughput                    {med(consume_rates):8.1f} MB/s")
    print(f"  peak RSS under load                   {med(peaks):8.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
