#!/usr/bin/env python3
"""Exactly-once chains under rebalances: the workload of issue 21, as a reproduction and a soak.

An idempotent producer keeps writing numbered records to ``in`` (7 partitions) while two stages
of transactional consume-transform-produce members copy them ``in -> mid -> out``. Each stage is
a consumer group of several members, each with its own transactional id; members leave after a
few transactions and new ones join with the same id (an InitProducerId that fences the old
epoch), so the groups rebalance while transactions commit. At the end a read_committed consumer
reads ``out`` and every record must be there exactly once; every producer error any member saw
is counted by name.

Members are real clients: franz-go (``compat_tests/go``'s ``eos-copy``), the Java client
(``compat_tests/java``'s ``eos``) or librdkafka (confluent-kafka, ``eos_member.py``), all with
transactions v2 where the broker has it (Produce v12+, EndTxn v5).

    python tools/eos_chains.py --client go --seconds 60             # against a fresh kbroker
    python tools/eos_chains.py --client java --bootstrap host:port  # against a running broker
    python tools/eos_chains.py --client go --kafka --seconds 60     # against Apache Kafka
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

GO_DRIVER = ROOT / "compat_tests" / "go" / "bin" / "kbroker-go-driver"
JAVA_DRIVER = ROOT / "compat_tests" / "java" / "target" / "kbroker-java-driver.jar"
PY_MEMBER = ROOT / "tools" / "eos_member.py"
STAGES = (("in", "mid"), ("mid", "out"))  # topic names, suffixed by the run's id


@dataclass
class Result:
    produced: int = 0
    output: int = 0
    lost: int = 0
    duplicates: int = 0
    members_started: int = 0
    committed: int = 0
    aborted: int = 0
    errors: Counter = field(default_factory=Counter)  # "where:ERROR_NAME" -> count, all members
    seconds: float = 0.0

    @property
    def exact(self) -> bool:
        return self.output == self.produced and not self.lost and not self.duplicates

    def summary(self) -> str:
        errors = ", ".join(f"{k} x{v}" for k, v in sorted(self.errors.items())) or "none"
        return (f"produced {self.produced}, read_committed output {self.output}, lost {self.lost}, "
                f"duplicated {self.duplicates}; {self.members_started} members, "
                f"{self.committed} transactions committed, {self.aborted} aborted; "
                f"errors: {errors}; {self.seconds:.0f} s")


def member_command(client: str, bootstrap: str, source: str, sink: str, group: str,
                   txn_id: str, transactions: int, max_ms: int) -> list[str]:
    common = ["--bootstrap", bootstrap, "--input", source, "--output", sink, "--group", group,
              "--transactional-id", txn_id]
    if client == "go":
        return [str(GO_DRIVER), "eos-copy", *common, "--transactions", str(transactions),
                "--max-ms", str(max_ms), "--idle-ms", str(max_ms)]
    if client == "java":
        return ["java", "-jar", str(JAVA_DRIVER), "eos-member", *common,
                "--transactions", str(transactions), "--max-ms", str(max_ms)]
    if client == "confluent":
        return [sys.executable, str(PY_MEMBER), *common, "--transactions", str(transactions),
                "--max-ms", str(max_ms)]
    raise ValueError(f"unknown client {client}")


class Member:
    """One member process; its JSON-lines output ends with a "done" event."""

    def __init__(self, command: list[str], log_path: Path):
        self.log_path = log_path
        self.proc = subprocess.Popen(command, stdout=open(log_path, "wb"),
                                     stderr=open(log_path.with_suffix(".err"), "wb"))

    def running(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 30) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def done(self) -> dict | None:
        for line in reversed(self.log_path.read_text(errors="replace").splitlines()):
            if line.startswith("{") and '"done"' in line:
                return json.loads(line)
        return None


class InputProducer(threading.Thread):
    """Idempotent producer of numbered values into ``in`` until stopped."""

    def __init__(self, bootstrap: str, topic: str, rate: int, backlog: int = 0):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.rate, self.backlog = bootstrap, topic, rate, backlog
        self.backlog_done = threading.Event()
        self.acked: set[bytes] = set()
        self.errors: Counter = Counter()
        self.stopping = threading.Event()

    def run(self) -> None:
        def on_delivery(err, msg):
            if err is None:
                self.acked.add(msg.value())
            else:
                self.errors[f"input:{err.name()}"] += 1

        producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                             "linger.ms": 5, "log_level": 0})
        i = 0
        started = time.monotonic()
        while not self.stopping.is_set():
            if i >= self.backlog and not self.backlog_done.is_set():
                producer.flush(60)
                self.backlog_done.set()
                started = time.monotonic()
            target = int((time.monotonic() - started) * self.rate) + self.backlog
            while i < target:
                try:
                    producer.produce(self.topic, key=b"k%d" % (i % 1000), value=b"%010d" % i,
                                     on_delivery=on_delivery)
                    i += 1
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0.01)
        producer.flush(60)


def read_committed(bootstrap: str, topic: str, partitions: int) -> Counter:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"verify-{time.time()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "log_level": 0})
    end = {}
    for p in range(partitions):
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        end[p] = high
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen: Counter = Counter()
    position = {p: 0 for p in range(partitions)}
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and any(position[p] < end[p] - 1 for p in end if end[p]):
        for msg in consumer.consume(2000, 0.5):
            if msg.error() is None:
                seen[msg.value()] += 1
                position[msg.partition()] = msg.offset()
        if all(position[p] >= end[p] - 1 or end[p] == 0 for p in end):
            break
        # Markers and aborted records end a partition without a visible last record: compare
        # against the consumer's position instead.
        positions = consumer.position([TopicPartition(topic, p) for p in range(partitions)])
        for tp in positions:
            if tp.offset >= end[tp.partition]:
                position[tp.partition] = end[tp.partition]
    consumer.close()
    return seen


def run(bootstrap: str, workdir: Path, client: str, seconds: float, members: int = 3,
        partitions: int = 7, rate: int = 2000, transactions: tuple[int, int] = (5, 30),
        backlog: int = 0, seed: int = 1, txn_prefix: str = "chain", log=print) -> Result:
    """The workload for ``seconds`` against ``bootstrap``; members of each stage come and go."""
    rng = random.Random(seed)
    run_id = f"{int(time.time() * 1000) % 10**8}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [f"{t}-{run_id}" for t in ("in", "mid", "out")]
    for name, fut in admin.create_topics([NewTopic(t, partitions, 1) for t in topics]).items():
        try:
            fut.result(30)
        except Exception as exc:  # noqa: BLE001 - topics of an earlier run on the same broker
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise
    result = Result()
    started = time.monotonic()
    producer = InputProducer(bootstrap, f"in-{run_id}", rate, backlog)
    producer.start()
    producer.backlog_done.wait()
    started = time.monotonic()
    slots: dict[tuple[int, int], Member] = {}
    finished: list[Member] = []
    max_ms = int((seconds + 120) * 1000)
    try:
        while time.monotonic() - started < seconds:
            for stage, (source, sink) in enumerate(STAGES):
                source, sink = f"{source}-{run_id}", f"{sink}-{run_id}"
                for slot in range(members):
                    member = slots.get((stage, slot))
                    if member is not None and member.running():
                        continue
                    if member is not None:
                        finished.append(member)
                    command = member_command(
                        client, bootstrap, source, sink, f"chain-{run_id}-{stage}",
                        f"{txn_prefix}-{stage}-{slot}", rng.randint(*transactions), max_ms)
                    result.members_started += 1
                    slots[(stage, slot)] = Member(
                        command, workdir / f"member-{stage}-{slot}-{result.members_started}.jsonl")
            time.sleep(0.5)
        producer.stopping.set()
        producer.join()
        log(f"input: {len(producer.acked)} records acknowledged; draining the chains")
        # Let the last members copy everything that is in: members that exit now are replaced
        # by long-running ones until the output stops growing.
        for (stage, slot), member in list(slots.items()):
            if not member.running():
                finished.append(member)
                source, sink = (f"{t}-{run_id}" for t in STAGES[stage])
                result.members_started += 1
                slots[(stage, slot)] = Member(
                    member_command(client, bootstrap, source, sink, f"chain-{run_id}-{stage}",
                                   f"{txn_prefix}-{stage}-{slot}", 10**6, max_ms),
                    workdir / f"member-{stage}-{slot}-{result.members_started}.jsonl")
        drain_deadline = time.monotonic() + 120
        expected = len(producer.acked)
        while time.monotonic() < drain_deadline:
            mid = f"mid-{run_id}"
            if committed_sum(bootstrap, f"chain-{run_id}-0", f"in-{run_id}", partitions) \
                    >= expected and committed_sum(bootstrap, f"chain-{run_id}-1", mid, partitions) \
                    >= end_offsets_without_markers(bootstrap, mid, partitions):
                break
            time.sleep(1)
    finally:
        producer.stopping.set()
        for member in slots.values():
            member.stop()
            finished.append(member)
    result.produced = len(producer.acked)
    result.errors.update(producer.errors)
    for member in finished:
        done = member.done()
        if done is None:
            result.errors["member:no-done-event"] += 1
            continue
        result.committed += done.get("committed", 0)
        result.aborted += done.get("aborted", 0)
        result.errors.update(done.get("errors", {}))
    seen = read_committed(bootstrap, f"out-{run_id}", partitions)
    result.output = sum(seen.values())
    result.lost = len(producer.acked - set(seen))
    result.duplicates = sum(c - 1 for c in seen.values()) + len(set(seen) - producer.acked)
    result.seconds = time.monotonic() - started
    return result


def committed_sum(bootstrap: str, group: str, topic: str, partitions: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 0,
                         "enable.auto.commit": False})
    try:
        offsets = consumer.committed([TopicPartition(topic, p) for p in range(partitions)],
                                     timeout=10)
        return sum(max(tp.offset, 0) for tp in offsets)
    except Exception:  # noqa: BLE001
        return -1
    finally:
        consumer.close()


def end_offsets_without_markers(bootstrap: str, topic: str, partitions: int) -> int:
    """The number of committed records in ``topic``: what a stage reading it must consume."""
    return sum(read_committed(bootstrap, topic, partitions).values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--client", choices=("go", "java", "confluent"), default="go")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--transactions", default="5-30",
                        help="each member leaves after a number of transactions in this range")
    parser.add_argument("--rate", type=int, default=2000, help="input records per second")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--backlog", type=int, default=0,
                        help="input records written before the members start")
    parser.add_argument("--bootstrap", help="a running broker (default: start a kbroker)")
    parser.add_argument("--txn-prefix", default="chain",
                        help="transactional ids are PREFIX-STAGE-SLOT, the same in every run")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="eos-chains-"))
    print(f"logs in {workdir}")
    broker = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        from tests.broker_process import BrokerProcess
        broker = BrokerProcess(workdir / "data").start()
        bootstrap = broker.bootstrap
    try:
        low, high = (int(x) for x in args.transactions.split("-"))
        result = run(bootstrap, workdir, args.client, args.seconds, args.members,
                     transactions=(low, high),
                     rate=args.rate, backlog=args.backlog, seed=args.seed,
                     txn_prefix=args.txn_prefix)
    finally:
        if broker is not None:
            broker.stop()
    print(result.summary())
    return 0 if result.exact and not [e for e in result.errors if "SEQUENCE" in e] else 1


if __name__ == "__main__":
    sys.exit(main())
