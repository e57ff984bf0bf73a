"""Runs fault schedules against a cluster under load and checks each one.

A schedule is a list of steps (gap before, fault, target, hold). For each schedule: a fresh topic
(3 partitions, RF 3, min.insync.replicas 2), Kafka's VerifiableProducer and an idempotent
confluent-kafka producer (acks=all) and Kafka's VerifiableConsumer in a group run while the steps
are applied and healed (the first fault once both producers have acknowledged and the group has
consumed); then the cluster is waited healthy, the load stopped, and the checker
reads everything back.
"""
from __future__ import annotations

import json
import random
import traceback
import zlib
import time
from dataclasses import dataclass
from pathlib import Path

from . import faults
from .checker import check, compare_replicas, read_topic
from .cluster import Cluster, wait_for
from .drivers import PythonProducer, VerifiableConsumer, VerifiableProducer


@dataclass
class Step:
    fault: str
    target: str
    hold: float
    gap: float = 0.0

    def __str__(self) -> str:
        return f"{self.fault}@{self.target}({self.hold:.0f}s)"


def matrix(proxied: bool, hold: float = 8.0) -> list[list[Step]]:
    """Each fault on each target it applies to, one at a time."""
    out = []
    for target in faults.BROKER_TARGETS + ("zookeeper",):
        for fault in faults.PROCESS_FAULTS + faults.NETWORK_FAULTS:
            if faults.applicable(fault, target, proxied):
                # a short ZooKeeper cut: disconnected, not expired (session_expiry is the long one)
                h = 2.0 if fault == "cut_zookeeper" else hold
                out.append([Step(fault, target, h)])
    return out


def random_schedules(n: int, seconds: float, seed: int, proxied: bool,
                     session_timeout_s: float) -> list[list[Step]]:
    rng = random.Random(seed)
    choices = [(f, t) for t in faults.BROKER_TARGETS + ("zookeeper",)
               for f in faults.PROCESS_FAULTS + faults.NETWORK_FAULTS
               if faults.applicable(f, t, proxied)]
    schedules = []
    for _ in range(n):
        steps, used = [], 0.0
        while used < seconds:
            fault, target = rng.choice(choices)
            hold = rng.uniform(1, 2.5 * session_timeout_s)
            if fault == "pause":
                hold = max(hold, session_timeout_s + 2)
            gap = rng.uniform(0, 4)
            steps.append(Step(fault, target, hold, gap))
            used += gap + hold + 3
        schedules.append(steps)
    return schedules


def create_topic(cluster: Cluster, topic: str, partitions: int = 3) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    futures = admin.create_topics([NewTopic(topic, partitions, 3,
                                            config={"min.insync.replicas": "2"})])
    futures[topic].result(60)
    # a cluster that cannot replicate says so here, not as a baffling checker verdict later
    assignment = wait_for(lambda: cluster.assignment(topic), f"{topic} in ZooKeeper", 60, 0.2)
    if any(len(replicas) != 3 for replicas in assignment.values()):
        raise RuntimeError(f"{topic} was not created with 3 replicas: {assignment}")
    cluster.wait_healthy(topic, 60)


def committed_offsets(cluster: Cluster, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets as the cluster reports them after the run."""
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    return {tp.partition: tp.offset for tp in future.result(60).topic_partitions
            if tp.topic == topic}


def run_schedule(cluster: Cluster, steps: list[Step], name: str, workdir: Path,
                 log=print, settle: float = 4.0, strict: bool = False,
                 group_protocol: str = "classic") -> dict:
    """One schedule, checked. ``strict``: a step that could not be applied (say, no follower in
    the ISR at that moment) fails the schedule; random schedules just note it."""
    workdir.mkdir(parents=True, exist_ok=True)
    topic = f"faults-{name}"
    refusals = broker_logs(cluster)
    cluster.wait_healthy(None, 180)
    create_topic(cluster, topic)
    vp = VerifiableProducer(cluster.bootstrap, topic, workdir,
                            prefix=zlib.crc32(name.encode()) % 1_000_000)
    py = PythonProducer(cluster.bootstrap, topic, prefix=f"py{name}")
    vc = VerifiableConsumer(cluster.bootstrap, topic, f"group-{name}", workdir, group_protocol)
    applied_steps, errors, died = [], [], []
    started = time.monotonic()
    try:
        # Faults hit a running system: both producers acknowledged and the group consuming.
        wait_for(lambda: vp.result.acked and py.result.acked and vc.values(),
                 "first acks and the group's first records", 60, 0.2)
        time.sleep(settle)
        for step in steps:
            time.sleep(step.gap)
            try:
                applied = faults.apply(cluster, step.fault, step.target, topic)
            except Exception as e:  # noqa: BLE001 - e.g. no follower in ISR right now
                errors.append(f"{step}: not applied: {e}")
                log(f"  [{name}] {step}: not applied: {e}")
                continue
            who = "zookeeper" if applied.broker is None else f"broker {applied.broker}"
            log(f"  [{name}] {step} -> {who}")
            time.sleep(max(step.hold, faults.min_hold(cluster, step.fault)))
            applied.heal()
            applied_steps.append(f"{step}->{who}")
        died = cluster.restart_dead()
        if died:
            log(f"  [{name}] broker(s) {died} had exited on their own; restarted")
        cluster.wait_healthy(topic, 180)
        time.sleep(settle)
    finally:
        for driver in (vp, py):
            driver.stop()
    acked_values = {a.value for p in (vp.result, py.result) for a in p.acked}
    try:
        wait_for(lambda: acked_values <= vc.values(), "the group consumer to catch up", 90, 0.5)
    except TimeoutError:
        pass  # the checker counts what it missed
    vc.stop()
    records, hws = read_topic(cluster.bootstrap, topic)
    verdict = check([vp.result, py.result], records, vc.result, vc.values(),
                    committed_offsets(cluster, f"group-{name}", topic))
    verdict.replica_batches_compared, verdict.replicas_diverged = compare_replicas(
        {b["id"]: b["data_dir"] for b in cluster.info["brokers"]}, topic,
        cluster.assignment(topic), hws)
    result = {"schedule": name, "steps": applied_steps, "not_applied": errors,
              "exited_on_their_own": died,
              "seconds": round(time.monotonic() - started, 1),
              "producer_errors": vp.result.errors + py.result.errors,
              # produces the brokers refused, by error: an OUT_OF_ORDER_SEQUENCE_NUMBER to an
              # idempotent producer that did nothing wrong would be a false sequence error
              "broker_refusals": dict(refusals.refusals()),
              "consumed_by_group": len(vc.result.consumed), **verdict.as_dict()}
    result["ok"] = verdict.ok and not (strict and errors)
    log(f"  [{name}] acked {result['acked']} lost {result['lost']} duplicated "
        f"{result['duplicated']} moved {result['moved']} group_missed {result['group_missed']} "
        f"commits_lost {result['commits_lost']} diverged {len(result['replicas_diverged'])} "
        f"refusals {result['broker_refusals'] or 'none'} ({result['seconds']}s)")
    return result


def broker_logs(cluster: Cluster):
    """The refusals the cluster's brokers log from now on (kbroker's broker.log beside its data,
    Kafka's server.log beside its log dir)."""
    from tools.broker_refusals import BrokerLogs
    return BrokerLogs([path for b in cluster.info["brokers"] for path in (
        Path(b["data_dir"]) / "broker.log", Path(b["data_dir"]).parent / "server.log")])


def run_all(cluster: Cluster, schedules: list[list[Step]], workdir: Path, out: Path | None,
            log=print, prefix: str = "s", strict: bool = False,
            group_protocol: str = "classic") -> dict:
    results = []
    for i, steps in enumerate(schedules):
        log(f"schedule {i + 1}/{len(schedules)}: {' '.join(map(str, steps))}")
        try:
            result = run_schedule(cluster, steps, f"{prefix}{i}", workdir / f"{prefix}{i}", log,
                                  strict=strict, group_protocol=group_protocol)
        except Exception as e:  # noqa: BLE001 - a schedule that cannot finish is a failure
            result = {"schedule": f"{prefix}{i}", "steps": [str(s) for s in steps],
                      "error": f"{type(e).__name__}: {e}", "ok": False}
            log(f"  [{prefix}{i}] ERROR {traceback.format_exc()}")
        results.append(result)
        if out:
            with open(out, "a") as f:
                f.write(json.dumps(result) + "\n")
    summary = {"cluster": cluster.info.get("implementation", cluster.name),
               "schedules": len(results),
               "acked": sum(r.get("acked", 0) for r in results),
               "lost": sum(r.get("lost", 0) for r in results),
               "duplicated": sum(r.get("duplicated", 0) for r in results),
               "moved": sum(r.get("moved", 0) for r in results),
               "group_missed": sum(r.get("group_missed", 0) for r in results),
               "commits_lost": sum(r.get("commits_lost", 0) for r in results),
               "diverged": sum(len(r.get("replicas_diverged", [])) for r in results),
               "broker_refusals": _added(r.get("broker_refusals", {}) for r in results),
               "failed": [r["schedule"] for r in results if not r.get("ok")]}
    log("SUMMARY " + json.dumps(summary))
    return {"summary": summary, "results": results}


def _added(counts) -> dict:
    total: dict = {}
    for c in counts:
        for k, v in c.items():
            total[k] = total.get(k, 0) + v
    return total
