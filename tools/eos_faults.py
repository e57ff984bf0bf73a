#!/usr/bin/env python3
"""Exactly-once under faults: a Java consume-transform-produce job copies an input topic to an
output topic while the broker is killed with ``kill -9`` and restarted, and the job's process is
hard-killed and replaced; the read_committed output must equal the input exactly (nothing lost,
nothing duplicated, order per partition kept). The shape of Kafka's own transactions system test.

The job is ``compat_tests/java``'s ``eos`` mode (build it with ``mvn -B -f compat_tests/java/pom.xml
package``). Faults are spread over the run by progress (the group's committed input offsets), so
each one lands in the middle of the copy, not after it.

Run: ``python tools/eos_faults.py [-n 200000] [--broker-kills 5] [--job-kills 2]``.
``tests/integration/test_eos_faults.py`` runs a short version of the same scenario.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.broker_process import BrokerProcess  # noqa: E402

JAR = ROOT / "compat_tests" / "java" / "target" / "kbroker-java-driver.jar"
INPUT, OUTPUT, GROUP, TXN_ID = "eos-in", "eos-out", "eos-copier", "eos-copier-txn"


@dataclass
class Result:
    messages: int
    output: int = 0
    lost: int = 0
    duplicates: int = 0
    out_of_order_partitions: list[int] = field(default_factory=list)
    broker_kills: int = 0
    job_kills: int = 0
    job_restarts: int = 0  # in-process restarts after an error (each one a fresh producer)
    transactions: int = 0
    seconds: float = 0.0

    @property
    def exact(self) -> bool:
        return (self.output == self.messages and not self.lost and not self.duplicates
                and not self.out_of_order_partitions)


class Job:
    """One process of the Java copier; ``kill()`` is SIGKILL, no clean shutdown."""

    def __init__(self, bootstrap: str, workdir: Path, index: int, max_per_txn: int,
                 pause_ms: int):
        self.log_path = workdir / f"job-{index}.jsonl"
        self.proc = subprocess.Popen(
            ["java", "-jar", str(JAR), "eos", "--bootstrap", bootstrap, "--input", INPUT,
             "--output", OUTPUT, "--group", GROUP, "--transactional-id", TXN_ID,
             "--max-per-txn", str(max_per_txn), "--pause-ms", str(pause_ms)],
            stdout=open(self.log_path, "wb"), stderr=subprocess.STDOUT)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def events(self) -> list[dict]:
        out = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                out.append(json.loads(line))
        return out


def produce_input(bootstrap: str, n: int, partitions: int) -> dict[int, list[bytes]]:
    """Idempotent produce of ``n`` numbered values, round-robin over partitions; returns each
    partition's values in offset order."""
    acked: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
    errors = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)
        else:
            acked[msg.partition()].append((msg.offset(), msg.value()))

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 5, "message.timeout.ms": 60000, "log_level": 0})
    for i in range(n):
        while True:
            try:
                producer.produce(INPUT, value=b"%09d" % i, partition=i % partitions,
                                 on_delivery=on_delivery)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.1)
        producer.poll(0)
    unsent = producer.flush(120)
    del producer  # its connections must not outlive the input phase (the broker gets killed)
    if unsent or errors:
        raise RuntimeError(f"input produce failed: {errors[:3]}")
    return {p: [v for _, v in sorted(recs)] for p, recs in acked.items()}


def committed_total(bootstrap: str, partitions: int) -> int | None:
    """Sum of the copier group's committed input offsets; None while the broker cannot answer."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                         "enable.auto.commit": False, "socket.timeout.ms": 3000,
                         "log_level": 0})
    try:
        offsets = consumer.committed([TopicPartition(INPUT, p) for p in range(partitions)],
                                     timeout=5)
        return sum(max(tp.offset, 0) for tp in offsets)
    except Exception:  # noqa: BLE001 - broker down or loading: no reading this time
        return None
    finally:
        consumer.close()


def read_output(bootstrap: str, partitions: int, expected: int, timeout: float) -> dict[int, list]:
    """Everything read_committed sees in the output, read until it has been quiet for 3 s after
    ``expected`` records (so duplicates past the expected count show up too)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-verify",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "log_level": 0})
    consumer.assign([TopicPartition(OUTPUT, p, 0) for p in range(partitions)])
    got: dict[int, list] = {p: [] for p in range(partitions)}
    count, deadline, last = 0, time.monotonic() + timeout, time.monotonic()
    try:
        while time.monotonic() < deadline:
            batch = consumer.consume(1000, 0.5)
            for msg in batch:
                if msg.error() is None:
                    got[msg.partition()].append(msg.value())
                    count += 1
            if batch:
                last = time.monotonic()
            elif count >= expected and time.monotonic() - last > 3:
                break
    finally:
        consumer.close()
    return got


def compare(expected: dict[int, list], got: dict[int, list], result: Result) -> None:
    want = {v for vs in expected.values() for v in vs}
    seen: dict[bytes, int] = {}
    for vs in got.values():
        for v in vs:
            seen[v] = seen.get(v, 0) + 1
    result.output = sum(seen.values())
    result.lost = len(want - set(seen))
    result.duplicates = sum(c - 1 for c in seen.values()) + len(set(seen) - want)
    result.out_of_order_partitions = [p for p in expected if got.get(p) != expected[p]]


def run(workdir: Path, n: int, partitions: int = 3, broker_kills: int = 5, job_kills: int = 2,
        max_per_txn: int = 100, pause_ms: int = 20, timeout: float = 600.0,
        log=print) -> Result:
    """The whole scenario in ``workdir``; the broker and jobs are always killed on the way out."""
    if not JAR.exists():
        raise RuntimeError(f"{JAR} missing: mvn -B -f compat_tests/java/pom.xml package")
    result = Result(messages=n)
    broker = BrokerProcess(workdir / "data", {"num.partitions": partitions})
    jobs: list[Job] = []
    started = time.monotonic()
    try:
        broker.start()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for fut in admin.create_topics([NewTopic(t, partitions, 1)
                                        for t in (INPUT, OUTPUT)]).values():
            fut.result(30)
        expected = produce_input(broker.bootstrap, n, partitions)
        log(f"produced {n} input records in {time.monotonic() - started:.1f}s")

        # Faults at evenly spread fractions of progress, job kills between broker kills.
        faults = ["broker"] * broker_kills
        for k in range(job_kills):
            faults.insert((k + 1) * len(faults) // (job_kills + 1), "job")
        thresholds = [n * (i + 1) // (len(faults) + 1) for i in range(len(faults))]

        copy_start = time.monotonic()
        jobs.append(Job(broker.bootstrap, workdir, 0, max_per_txn, pause_ms))
        deadline = copy_start + timeout
        done, done_at_fault = 0, -1
        while time.monotonic() < deadline:
            total = committed_total(broker.bootstrap, partitions)
            if total is not None:
                done = total
            # A fault only once the copier has made progress since the last one: each lands on
            # a working pipeline, in the middle of its transactions.
            if faults and done >= thresholds[0] and done > done_at_fault:
                fault, _ = faults.pop(0), thresholds.pop(0)
                done_at_fault = done
                if fault == "broker":
                    broker.kill()
                    time.sleep(0.5)
                    broker.start(timeout=60)
                    result.broker_kills += 1
                else:
                    jobs[-1].kill()
                    jobs.append(Job(broker.bootstrap, workdir, len(jobs), max_per_txn, pause_ms))
                    result.job_kills += 1
                log(f"{time.monotonic() - copy_start:6.1f}s  {done}/{n} committed: "
                    f"kill -9 {fault}")
                continue
            if done >= n:
                break  # finished; faults still pending show in the result's kill counts
            time.sleep(0.3)
        copy_seconds = time.monotonic() - copy_start
        log(f"copier committed {done}/{n} in {copy_seconds:.1f}s")
        for job in jobs:
            job.kill()
            events = job.events()
            result.transactions += sum(1 for e in events if e.get("event") == "txn")
            result.job_restarts += sum(1 for e in events if e.get("event") == "restart")
        got = read_output(broker.bootstrap, partitions, n, timeout=120)
        compare(expected, got, result)
    finally:
        for job in jobs:
            job.kill()
        broker.kill()
    result.seconds = time.monotonic() - started
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=200_000)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--broker-kills", type=int, default=5)
    ap.add_argument("--job-kills", type=int, default=2)
    ap.add_argument("--max-per-txn", type=int, default=100)
    ap.add_argument("--pause-ms", type=int, default=20, help="job pause after each transaction")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--keep", action="store_true", help="keep the work dir (logs, data)")
    args = ap.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="eos-faults-"))
    result = run(workdir, args.n, args.partitions, args.broker_kills, args.job_kills,
                 args.max_per_txn, args.pause_ms, args.timeout)
    print(json.dumps({**result.__dict__, "exact": result.exact, "workdir": str(workdir)}))
    return 0 if result.exact else 1


if __name__ == "__main__":
    sys.exit(main())
