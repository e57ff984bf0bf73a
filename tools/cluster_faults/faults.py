"""Fault actions. Each one applies a fault to a target and returns how to heal it; the target is
resolved at the moment of the fault ("leader" = the current leader of the watched partition,
read from ZooKeeper; "coordinator" = the leader of the group's __consumer_offsets partition), so a schedule keeps hitting whoever holds the role now.

Faults on a broker: clean_stop, kill9, bounce, pause (SIGSTOP longer than the session timeout,
then SIGCONT: a zombie must not acknowledge), session_expiry (the broker's ZooKeeper link cut
longer than the session timeout: ZooKeeper expires the session and the broker finds out when it
reconnects), cut_clients / cut_inter_broker / cut_zookeeper / isolate (proxy cuts).
Faults on ZooKeeper itself: clean_stop, kill9, bounce, pause.
"""
from __future__ import annotations

import signal
import time
from dataclasses import dataclass
from typing import Callable

from .cluster import Cluster

BROKER_TARGETS = ("leader", "follower", "controller", "coordinator")
PROCESS_FAULTS = ("clean_stop", "kill9", "bounce", "pause")
NETWORK_FAULTS = ("session_expiry", "cut_clients", "cut_inter_broker", "cut_zookeeper", "isolate")


@dataclass
class Applied:
    fault: str
    target: str
    broker: int | None  # None for ZooKeeper
    heal: Callable[[], None]


def resolve(cluster: Cluster, target: str, topic: str) -> int | None:
    if target == "zookeeper":
        return None
    if target == "leader":
        broker = cluster.leader(topic, 0)
    elif target == "follower":
        broker = cluster.follower(topic, 0)
    elif target == "controller":
        broker = cluster.controller()
    elif target == "coordinator":
        # The group coordinator of the schedule's group ("group-<name>" for topic
        # "faults-<name>"): the leader of the group's __consumer_offsets partition.
        from kbroker.coordinator.partitioning import partition_for
        group = "group-" + topic.removeprefix("faults-")
        partitions = len(cluster.assignment("__consumer_offsets"))
        broker = cluster.leader("__consumer_offsets", partition_for(group, partitions)) \
            if partitions else None
    else:
        raise ValueError(target)
    if broker is None:
        raise RuntimeError(f"no {target} right now for {topic}-0")
    return broker


def applicable(fault: str, target: str, proxied: bool) -> bool:
    if target == "zookeeper":
        return fault in PROCESS_FAULTS
    return fault in PROCESS_FAULTS or (proxied and fault in NETWORK_FAULTS)


def apply(cluster: Cluster, fault: str, target: str, topic: str) -> Applied:
    broker = resolve(cluster, target, topic)
    if broker is None:
        return Applied(fault, target, None, _zookeeper(cluster, fault))
    return Applied(fault, target, broker, _broker(cluster, fault, broker))


def _nothing() -> None:
    pass


def _zookeeper(cluster: Cluster, fault: str) -> Callable[[], None]:
    if fault in ("clean_stop", "kill9"):
        cluster.zk_stop(hard=fault == "kill9")
        return cluster.zk_start
    if fault == "bounce":
        cluster.zk_stop(hard=False)
        cluster.zk_start()
        return _nothing
    if fault == "pause":
        cluster.zk_signal(signal.SIGSTOP)
        return lambda: cluster.zk_signal(signal.SIGCONT)
    raise ValueError(fault)


def _broker(cluster: Cluster, fault: str, broker: int) -> Callable[[], None]:
    proxies = cluster.proxies
    links = {"cut_clients": [f"client-{broker}"], "cut_inter_broker": [f"inter-{broker}"],
             "cut_zookeeper": [f"zk-{broker}"], "session_expiry": [f"zk-{broker}"],
             "isolate": [f"client-{broker}", f"inter-{broker}", f"zk-{broker}"]}

    def restart() -> None:
        cluster.start(broker)
        cluster.wait_registered(broker)

    if fault == "clean_stop":
        cluster.stop(broker)
        return restart
    if fault == "kill9":
        cluster.kill(broker)
        return restart
    if fault == "bounce":
        cluster.stop(broker)
        restart()
        return _nothing
    if fault == "pause":
        cluster.signal(broker, signal.SIGSTOP)
        return lambda: cluster.signal(broker, signal.SIGCONT)
    if fault in links:
        if proxies is None:
            raise RuntimeError(f"{fault} needs a proxied cluster")
        proxies.cut(*links[fault])
        if fault == "session_expiry":
            # held past the session timeout here, whatever the schedule says: that is the fault
            time.sleep(cluster.session_timeout_s + 2)
        return lambda: proxies.restore(*links[fault])
    raise ValueError(fault)


def min_hold(cluster: Cluster, fault: str) -> float:
    """How long a fault must last to be the fault it names (pause: past the session timeout)."""
    return cluster.session_timeout_s + 2 if fault == "pause" else 0.0
