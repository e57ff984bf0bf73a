#!/usr/bin/env python3
"""Moving a replica between log dirs (AlterReplicaLogDirs), kbroker beside Apache Kafka 4.4.0.

Each broker has two log dirs and one topic of one partition holding ``--megabytes`` of 1 KiB
records (confluent-kafka, not timed). Then ``--moves`` moves, back and forth between the dirs,
each timed from the AlterReplicaLogDirs request to the first DescribeLogDirs (polled every 20 ms)
that shows the partition in its new dir and no future replica; no throttle, no other load. The
two brokers are measured one after the other, alternating, on the same machine.

    python tools/bench_log_dir_move.py [--megabytes 500] [--moves 4]
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
sys.path.insert(0, str(ROOT / "tools" / "kafka_ref"))

import run_kafka  # noqa: E402

from kbroker.protocol import messages  # noqa: E402
from tests.broker_process import BrokerProcess  # noqa: E402
from tests.integration.clients import Wire, ensure_topic  # noqa: E402

TOPIC = "bench-move"


def placed(bootstrap: str) -> list[tuple[str, bool]]:
    cls = messages.request_class(35)
    with Wire(bootstrap, timeout=30) as wire:
        answer = wire.call(35, 4, cls(topics=[cls.DescribableLogDirTopic(topic=TOPIC,
                                                                          partitions=[0])]))
    return sorted((r.log_dir, p.is_future_key) for r in answer.results for t in r.topics
                  for p in t.partitions)


def move(bootstrap: str, log_dir: str) -> float:
    cls = messages.request_class(34)
    started = time.perf_counter()
    with Wire(bootstrap, timeout=30) as wire:
        answer = wire.call(34, 2, cls(dirs=[cls.AlterReplicaLogDir(
            path=log_dir, topics=[cls.AlterReplicaLogDirTopic(name=TOPIC, partitions=[0])])]))
    error = answer.results[0].partitions[0].error_code
    assert error == 0, f"AlterReplicaLogDirs: error {error}"
    while placed(bootstrap) != [(log_dir, False)]:
        time.sleep(0.02)
    return time.perf_counter() - started


def fill(bootstrap: str, megabytes: int) -> None:
    from confluent_kafka import Producer
    ensure_topic(bootstrap, TOPIC, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "batch.size": 1 << 20, "acks": "1"})
    value = b"x" * 1024
    for i in range(megabytes * 1024):
        while True:
            try:
                producer.produce(TOPIC, value)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(300) == 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=int, default=500)
    parser.add_argument("--moves", type=int, default=4)
    a = parser.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="bench-move-"))
    kafka = run_kafka.start_kafka(port=run_kafka.free_port(), data_dir=str(base / "kafka"),
                                  temp=True, log_dir_count=2)
    (base / "kbroker").mkdir()
    kbroker_dirs = [str(base / "kbroker" / "data"), str(base / "kbroker" / "data2")]
    kbroker = BrokerProcess(Path(kbroker_dirs[0]), {"log.dirs": ",".join(kbroker_dirs)}).start()
    sides = {"kafka": (kafka.bootstrap, [str(base / "kafka" / "data"),
                                          str(base / "kafka" / "data2")]),
             "kbroker": (kbroker.bootstrap, kbroker_dirs)}
    try:
        for bootstrap, _ in sides.values():
            fill(bootstrap, a.megabytes)
        times: dict[str, list[float]] = {name: [] for name in sides}
        for _ in range(a.moves):
            for name, (bootstrap, dirs) in sides.items():
                [(current, _future)] = placed(bootstrap)
                destination = dirs[1] if current == dirs[0] else dirs[0]
                times[name].append(move(bootstrap, destination))
        for name, taken in times.items():
            median = statistics.median(taken)
            print(f"{name:8} {a.megabytes} MB: median {median:.2f} s ({a.megabytes / median:.0f} "
                  f"MB/s), runs {', '.join(f'{t:.2f}' for t in taken)}")
    finally:
        kbroker.stop()
        kafka.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
