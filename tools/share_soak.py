#!/usr/bin/env python3
"""Share groups under faults, no record lost (issue 23): a long run by hand.

A 3-broker kbroker cluster over ZooKeeper (``kbroker cluster up``, through tools/cluster_faults),
a topic of ``--partitions`` partitions at replication factor 3 (min.insync.replicas 2), and
``__share_group_state`` at replication factor 3 (min ISR 2) too. An idempotent acks=all
producer writes ``--records`` records whose values are their ids (0, 1, ...), paced over most
of ``--seconds``; the ids it got acknowledged are the expected set. ``--consumers`` share
consumers in one share group (tools/share_soak_member.py: confluent-kafka's ShareConsumer,
explicit mode) write each record's id and delivery count to their own log, flushed, then ACCEPT
it; a consumer that dies is restarted. Meanwhile, a random consumer is killed with ``kill -9``
every ``--kill-every`` seconds and, every ``--fault-every`` seconds, a broker (the leader or a
follower of the topic's partition 0, the controller, or the share group's coordinator) is
killed with ``kill -9`` and restarted, or bounced, by tools/cluster_faults' own fault primitives.

Then the faults stop, the consumers drain (until DescribeShareGroupOffsets says lag 0 on every
partition), and the checker reads the consumers' logs:

- lost: an acknowledged id no consumer received (must be 0);
- duplicates: every reception after an id's first, each explained by what happened between the
  two: the consumer holding it was killed (or died) before its ACCEPT was answered, the ACCEPT
  was refused, a broker fault was under way near it, or its acquisition lock had expired;
  unexplained ones (and any id delivered again after its ACCEPT was answered) fail the run;
- the share group's final state (DescribeShareGroupOffsets): lag 0 on every partition.

    PYTHONPATH=$PWD python tools/share_soak.py                                  # the long run
    PYTHONPATH=$PWD python tools/share_soak.py --records 20000 --seconds 60     # smoke

Prints progress, a ``SUMMARY {...}`` line, and writes ``--json`` (default share-soak.json).
Exit status 1 if a check failed. Ports: ZooKeeper on ``--port-base``, the brokers on the next
three. Logs (consumers', brokers', the cluster's data) stay in the printed work directory.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from array import array
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,  # noqa: E402
                                   ConfigResource, ResourceType)

MEMBER = ROOT / "tools" / "share_soak_member.py"
DESCRIBE_SHARE_GROUP_OFFSETS = 90
# A redelivery within this long after a broker fault healed (the cluster healthy again) is laid
# to the fault: members find the new leaders, sessions reopen, states load.
FAULT_GRACE_S = 15.0


def cluster_settings(lock_ms: int, delivery_limit: int,
                     member_session_ms: int) -> dict[str, str]:
    """Every broker's settings on top of ``kbroker cluster up``'s (which already puts
    ``__consumer_offsets`` and the transaction log at 3 replicas)."""
    return {"share.coordinator.state.topic.replication.factor": "3",
            "share.coordinator.state.topic.min.isr": "2",
            "group.share.record.lock.duration.ms": str(lock_ms),
            "group.share.delivery.count.limit": str(delivery_limit),
            # a restarted member gets its assignment within a second, not 5 s
            "group.share.heartbeat.interval.ms": "1000",
            "group.share.min.heartbeat.interval.ms": "1000",
            # a killed member keeps its assignment until its session expires: 45 s by default
            "group.share.session.timeout.ms": str(member_session_ms),
            "group.share.min.session.timeout.ms": str(member_session_ms)}


# ------------------------------------------------------------------------------- the load
class IdProducer(threading.Thread):
    """Idempotent, acks=all; values are the ids ``0..records-1``, paced at ``rate`` per second.
    ``acked[i]`` is 1 once id i was acknowledged."""

    def __init__(self, bootstrap: str, topic: str, records: int, rate: float):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.records, self.rate = bootstrap, topic, records, rate
        self.acked = bytearray(records)
        self.acked_count = 0
        self.errors: Counter = Counter()
        self.done = threading.Event()

    def run(self) -> None:
        def delivered(err, msg):
            if err is None:
                self.acked[int(msg.value())] = 1
                self.acked_count += 1
            else:
                self.errors[err.name()] += 1

        producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                             "acks": "all", "linger.ms": 5, "message.timeout.ms": 600000,
                             "log_level": 0})
        started, i = time.monotonic(), 0
        while i < self.records:
            due = min(self.records, int((time.monotonic() - started) * self.rate) + 1)
            while i < due:
                try:
                    producer.produce(self.topic, b"%d" % i, on_delivery=delivered)
                    i += 1
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0.02)
        left = producer.flush(600)
        if left:
            self.errors["not delivered at flush"] += left
        self.done.set()


@dataclass
class Instance:
    """One consumer process: its slot, log file and fate."""
    index: int
    slot: int
    log: Path
    process: subprocess.Popen
    started: float
    killed_at: float | None = None  # our kill -9
    died_at: float | None = None  # exited on its own (seen at this time)
    returncode: int | None = None


class Consumers:
    """``n`` slots, each running one member at a time; dead members are replaced."""

    def __init__(self, n: int, bootstrap: str, group: str, topic: str, workdir: Path):
        self.n, self.bootstrap, self.group, self.topic = n, bootstrap, group, topic
        self.workdir = workdir
        self.instances: list[Instance] = []
        self.current: dict[int, Instance] = {}

    def _start(self, slot: int) -> None:
        index = len(self.instances)
        log = self.workdir / f"consumer-{slot}-{index}.log"
        err = open(log.with_suffix(".err"), "wb")
        process = subprocess.Popen(
            [sys.executable, str(MEMBER), "--bootstrap", self.bootstrap, "--group", self.group,
             "--topic", self.topic, "--log", str(log)], stdout=err, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(ROOT)})
        err.close()
        instance = Instance(index, slot, log, process, time.time())
        self.instances.append(instance)
        self.current[slot] = instance

    def supervise(self) -> None:
        for slot in range(self.n):
            instance = self.current.get(slot)
            if instance is not None and instance.process.poll() is None:
                continue
            if instance is not None:
                instance.returncode = instance.process.returncode
                if instance.killed_at is None:
                    instance.died_at = time.time()
            self._start(slot)

    def kill_one(self, rng: random.Random) -> Instance | None:
        live = [i for i in self.current.values() if i.process.poll() is None]
        if not live:
            return None
        instance = rng.choice(live)
        instance.killed_at = time.time()
        instance.process.send_signal(signal.SIGKILL)
        instance.process.wait(30)
        return instance

    def stop(self, timeout: float = 60) -> None:
        """SIGTERM: each member closes its consumer (pending ACCEPTs answered) and exits."""
        live = [i for i in self.current.values() if i.process.poll() is None]
        for instance in live:
            instance.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for instance in live:
            try:
                instance.process.wait(max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                instance.killed_at = time.time()
                instance.process.kill()
                instance.process.wait()
            instance.returncode = instance.process.returncode


@dataclass
class BrokerFault:
    fault: str
    target: str
    broker: int | None
    started: float
    healed: float


class BrokerFaults(threading.Thread):
    """Every ``every`` seconds: kill -9 (restarted 2-8 s later) or bounce one broker, chosen by
    role (tools/cluster_faults/faults.py), then wait for the cluster to be healthy again."""

    def __init__(self, cluster, topic: str, every: float, seed: int, log=print):
        super().__init__(daemon=True)
        self.cluster, self.topic, self.every, self.log = cluster, topic, every, log
        self.rng = random.Random(seed)
        self.stopping = threading.Event()
        self.applied: list[BrokerFault] = []
        self.not_applied: list[str] = []

    def run(self) -> None:
        from tools.cluster_faults import faults
        while not self.stopping.wait(self.every):
            fault = self.rng.choice(("kill9", "kill9", "bounce"))
            target = self.rng.choice(faults.BROKER_TARGETS)
            started = time.time()
            try:
                applied = faults.apply(self.cluster, fault, target, self.topic)
                if fault == "kill9":
                    time.sleep(self.rng.uniform(2, 8))
                applied.heal()
                self.cluster.wait_healthy(self.topic, 180)
            except Exception as exc:  # noqa: BLE001 - e.g. no follower in the ISR right now
                self.not_applied.append(f"{fault}@{target}: {exc}")
                self.log(f"  broker fault {fault}@{target} not applied: {exc}")
                applied = None
            try:
                self.cluster.restart_dead()
            except Exception as exc:  # noqa: BLE001 - said, and the next round tries again
                self.log(f"  restarting dead brokers failed: {exc}")
            if applied is not None:
                self.applied.append(BrokerFault(fault, target, applied.broker, started,
                                                time.time()))
                self.log(f"  broker fault {fault}@{target} -> broker {applied.broker} "
                         f"({time.time() - started:.0f} s to healthy)")


# ------------------------------------------------------------------------------- group state
def describe_offsets(cluster, group: str) -> dict[int, tuple[int, int]] | None:
    """{partition: (start offset, lag)} from the broker that coordinates ``group``
    (DescribeShareGroupOffsets v1 to each broker in turn: the others answer NOT_COORDINATOR),
    or None when none answered."""
    from kbroker.protocol import messages
    from tests.integration.clients import Wire

    Q = messages.request_class(DESCRIBE_SHARE_GROUP_OFFSETS)
    request = Q(groups=[Q.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)])
    for broker in cluster.info["brokers"]:
        try:
            with Wire(f"127.0.0.1:{broker['port']}", timeout=10) as wire:
                g = wire.call(DESCRIBE_SHARE_GROUP_OFFSETS, 1, request).groups[0]
        except Exception:  # noqa: BLE001 - a broker down or restarting: ask the next
            continue
        if g.error_code == 0:
            return {p.partition_index: (p.start_offset, p.lag if p.error_code == 0 else -1)
                    for t in g.topics for p in t.partitions}
    return None


def summary_offsets(cluster, group: str, topic: str,
                    partitions: int) -> dict[int, tuple[int, int]] | None:
    """{partition: (start offset, lag)} computed as the broker computes DescribeShareGroupOffsets'
    lag (end offset - start offset - delivery complete count), from the share coordinator's
    ReadShareGroupStateSummary v1 and the partitions' high watermarks; None if incomplete.
    The fallback while kbroker's DescribeShareGroupOffsets fails on a coordinator that does not
    lead every partition (see the report's ``describe_failed``)."""
    from confluent_kafka import Consumer, TopicPartition
    from kbroker.protocol import messages
    from tests.integration.clients import Wire

    M = messages.request_class(3)
    S = messages.request_class(87)
    out: dict[int, tuple[int, int]] = {}
    for broker in cluster.info["brokers"]:
        try:
            with Wire(f"127.0.0.1:{broker['port']}", timeout=10) as wire:
                meta = wire.call(3, 12, M(topics=[M.MetadataRequestTopic(name=topic)],
                                          allow_auto_topic_creation=False))
                topic_id = meta.topics[0].topic_id
                wanted = [p for p in range(partitions) if p not in out]
                r = wire.call(87, 1, S(group_id=group, topics=[S.ReadStateSummaryData(
                    topic_id=topic_id, partitions=[S.PartitionData(partition=p, leader_epoch=-1)
                                                   for p in wanted])]))
        except Exception:  # noqa: BLE001 - a broker down or restarting: ask the next
            continue
        for result in r.results:
            for part in result.partitions:
                if part.error_code == 0 and part.delivery_complete_count >= 0:
                    out[part.partition] = (part.start_offset, part.delivery_complete_count)
    if len(out) != partitions:
        return None
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "share-soak-probe",
                         "log_level": 0})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(partitions)}
    except Exception:  # noqa: BLE001 - a leader moving: no reading this time
        return None
    finally:
        consumer.close()
    return {p: (start, ends[p] - start - done) for p, (start, done) in out.items()}


def earliest(bootstrap: str, group: str) -> None:
    """A share group starts at the latest offset by default; the soak needs every record."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest",
                    incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(60)


# ------------------------------------------------------------------------------- the checker
OK, NO_ANSWER, REFUSED = 1, 0, 2  # what became of a reception's ACCEPT


def receptions(instance: Instance, ack_errors: Counter, poll_errors: Counter):
    """(ts, instance index, id, delivery count, outcome) for each record in the member's log,
    in its order; a poll's records come once the answer to their ACCEPTs is read."""
    batch: list[tuple[float, int, int, int]] = []  # ts, id, delivery count, partition
    with open(instance.log, errors="replace") as f:
        for line in f:
            parts = line.split()
            if not parts or not line.endswith("\n"):
                continue  # the tail of a kill -9
            kind = parts[0]
            if kind == "R" and len(parts) == 6:
                batch.append((float(parts[1]), int(parts[2]), int(parts[3]), int(parts[4])))
            elif kind == "E" and len(parts) == 3:
                poll_errors[parts[2]] += 1
            elif kind == "A":
                if parts[2] == "fail":
                    ok, refused = set(), {p for _, _, _, p in batch}
                    ack_errors[parts[4]] += len(batch)
                else:
                    ok = {int(p) for p in parts[3].split(",") if p != "-"}
                    refused = set()
                    for item in parts[5].split(","):
                        if item != "-":
                            p, name = item.split(":", 1)
                            refused.add(int(p))
                            ack_errors[name] += sum(1 for b in batch if b[3] == int(p))
                for ts, rid, count, p in batch:
                    yield ts, instance.index, rid, count, (
                        OK if p in ok else REFUSED if p in refused else NO_ANSWER)
                batch = []
    for ts, rid, count, _ in batch:  # held when the process ended
        yield ts, instance.index, rid, count, NO_ANSWER


@dataclass
class Verdict:
    expected: int = 0
    received_ids: int = 0
    receptions: int = 0
    lost: int = 0
    unexpected: int = 0  # received, never acknowledged to the producer
    duplicates: int = 0
    explained: Counter = field(default_factory=Counter)
    unexplained: list = field(default_factory=list)  # the first few, for the report
    unexplained_count: int = 0
    redelivered_after_accept: int = 0
    count_not_risen: int = 0  # a redelivery whose delivery count did not go up
    # received, but no ACCEPT of it answered OK in the logs (its consumer was killed after the
    # broker took the ACCEPT, or it was archived at the delivery limit): the lag says which
    accept_unanswered: int = 0
    max_delivery_count: int = 0
    delivery_counts: Counter = field(default_factory=Counter)
    ack_errors: Counter = field(default_factory=Counter)
    poll_errors: Counter = field(default_factory=Counter)
    lost_sample: list = field(default_factory=list)


def check(acked: bytearray, instances: list[Instance], faults: list[BrokerFault],
          lock_s: float) -> Verdict:
    """Every reception in time order; each id's later receptions explained by its previous."""
    v = Verdict(expected=sum(acked))
    n = len(acked)
    count = array("H", bytes(2 * n))
    last_ts = array("d", bytes(8 * n))
    last_inst = array("i", bytes(4 * n))
    last_outcome = array("b", bytes(n))
    last_count = array("h", bytes(2 * n))
    accepted = bytearray(n)  # an ACCEPT of the id answered OK at least once
    extra: Counter = Counter()  # ids outside 0..n-1
    for ts, inst, rid, dc, outcome in heapq.merge(
            *(receptions(i, v.ack_errors, v.poll_errors) for i in instances)):
        v.receptions += 1
        v.delivery_counts[dc] += 1
        v.max_delivery_count = max(v.max_delivery_count, dc)
        if not 0 <= rid < n:
            extra[rid] += 1
            continue
        if count[rid]:
            v.duplicates += 1
            why = explain(instances[last_inst[rid]], last_ts[rid], last_outcome[rid], ts,
                          faults, lock_s)
            if why is None:
                v.unexplained_count += 1
                if len(v.unexplained) < 20:
                    v.unexplained.append({"id": rid, "first_ts": last_ts[rid], "again_ts": ts,
                                          "by": instances[last_inst[rid]].log.name,
                                          "again_by": instances[inst].log.name,
                                          "accept_answered": bool(last_outcome[rid] == OK),
                                          "delivery_count": dc})
            else:
                v.explained[why] += 1
            if last_outcome[rid] == OK:
                v.redelivered_after_accept += 1
            if dc <= last_count[rid]:
                v.count_not_risen += 1
        count[rid] = min(count[rid] + 1, 65535)
        if outcome == OK:
            accepted[rid] = 1
        last_ts[rid], last_inst[rid], last_outcome[rid], last_count[rid] = ts, inst, outcome, dc
    for rid in range(n):
        if count[rid]:
            v.received_ids += 1
            if not acked[rid]:
                v.unexpected += 1
            if not accepted[rid]:
                v.accept_unanswered += 1
        elif acked[rid]:
            v.lost += 1
            if len(v.lost_sample) < 20:
                v.lost_sample.append(rid)
    v.unexpected += len(extra)
    return v


def explain(holder: Instance, ts: float, outcome: int, again: float,
            faults: list[BrokerFault], lock_s: float) -> str | None:
    """Why a record received at ``ts`` by ``holder`` came again at ``again``; None: no reason.
    An ACCEPT that was answered OK is never a reason to see the record again."""
    if outcome == OK:
        return None
    if outcome == NO_ANSWER and holder.killed_at is not None \
            and ts <= holder.killed_at <= again + 0.5:
        return "consumer killed while holding it"
    if outcome == NO_ANSWER and holder.died_at is not None:
        return "consumer died while holding it"
    if outcome == REFUSED:
        return "ACCEPT refused (see ack_errors)"
    for f in faults:
        if f.started <= again and ts <= f.healed + FAULT_GRACE_S:
            return "broker fault near it"
    if again - ts >= lock_s - 1:
        return "acquisition lock expired"
    return None


def broker_log_counts(cluster) -> dict:
    """Tracebacks and ERROR lines in the brokers' logs (each broker.log, restarts included)."""
    out = {}
    for b in cluster.info["brokers"]:
        tracebacks = errors = 0
        data = Path(b["data_dir"])
        for path in (data / "broker.log", data.parent / f"broker-{b['id']}.restarts.log"):
            if path.exists():
                with open(path, errors="replace") as f:
                    for line in f:
                        tracebacks += line.startswith("Traceback")
                        errors += " ERROR " in line
        out[b["id"]] = {"tracebacks": tracebacks, "error_lines": errors}
    return out


# ------------------------------------------------------------------------------- the run
def run(args, workdir: Path, log=print) -> dict:
    from tools.cluster_faults.cluster import launch
    from tools.cluster_faults.run import create_topic

    run_id = f"{int(time.time()) % 10**6}"
    # faults.resolve finds the group's coordinator of topic faults-X as group group-X
    topic, group = f"faults-soak{run_id}", f"group-soak{run_id}"
    rng = random.Random(args.seed)
    result: dict = {"settings": {k: getattr(args, k) for k in (
        "records", "consumers", "partitions", "seconds", "kill_every", "fault_every", "lock_ms",
        "delivery_limit", "member_session_ms", "seed")},
        "topic": topic, "group": group, "workdir": str(workdir)}
    ports = list(range(args.port_base, args.port_base + 4)) if args.port_base else None
    cluster = launch("kbroker", workdir / "cluster", session_timeout_ms=args.session_timeout_ms,
                     settings=cluster_settings(args.lock_ms, args.delivery_limit,
                                              args.member_session_ms), ports=ports)
    started = time.monotonic()
    consumers = None
    fault_loop = None
    try:
        create_topic(cluster, topic, args.partitions)
        earliest(cluster.bootstrap, group)
        consumers = Consumers(args.consumers, cluster.bootstrap, group, topic, workdir)
        consumers.supervise()
        rate = args.records / max(1.0, 0.8 * args.seconds)
        producer = IdProducer(cluster.bootstrap, topic, args.records, rate)
        producer.start()
        log(f"{args.records} records at {rate:.0f}/s to {topic} ({args.partitions} partitions, "
            f"RF 3), {args.consumers} share consumers in {group}; bootstrap {cluster.bootstrap}")
        if args.fault_every > 0:
            fault_loop = BrokerFaults(cluster, topic, args.fault_every, args.seed, log)
            fault_loop.start()
        kills: list[dict] = []
        next_kill = time.monotonic() + args.kill_every
        next_report = time.monotonic() + 15
        # the faults go on for --seconds, and at least until everything was produced
        while time.monotonic() - started < args.seconds or not producer.done.is_set():
            consumers.supervise()
            if args.kill_every > 0 and time.monotonic() >= next_kill:
                victim = consumers.kill_one(rng)
                if victim is not None:
                    kills.append({"consumer": victim.log.name, "at": victim.killed_at})
                next_kill = time.monotonic() + args.kill_every
            if time.monotonic() >= next_report:
                log(f"  {time.monotonic() - started:.0f} s: {producer.acked_count} acked, "
                    f"{len(kills)} consumer kills, "
                    f"{len(fault_loop.applied) if fault_loop else 0} broker faults")
                next_report = time.monotonic() + 15
            time.sleep(0.2)
        if fault_loop is not None:
            fault_loop.stopping.set()
            fault_loop.join()
        producer.join()
        cluster.restart_dead()
        cluster.wait_healthy(topic, 180)
        log(f"faults over after {time.monotonic() - started:.0f} s: {producer.acked_count} "
            f"acked; draining until the share group's lag is 0")
        offsets, best, idle_since = None, None, time.monotonic()
        while time.monotonic() - idle_since < args.drain_idle:
            consumers.supervise()
            offsets = describe_offsets(cluster, group) or summary_offsets(
                cluster, group, topic, args.partitions)
            total = None if offsets is None else sum(
                lag if lag >= 0 else 10**12 for _, lag in offsets.values())
            if total == 0 and len(offsets) == args.partitions:
                break
            if total is not None and (best is None or total < best):
                best, idle_since = total, time.monotonic()
            time.sleep(2)
        consumers.stop()
        final = describe_offsets(cluster, group)
        result["lag_from"] = "DescribeShareGroupOffsets"
        if final is None:
            result["describe_failed"] = True
            result["lag_from"] = ("ReadShareGroupStateSummary + high watermarks (no broker "
                                  "answered DescribeShareGroupOffsets)")
            final = summary_offsets(cluster, group, topic, args.partitions)
        result["seconds"] = round(time.monotonic() - started, 1)
        result["final_offsets"] = {str(p): {"start_offset": s, "lag": lag}
                                   for p, (s, lag) in sorted((final or {}).items())}
        # None: not every partition described, or one without a lag (no state, an error)
        result["lag"] = None
        if final is not None and len(final) == args.partitions \
                and all(lag >= 0 for _, lag in final.values()):
            result["lag"] = sum(lag for _, lag in final.values())
        result["producer"] = {"acked": producer.acked_count, "errors": dict(producer.errors)}
        result["consumer_kills"] = len(kills)
        result["consumers_died_on_their_own"] = [
            {"consumer": i.log.name, "returncode": i.returncode, "seen_at": i.died_at}
            for i in consumers.instances if i.died_at is not None]
        faults = fault_loop.applied if fault_loop else []
        result["broker_faults"] = [f"{f.fault}@{f.target}->{f.broker}" for f in faults]
        result["broker_faults_not_applied"] = fault_loop.not_applied if fault_loop else []
        log(f"checking {len(consumers.instances)} consumer logs")
        verdict = check(producer.acked, consumers.instances, faults, args.lock_ms / 1000)
        result.update(verdict_dict(verdict))
        result["broker_logs"] = broker_log_counts(cluster)
    finally:
        if fault_loop is not None:
            fault_loop.stopping.set()
        if consumers is not None:
            for instance in consumers.current.values():
                if instance.process.poll() is None:
                    instance.process.kill()
                    instance.process.wait()
        cluster.close()
    result["ok"] = (result["lost"] == 0 and result["unexplained"] == 0
                    and result["redelivered_after_accept"] == 0 and result["lag"] == 0
                    and result["expected"] == args.records)
    return result


def verdict_dict(v: Verdict) -> dict:
    return {"expected": v.expected, "received_ids": v.received_ids, "receptions": v.receptions,
            "lost": v.lost, "lost_sample": v.lost_sample, "unexpected": v.unexpected,
            "duplicates": v.duplicates, "explained": dict(v.explained),
            "unexplained": v.unexplained_count, "unexplained_sample": v.unexplained,
            "redelivered_after_accept": v.redelivered_after_accept,
            "accept_unanswered": v.accept_unanswered,
            "delivery_count_not_risen": v.count_not_risen,
            "max_delivery_count": v.max_delivery_count,
            "delivery_counts": {str(k): c for k, c in sorted(v.delivery_counts.items())},
            "ack_errors": dict(v.ack_errors), "poll_errors": dict(v.poll_errors)}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--consumers", type=int, default=6)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=900,
                        help="how long the faults go on (the records are produced over 80%% of "
                             "it; the faults last until the producer is done, at least)")
    parser.add_argument("--kill-every", type=float, default=10,
                        help="seconds between kill -9s of a random consumer (0: none)")
    parser.add_argument("--fault-every", type=float, default=30,
                        help="seconds between broker faults (0: none)")
    parser.add_argument("--lock-ms", type=int, default=30000,
                        help="group.share.record.lock.duration.ms")
    parser.add_argument("--delivery-limit", type=int, default=5,
                        help="group.share.delivery.count.limit")
    parser.add_argument("--member-session-ms", type=int, default=10000,
                        help="group.share.session.timeout.ms (and its minimum): how long a "
                             "killed member keeps its assignment")
    parser.add_argument("--drain-idle", type=float, default=120,
                        help="give up draining after this long without the lag going down")
    parser.add_argument("--session-timeout-ms", type=int, default=6000,
                        help="the brokers' ZooKeeper session timeout")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--port-base", type=int, default=29600,
                        help="ZooKeeper on it, the three brokers on the next three (0: free "
                             "ephemeral ports)")
    parser.add_argument("--workdir", help="default: a new temp dir")
    parser.add_argument("--json", default="share-soak.json")
    return parser.parse_args(argv)


def main() -> int:
    args = parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="share-soak-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"logs in {workdir}", flush=True)
    result = run(args, workdir, log=lambda m: print(m, flush=True))
    Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    keys = ("ok", "expected", "received_ids", "lost", "duplicates", "explained", "unexplained",
            "redelivered_after_accept", "lag", "lag_from", "consumer_kills", "broker_faults",
            "seconds")
    print("SUMMARY " + json.dumps({k: result.get(k) for k in keys}), flush=True)
    print(f"wrote {args.json}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
