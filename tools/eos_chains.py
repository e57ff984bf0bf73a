#!/usr/bin/env python3
"""Exactly-once chains under rebalances: the workload of issue 21, as a reproduction and a soak.

An idempotent producer keeps writing numbered records to ``in-<run>`` (7 partitions) while two
stages of transactional consume-transform-produce members copy them ``in -> mid -> out``. Each
stage is a consumer group of several members, each with its own transactional id; members leave
after a few transactions and new ones join with the same id (an InitProducerId that fences the
old epoch), so the groups rebalance while transactions commit. At the end a read_committed
consumer reads ``out`` and every input record must be there exactly once.

Members are real clients, one family per stage (``--clients go,java``: franz-go copies the
first stage, the Java client the second): franz-go (``compat_tests/go``'s ``eos-copy``), the
Java client (``compat_tests/java``'s ``eos-member``) or librdkafka (confluent-kafka,
``tools/eos_member.py``), each with transactions v2 where the broker has it (Produce v12+,
EndTxn v5). Errors are counted by name on both sides: what each member saw (produce callbacks,
commits, aborts), and what the broker logged refusing a produce (kbroker's "rejected: ERROR"
lines; Kafka's "Error processing append operation" with the exception), since clients retry some
of them silently.

    python tools/eos_chains.py --clients go,java --seconds 60              # a fresh kbroker
    python tools/eos_chains.py --clients java,go --kafka --seconds 60      # a fresh Kafka 4.4.0
    python tools/eos_chains.py --bootstrap H:P --broker-log PATH ...       # a running broker
    python tools/eos_chains.py --side-by-side --seconds 1800               # both, one after the other
    python tools/eos_chains.py --cluster kbroker --faults 20 --seconds 1800  # 3 brokers, kill -9s
    python tools/eos_chains.py --cluster kafka --faults 20 --seconds 1800    # Kafka 3.9 (ZooKeeper)

With ``--cluster`` the topics have 3 replicas (min.insync.replicas 2) and, every ``--faults``
seconds, a broker (the leader of ``in``'s partition 0, a follower of it, or the controller) is
killed with ``kill -9`` and restarted, or bounced, by tools/cluster_faults.

``tests/integration/test_eos_chains.py`` and ``tests/cluster/test_eos_chains.py`` run short
versions in the suite.
"""

from __future__ import annotations

import argparse
import json
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

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tools.broker_refusals import GUARD_SUFFIX, BrokerLogs  # noqa: E402

GO_DRIVER = ROOT / "compat_tests" / "go" / "bin" / "kbroker-go-driver"
JAVA_DRIVER = ROOT / "compat_tests" / "java" / "target" / "kbroker-java-driver.jar"
PY_MEMBER = ROOT / "tools" / "eos_member.py"
CLIENTS = ("go", "java", "confluent")
PARTITIONS = 7
@dataclass
class Result:
    produced: int = 0
    output: int = 0
    lost: int = 0
    duplicates: int = 0
    members_started: int = 0
    committed: int = 0
    aborted: int = 0
    drained: bool = False
    faults: list = field(default_factory=list)  # the broker faults applied, in order
    client_errors: Counter = field(default_factory=Counter)  # "client where:NAME" -> count
    broker_errors: Counter = field(default_factory=Counter)  # refusals the broker logged
    seconds: float = 0.0

    @property
    def exact(self) -> bool:
        return self.output == self.produced and not self.lost and not self.duplicates

    def sequence_errors(self) -> dict:
        """Every sequence or epoch error either side saw, by name."""
        both = self.client_errors + self.broker_errors
        return {k: v for k, v in both.items()
                if any(w in k.upper() for w in ("SEQUENCE", "EPOCH", "FENCED"))}

    def false_sequence_errors(self) -> dict:
        """Sequence errors a client saw, or the broker gave for anything but KIP-890's guards
        behind a batch refused with a retriable error: what issue 21 was about."""
        return {k: v for k, v in self.sequence_errors().items()
                if "SEQUENCE" in k.upper() and not k.endswith(GUARD_SUFFIX)}

    def summary(self) -> str:
        def counts(c):
            return ", ".join(f"{k} x{v}" for k, v in sorted(c.items())) or "none"
        return (f"produced {self.produced}, read_committed output {self.output}, lost "
                f"{self.lost}, duplicated {self.duplicates}{'' if self.drained else ' (NOT drained)'}; "
                f"{self.members_started} members, {self.committed} transactions committed, "
                f"{self.aborted} aborted; client errors: {counts(self.client_errors)}; broker "
                f"refusals: {counts(self.broker_errors)}; "
                f"{len(self.faults)} faults ({', '.join(self.faults) or 'none'}); "
                f"{self.seconds:.0f} s")


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

    def __init__(self, client: str, command: list[str], log_path: Path):
        self.client = client
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
    """Idempotent producer of numbered values: ``backlog`` at once, then ``rate`` per second
    until stopped."""

    def __init__(self, bootstrap: str, topic: str, rate: int, backlog: int = 0):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.rate, self.backlog = bootstrap, topic, rate, backlog
        self.acked: set[bytes] = set()
        self.errors: Counter = Counter()
        self.backlog_done = threading.Event()
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
            target = (int((time.monotonic() - started) * self.rate) + self.backlog
                      if self.backlog_done.is_set() else self.backlog)
            while i < target:
                try:
                    producer.produce(self.topic, key=b"k%d" % (i % 1000), value=b"%010d" % i,
                                     on_delivery=on_delivery)
                    i += 1
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0.01)
        producer.flush(60)


def end_offsets(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-chains-probe",
                         "log_level": 0})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                   for p in range(PARTITIONS))
    finally:
        consumer.close()


def committed_sum(bootstrap: str, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 0,
                         "enable.auto.commit": False})
    try:
        offsets = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)],
                                     timeout=10)
        return sum(max(tp.offset, 0) for tp in offsets)
    except Exception:  # noqa: BLE001 - a coordinator moving: no reading this time
        return -1
    finally:
        consumer.close()


class Output:
    """A read_committed consumer of ``topic`` from the start that keeps what it saw: each
    :meth:`catch_up` reads only what is new, so checking a long run's output stays cheap."""

    def __init__(self, bootstrap: str, topic: str):
        self.bootstrap, self.topic = bootstrap, topic
        self.seen: Counter = Counter()
        self.consumer = Consumer({"bootstrap.servers": bootstrap,
                                  "group.id": f"verify-{time.time()}",
                                  "isolation.level": "read_committed",
                                  "enable.auto.commit": False, "log_level": 0})
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])

    def catch_up(self, budget: float = 300) -> int:
        """Read up to the topic's current end offsets (for at most ``budget`` seconds); the
        number of records seen so far."""
        try:
            ends = {p: self.consumer.get_watermark_offsets(TopicPartition(self.topic, p),
                                                           timeout=10)[1]
                    for p in range(PARTITIONS)}
        except KafkaException as exc:
            # A leader moving (or a broker still down after a fault) answers this with a
            # retriable error: nothing was read this time, the caller asks again.
            print(f"  output: end offsets not read ({exc.args[0]}); retrying", flush=True)
            time.sleep(1)
            return sum(self.seen.values())
        deadline = time.monotonic() + budget
        while time.monotonic() < deadline:
            positions = self.consumer.position(
                [TopicPartition(self.topic, p) for p in range(PARTITIONS)])
            if all(tp.offset >= ends[tp.partition] for tp in positions):
                break
            for msg in self.consumer.consume(5000, 0.5):
                if msg.error() is None:
                    self.seen[msg.value()] += 1
        return sum(self.seen.values())

    def close(self) -> None:
        self.consumer.close()


def run(bootstrap: str, workdir: Path, clients: tuple[str, str] = ("go", "java"),
        seconds: float = 60, members: int = 3, rate: int = 2000, backlog: int = 0,
        transactions: tuple[int, int] = (5, 30), seed: int = 1, txn_prefix: str = "chain",
        refusals=None, drain_idle: float = 120, replication_factor: int = 1, faults=None,
        log=print) -> Result:
    """The workload for ``seconds`` against ``bootstrap`` (members of each stage come and go),
    then until both stages have copied everything (or made no progress for ``drain_idle``).
    ``refusals()``, when given, counts the produces the broker refused since the start (e.g.
    :meth:`BrokerLogs.refusals`). ``faults(topic)``, when given, is started once the topics
    exist and returns a thread to stop (``.stopping.set()``) when the churn ends."""
    rng = random.Random(seed)
    run_id = f"{int(time.time() * 1000) % 10**8}"
    topic = {name: f"{name}-{run_id}" for name in ("in", "mid", "out")}
    stages = ((topic["in"], topic["mid"]), (topic["mid"], topic["out"]))
    groups = (f"chain-{run_id}-0", f"chain-{run_id}-1")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"min.insync.replicas": "2"} if replication_factor > 2 else {}
    for fut in admin.create_topics([NewTopic(t, PARTITIONS, replication_factor, config=config)
                                    for t in topic.values()]).values():
        fut.result(60)
    result = Result()
    started = time.monotonic()
    producer = InputProducer(bootstrap, topic["in"], rate, backlog)
    producer.start()
    producer.backlog_done.wait()
    slots: dict[tuple[int, int], Member] = {}
    finished: list[Member] = []
    max_ms = int((seconds + 3600) * 1000)  # members outlive the churn and any drain

    def start(stage: int, slot: int, lifetime: int) -> None:
        source, sink = stages[stage]
        result.members_started += 1
        client = clients[stage]
        slots[(stage, slot)] = Member(client, member_command(
            client, bootstrap, source, sink, groups[stage], f"{txn_prefix}-{stage}-{slot}",
            lifetime, max_ms), workdir / f"{run_id}-{client}-{stage}-{slot}-{result.members_started}.jsonl")

    def supervise(lifetime) -> None:
        """Replace every member that left (its lifetime of transactions was over)."""
        for stage in (0, 1):
            for slot in range(members):
                member = slots.get((stage, slot))
                if member is None or not member.running():
                    if member is not None:
                        finished.append(member)
                    start(stage, slot, lifetime())

    fault_loop = faults(topic["in"]) if faults is not None else None
    output = Output(bootstrap, topic["out"])
    try:
        churn_until = time.monotonic() + seconds
        while time.monotonic() < churn_until:
            supervise(lambda: rng.randint(*transactions))
            time.sleep(0.5)
        if fault_loop is not None:
            fault_loop.stopping.set()
            fault_loop.join()
            result.faults = fault_loop.applied
        producer.stopping.set()
        producer.join()
        log(f"input: {len(producer.acked)} records acknowledged; draining the chains")
        # Members that leave from now on are replaced by members that stay.
        # Drained: ``out`` holds as many records as went in (the second stage's offsets stop
        # short of ``mid``'s markers, so they cannot say it). Given up after ``drain_idle``
        # seconds in which neither group committed anything.
        progress, idle_since = None, time.monotonic()
        while time.monotonic() - idle_since < drain_idle:
            supervise(lambda: 10**6)
            done = (committed_sum(bootstrap, groups[0], topic["in"]),
                    committed_sum(bootstrap, groups[1], topic["mid"]))
            if done != progress:
                progress, idle_since = done, time.monotonic()
            if output.catch_up(budget=5) >= len(producer.acked):
                result.drained = True
                break
            time.sleep(1)
    finally:
        if fault_loop is not None:
            fault_loop.stopping.set()
        producer.stopping.set()
        for member in slots.values():
            member.stop()
            finished.append(member)
    result.produced = len(producer.acked)
    result.client_errors.update(producer.errors)
    for member in finished:
        done = member.done()
        if done is None:
            result.client_errors[f"{member.client} member:no-done-event"] += 1
            continue
        result.committed += done.get("committed", 0)
        result.aborted += done.get("aborted", 0)
        result.client_errors.update({f"{member.client} {k}": v
                                     for k, v in done.get("errors", {}).items()})
    if refusals is not None:
        result.broker_errors = refusals()
    output.catch_up()
    output.close()
    seen = output.seen
    result.output = sum(seen.values())
    result.lost = len(producer.acked - set(seen))
    result.duplicates = sum(c - 1 for c in seen.values()) + len(set(seen) - producer.acked)
    result.seconds = time.monotonic() - started
    return result


class FaultLoop(threading.Thread):
    """Every ``every`` seconds, kill -9 (then restart) or bounce one broker of a
    tools/cluster_faults cluster, chosen by role for ``topic``'s partition 0."""

    def __init__(self, cluster, topic: str, every: float, seed: int, log=print):
        super().__init__(daemon=True)
        self.cluster, self.topic, self.every, self.log = cluster, topic, every, log
        self.rng = random.Random(seed)
        self.stopping = threading.Event()
        self.applied: list[str] = []

    def run(self) -> None:
        from tools.cluster_faults import faults
        while not self.stopping.wait(self.every):
            fault = self.rng.choice(("kill9", "kill9", "bounce"))
            target = self.rng.choice(faults.BROKER_TARGETS)
            try:
                applied = faults.apply(self.cluster, fault, target, self.topic)
                if fault == "kill9":
                    time.sleep(self.rng.uniform(2, 8))
                applied.heal()
                self.cluster.wait_healthy(self.topic, 180)
                self.applied.append(f"{fault}@{target}->{applied.broker}")
                self.log(f"  fault: {self.applied[-1]}")
            except Exception as exc:  # noqa: BLE001 - e.g. no follower in the ISR right now
                self.log(f"  fault {fault}@{target} not applied: {exc}")
            self.cluster.restart_dead()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", default="go,java",
                        help="the client family of stage 1 and stage 2 (go, java, confluent)")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--rate", type=int, default=2000, help="input records per second")
    parser.add_argument("--backlog", type=int, default=0,
                        help="input records written before the members start")
    parser.add_argument("--transactions", default="5-30",
                        help="each member leaves after a number of transactions in this range")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--txn-prefix", default="chain",
                        help="transactional ids are PREFIX-STAGE-SLOT, the same in every run")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--bootstrap", help="a running broker")
    target.add_argument("--kafka", action="store_true",
                        help="a fresh Apache Kafka (tools/kafka_ref) instead of a fresh kbroker")
    target.add_argument("--side-by-side", action="store_true",
                        help="a fresh kbroker, then a fresh Kafka, same workload and seed")
    target.add_argument("--cluster", choices=("kbroker", "kafka"),
                        help="a fresh 3-broker cluster over ZooKeeper (tools/cluster_faults)")
    parser.add_argument("--faults", type=float, default=0,
                        help="with --cluster: seconds between broker faults (0: none)")
    parser.add_argument("--broker-log", action="append", default=[],
                        help="with --bootstrap: a broker log to count refusals in")
    args = parser.parse_args()
    clients = tuple(args.clients.split(","))
    if len(clients) != 2 or not set(clients) <= set(CLIENTS):
        parser.error(f"--clients wants two of {', '.join(CLIENTS)}, e.g. go,java")
    low, high = (int(x) for x in args.transactions.split("-"))
    workdir = Path(tempfile.mkdtemp(prefix="eos-chains-"))
    print(f"logs in {workdir}")

    def workload(bootstrap, broker_logs):
        return run(bootstrap, workdir, clients, args.seconds, args.members, args.rate,
                   args.backlog, (low, high), args.seed, args.txn_prefix,
                   BrokerLogs(broker_logs).refusals)

    if args.bootstrap:
        results = {"broker": workload(args.bootstrap, args.broker_log)}
    elif args.cluster:
        results = {f"{args.cluster} cluster": on_cluster(args, workdir, clients, (low, high))}
    else:
        results = {}
        for which in (["kbroker", "kafka"] if args.side_by_side else
                      ["kafka" if args.kafka else "kbroker"]):
            results[which] = with_fresh_broker(which, workdir, workload)
    ok = True
    for which, result in results.items():
        print(f"{which}: {result.summary()}")
        ok = ok and result.exact and result.drained
    if args.side_by_side:
        extra = set(results["kbroker"].sequence_errors()) - set(results["kafka"].sequence_errors())
        if extra:
            print(f"sequence/epoch errors kbroker gave and Kafka did not: {sorted(extra)}")
            ok = False
    elif any(r.sequence_errors() for r in results.values()):
        ok = False
    return 0 if ok else 1


def on_cluster(args, workdir: Path, clients, transactions) -> Result:
    from tools.cluster_faults.cluster import launch
    cluster = launch(args.cluster, workdir / "cluster")
    try:
        # kbroker logs beside its data (broker.log); Kafka 3.9 beside its log dir (server.log).
        logs = BrokerLogs([path for b in cluster.info["brokers"] for path in (
            Path(b["data_dir"]) / "broker.log", Path(b["data_dir"]).parent / "server.log")])
        faults = (lambda topic: _started(FaultLoop(cluster, topic, args.faults, args.seed))) \
            if args.faults else None
        return run(cluster.bootstrap, workdir, clients, args.seconds, args.members, args.rate,
                   args.backlog, transactions, args.seed, args.txn_prefix, logs.refusals,
                   replication_factor=3, faults=faults)
    finally:
        cluster.close()


def _started(thread):
    thread.start()
    return thread


def with_fresh_broker(which: str, workdir: Path, workload) -> Result:
    if which == "kafka":
        sys.path.insert(0, str(ROOT / "tools" / "kafka_ref"))
        from run_kafka import free_port, start_kafka
        handle = start_kafka(port=free_port(), data_dir=str(workdir / "kafka"))
        try:
            return workload(handle.bootstrap, [workdir / "kafka" / "server.log"])
        finally:
            handle.stop()
    from tests.broker_process import BrokerProcess
    from tools.kafka_ref.run_kafka import COMPARABLE_SETTINGS
    # The reference Kafka's group and transaction settings (no initial rebalance delay above
    # all): franz-go members live a second or two here, so groups empty often, and with Kafka's
    # default 3 s delay on kbroker's side only each empty group stalled its stage 3-7 s.
    broker = BrokerProcess(workdir / "kbroker", COMPARABLE_SETTINGS).start()
    try:
        return workload(broker.bootstrap, [broker.log_path])
    finally:
        broker.stop()


if __name__ == "__main__":
    sys.exit(main())
