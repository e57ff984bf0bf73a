#!/usr/bin/env python3
"""Cluster metadata at scale (issue 26): kbroker against Apache Kafka 3.9.1 in ZooKeeper mode,
3 brokers and one ZooKeeper each, the same shapes in one run.

For each shape (``PARTITIONSxRF``; default 10,000, 30,000 and 100,000 partitions at RF 1, and
30,000 at RF 3), on a freshly launched cluster (``tools/cluster_faults.cluster.launch``: ``kbroker
cluster up`` or ``tools/kafka_ref/zk_cluster.py up``):

- **create**: the partitions as topics of at most ``--per-topic`` (10,000) partitions (one topic
  znode must stay under ZooKeeper's 1 MiB ``jute.maxbuffer``), one CreateTopics each, sent to
  the controller (Kafka in ZooKeeper mode takes them nowhere else; kbroker takes them anywhere),
  until every broker's Metadata shows every partition with a leader and every broker's
  DescribeLogDirs lists a log for each replica it holds (a broker's Metadata can show a leader
  before that broker has made the partition's log);
- **propagation**: ``--probes`` times, a new 1-partition topic created the same way, until
  another broker's Metadata lists it with a leader (the issue's check; median and max);
- **Metadata for all partitions** from the third broker: time to the response's last byte
  (median and max of 5; the client's decoding is not counted);
- **RSS and descriptors** of each broker (``/proc``);
- **znode reads per notification** (kbroker only: the observing broker's ``/metrics`` counters
  around the probes; Kafka's brokers do not read ZooKeeper for metadata);
- **kill -9 of the controller** until every partition has a live leader again (at RF 1 the
  partitions the controller held stay offline until it returns, as on Kafka: the time is then
  until every partition has a leader after its restart; at RF 3, after its restart, until it is
  back in every ISR, so that the next kill finds a whole cluster);
- **kill -9 of another broker** (RF 3 only): until its partitions are led elsewhere, then, after
  its restart, until it is back in every ISR.

    python tools/bench_cluster_scale.py --json scale.json                  # both, every shape
    python tools/bench_cluster_scale.py --targets kbroker --shapes 10000x1  # one of each

A step that fails is reported with its error in the table, and the next shape still runs: where
Kafka cannot hold a shape on this machine (descriptors, memory maps), that is the result.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kbroker.testing.procfs import alive, memory_mb  # noqa: E402
from tests.integration.clients import Wire  # noqa: E402
from tools.cluster_faults.cluster import Cluster, launch, wait_for  # noqa: E402

METADATA = 3
CREATE_TOPICS = 19
DESCRIBE_LOG_DIRS = 35


def descriptors(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def endpoints(cluster: Cluster) -> dict[int, str]:
    return {b["id"]: f"{b['host']}:{b['port']}" for b in cluster.info["brokers"]}


def metadata(wire: Wire, topics=None):
    """(seconds to the last byte, the decoded response) of one Metadata request."""
    from kbroker.protocol.messages.metadata import MetadataRequest

    version = wire.version(METADATA)
    request = MetadataRequest(
        topics=None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t)
                                            for t in topics],
        allow_auto_topic_creation=False)
    started = time.monotonic()
    wire.send(METADATA, version, request)
    frame = wire.recv_frame()
    answered = time.monotonic() - started
    _, response = wire.receive(METADATA, version, frame)
    return answered, response


def create_topic(wire: Wire, name: str, partitions: int, replication_factor: int) -> None:
    from kbroker.protocol.messages.create_topics import CreateTopicsRequest as Q

    request = Q(topics=[Q.CreatableTopic(name=name, num_partitions=partitions,
                                         replication_factor=replication_factor, assignments=[],
                                         configs=[])],
                timeout_ms=600_000, validate_only=False)
    result = wire.call(CREATE_TOPICS, None, request).topics[0]
    if result.error_code not in (0, 36):  # TOPIC_ALREADY_EXISTS: a retried request
        raise RuntimeError(f"CreateTopics {name}: error {result.error_code} "
                           f"{result.error_message}")


def led(response, topics=None, dead=()) -> tuple[int, int]:
    """(partitions listed with a live leader, partitions listed) in a Metadata response."""
    good = total = 0
    for topic in response.topics:
        if topics is not None and topic.name not in topics:
            continue
        for p in topic.partitions:
            total += 1
            if p.error_code == 0 and p.leader_id >= 0 and p.leader_id not in dead:
                good += 1
    return good, total


def in_sync(response, broker: int) -> tuple[int, int]:
    """(partitions whose ISR holds ``broker``, partitions that have it as a replica)."""
    held = total = 0
    for topic in response.topics:
        for p in topic.partitions:
            if broker in p.replica_nodes:
                total += 1
                held += broker in p.isr_nodes
    return held, total


def scrape(url: str | None) -> dict[str, float]:
    if not url:
        return {}
    try:
        text = urllib.request.urlopen(url.rstrip("/") + "/metrics", timeout=30).read().decode()
    except OSError:
        return {}
    found = {}
    for line in text.splitlines():
        match = re.match(r"(kbroker_zookeeper_\w+?)(?:_total)? ([\d.e+]+)$", line)
        if match:
            found[match.group(1)] = float(match.group(2))
    return found


def http_url(cluster: Cluster, broker_id: int) -> str | None:
    ready = Path(cluster.broker(broker_id)["data_dir"]) / "ready.json"
    try:
        return json.loads(ready.read_text()).get("http")
    except (OSError, ValueError):
        return None


class Shape:
    def __init__(self, text: str, per_topic: int):
        partitions, _, rf = text.partition("x")
        self.partitions, self.rf = int(partitions), int(rf or 1)
        self.topics = {}
        left, i = self.partitions, 0
        while left > 0:
            self.topics[f"scale-{i}"] = min(per_topic, left)
            left -= per_topic
            i += 1

    def __str__(self) -> str:
        return f"{self.partitions}x{self.rf}"


def led_everywhere(wires: dict[int, Wire], shape: Shape, dead=()) -> int:
    """The fewest partitions any live broker's Metadata shows led by a live broker."""
    fewest = shape.partitions
    for broker, wire in wires.items():
        if broker in dead:
            continue
        _, response = metadata(wire, list(shape.topics))
        fewest = min(fewest, led(response, shape.topics, dead)[0])
    return fewest


def logs_held(wires: dict[int, Wire], shape: Shape) -> int:
    """How many replicas of the shape's topics have a log on their broker (DescribeLogDirs of
    every broker, summed): a broker can list a partition's leader in Metadata before it has
    made the partition's log, so creation ends when both are there."""
    from kbroker.protocol.messages.describe_log_dirs import DescribeLogDirsRequest

    held = 0
    for wire in wires.values():
        response = wire.call(DESCRIBE_LOG_DIRS, None, DescribeLogDirsRequest(topics=None))
        held += sum(len(topic.partitions) for result in response.results
                    for topic in result.topics if topic.name in shape.topics)
    return held


def wait_progress(count, wanted: int, what: str, stall_s: float = 300) -> None:
    """Until ``count()`` reaches ``wanted``; a cluster that makes no progress for ``stall_s``
    (Kafka past its descriptors or heap) fails with how far it got."""
    best, since = -1, time.monotonic()
    while True:
        done = count()
        if done == wanted:
            return
        if done > best:
            best, since = done, time.monotonic()
        elif time.monotonic() - since > stall_s:
            raise TimeoutError(f"{what}: stuck at {best} of {wanted} for {stall_s:.0f} s")
        time.sleep(0.5)


def wait_all_logs(wires: dict[int, Wire], shape: Shape) -> None:
    """Until every replica of the shape has its log on its broker."""
    wait_progress(lambda: logs_held(wires, shape), shape.partitions * shape.rf,
                  "creation (replicas with a log)")


def wait_all_led(wires: dict[int, Wire], shape: Shape, what: str, dead=()) -> None:
    """Until every partition is led on every live broker."""
    wait_progress(lambda: led_everywhere(wires, shape, dead), shape.partitions,
                  f"{what} (partitions led)")


def measure(cluster: Cluster, shape: Shape, probes: int, kill: bool) -> dict:
    figures: dict = {}
    addresses = endpoints(cluster)
    wires = {b: Wire(a, timeout=600) for b, a in addresses.items()}
    for wire in wires.values():
        wire.api_versions()
    # Kafka in ZooKeeper mode takes CreateTopics on its controller only (NOT_CONTROLLER
    # elsewhere; its admin client finds it): both clusters get them there, and the new topics
    # are looked for on another broker.
    creator = metadata(wires[min(wires)])[1].controller_id
    observer = max(b for b in wires if b != creator)
    other = min(b for b in wires if b not in (creator, observer)) if len(wires) > 2 else observer
    figures["creator"], figures["observer"] = creator, observer
    try:
        started = time.monotonic()
        for name, count in shape.topics.items():
            create_topic(wires[creator], name, count, shape.rf)
        wait_all_led(wires, shape, "creation")
        figures["create_led_s"] = round(time.monotonic() - started, 2)
        wait_all_logs(wires, shape)
        figures["create_s"] = round(time.monotonic() - started, 2)
        print(f"    created in {figures['create_s']} s (every partition led in every broker's "
              f"Metadata after {figures['create_led_s']} s)", flush=True)

        url = http_url(cluster, observer)
        before = scrape(url)
        seen = []
        for i in range(probes):
            name = f"probe-{i}"
            started = time.monotonic()
            create_topic(wires[creator], name, 1, 1)
            wait_for(lambda: led(metadata(wires[observer], [name])[1], {name})[0] == 1,
                     f"{name} on broker {observer}", 120, 0.005)
            seen.append(time.monotonic() - started)
            time.sleep(0.2)
        figures["propagation_s"] = [round(t, 3) for t in seen]
        figures["propagation_median_s"] = round(statistics.median(seen), 3)
        figures["propagation_max_s"] = round(max(seen), 3)
        after = scrape(url)
        events = after.get("kbroker_zookeeper_sync_events", 0) - before.get(
            "kbroker_zookeeper_sync_events", 0)
        reads = after.get("kbroker_zookeeper_znode_reads", 0) - before.get(
            "kbroker_zookeeper_znode_reads", 0)
        if events:
            figures["znode_reads_per_probe"] = round(reads / probes, 1)
            figures["znode_reads_per_event"] = round(reads / events, 1)
        print(f"    propagation median {figures['propagation_median_s']} s, max "
              f"{figures['propagation_max_s']} s", flush=True)

        times = sorted(metadata(wires[other])[0] for _ in range(5))
        figures["metadata_all_median_ms"] = round(statistics.median(times) * 1000)
        figures["metadata_all_max_ms"] = round(times[-1] * 1000)
        figures["rss_mb"] = [round(memory_mb(cluster.pids[b], "VmRSS")) for b in sorted(wires)]
        figures["descriptors"] = [descriptors(cluster.pids[b]) for b in sorted(wires)]
        print(f"    metadata {figures['metadata_all_median_ms']} ms, RSS {figures['rss_mb']}, "
              f"fds {figures['descriptors']}", flush=True)
        if kill:
            for step in ([kill_controller] + ([kill_broker] if shape.rf > 1 else [])):
                try:
                    figures.update(step(cluster, wires, shape))
                except Exception as exc:  # noqa: BLE001 - reported, the next step still runs
                    figures[f"{step.__name__}_error"] = f"{type(exc).__name__}: {exc}"[:300]
                    print(f"    {step.__name__}: {figures[f'{step.__name__}_error']}", flush=True)
    except Exception as exc:  # noqa: BLE001 - what was measured stays
        figures["error"] = f"{type(exc).__name__}: {exc}"[:500]
    finally:
        for wire in wires.values():
            wire.close()
    return figures


def _reconnect(wires: dict[int, Wire], cluster: Cluster, broker: int) -> None:
    """A new connection to a restarted broker (Kafka registers before its listener accepts)."""
    wires[broker].close()

    def connected():
        try:
            wire = Wire(endpoints(cluster)[broker], timeout=600)
            wire.api_versions()
            return wire
        except OSError:
            return None
    wires[broker] = wait_for(connected, f"broker {broker} to accept connections", 600, 0.2)


def wait_back_in_every_isr(wires: dict[int, Wire], shape: Shape, broker: int) -> None:
    survivor = next(b for b in sorted(wires) if b != broker)

    def back_in_every_isr():
        held, total = in_sync(metadata(wires[survivor], list(shape.topics))[1], broker)
        return total and held == total
    wait_for(back_in_every_isr, f"broker {broker} back in every ISR", 1800, 0.5)


def kill_controller(cluster: Cluster, wires: dict[int, Wire], shape: Shape) -> dict:
    controller = cluster.controller()
    pid = cluster.pids[controller]
    started = time.monotonic()
    cluster.signal(controller, signal.SIGKILL)
    wait_for(lambda: not alive(pid), "the controller to die", 30, 0.01)
    figures = {}
    if shape.rf > 1:
        wait_all_led(wires, shape, "failover", dead={controller})
        figures["controller_kill9_all_led_s"] = round(time.monotonic() - started, 2)
        restarted = time.monotonic()
        cluster.start(controller)
        cluster.wait_registered(controller, 600)
        _reconnect(wires, cluster, controller)
        # The next kill must find a whole cluster: with the restarted broker still out of the
        # ISRs, killing another leaves partitions whose only in-sync replica died.
        wait_back_in_every_isr(wires, shape, controller)
        figures["controller_back_in_every_isr_s"] = round(time.monotonic() - restarted, 2)
    else:  # its partitions have no other replica: led again once it is back
        cluster.start(controller)
        cluster.wait_registered(controller, 600)
        _reconnect(wires, cluster, controller)
        wait_all_led(wires, shape, "restart")
        figures["controller_kill9_all_led_after_restart_s"] = round(time.monotonic() - started,
                                                                    2)
    print(f"    controller kill -9: {figures}", flush=True)
    return figures


def kill_broker(cluster: Cluster, wires: dict[int, Wire], shape: Shape) -> dict:
    controller = cluster.controller()
    victim = next(b for b in sorted(wires) if b != controller)
    pid = cluster.pids[victim]
    started = time.monotonic()
    cluster.signal(victim, signal.SIGKILL)
    wait_for(lambda: not alive(pid), "the broker to die", 30, 0.01)
    wait_all_led(wires, shape, "failover", dead={victim})
    figures = {"broker_kill9_led_elsewhere_s": round(time.monotonic() - started, 2)}
    restarted = time.monotonic()
    cluster.start(victim)
    cluster.wait_registered(victim, 600)
    _reconnect(wires, cluster, victim)
    wait_back_in_every_isr(wires, shape, victim)
    figures["broker_back_in_every_isr_s"] = round(time.monotonic() - restarted, 2)
    print(f"    broker kill -9: {figures}", flush=True)
    return figures


ROWS = [("create_s", "create (led and every log made), s"),
        ("create_led_s", "create (led in every broker's Metadata), s"),
        ("propagation_median_s", "new topic on another broker, median s"),
        ("propagation_max_s", "new topic on another broker, max s"),
        ("metadata_all_median_ms", "Metadata (all), median ms"),
        ("metadata_all_max_ms", "Metadata (all), max ms"),
        ("controller_kill9_all_led_s", "kill -9 controller -> all led, s"),
        ("controller_back_in_every_isr_s", "controller restart -> back in every ISR, s"),
        ("controller_kill9_all_led_after_restart_s",
         "kill -9 controller -> all led after its restart, s"),
        ("broker_kill9_led_elsewhere_s", "kill -9 broker -> led elsewhere, s"),
        ("broker_back_in_every_isr_s", "restart -> back in every ISR, s"),
        ("rss_mb", "RSS per broker, MB"), ("descriptors", "descriptors per broker"),
        ("znode_reads_per_probe", "znode reads per new topic (observing broker)"),
        ("znode_reads_per_event", "znode reads per watch event (observing broker)")]


def table(results: dict) -> str:
    lines = []
    for shape, by_target in results.items():
        names = list(by_target)
        lines += [f"\n{shape} partitions x RF", "| metric | " + " | ".join(names) + " |",
                  "|---" * (len(names) + 1) + "|"]
        for key, label in ROWS:
            cells = [str(by_target[n].get(key, "-")) for n in names]
            if any(c != "-" for c in cells):
                lines.append(f"| {label} | " + " | ".join(cells) + " |")
        for name in names:
            for key, value in by_target[name].items():
                if key.endswith("error"):
                    lines.append(f"\n{name} {key}: {value}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--targets", default="kafka,kbroker")
    ap.add_argument("--shapes", default="10000x1,30000x1,100000x1,30000x3")
    ap.add_argument("--per-topic", type=int, default=10_000)
    ap.add_argument("--probes", type=int, default=10)
    ap.add_argument("--no-kill", action="store_true", help="skip the kill -9 steps")
    ap.add_argument("--kafka-heap", default="1g",
                    help="each Kafka broker's heap (default 1g, kafka-server-start.sh's)")
    ap.add_argument("--workdir")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench-scale-"))
    results: dict = {}
    # What bounds a broker here (Kafka maps two index files per segment, and opens each
    # segment): printed with the results, since a shape Kafka cannot hold fails on these.
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        maps = Path("/proc/sys/vm/max_map_count").read_text().strip()
    except OSError:
        maps = "?"
    print(f"limits: open files {soft} (hard {hard}), vm.max_map_count {maps}, "
          f"Kafka heap {args.kafka_heap}", flush=True)
    for text in args.shapes.split(","):
        shape = Shape(text, args.per_topic)
        results[str(shape)] = {}
        for target in args.targets.split(","):
            print(f"== {target} {shape}", flush=True)
            cluster = None
            try:
                cluster = launch(target, workdir / f"{target}-{shape}",
                                 kafka_heap=args.kafka_heap if target == "kafka" else None)
                cluster.name = target
                results[str(shape)][target] = measure(cluster, shape, args.probes,
                                                      not args.no_kill)
            except Exception as exc:  # noqa: BLE001 - reported, the next shape still runs
                results[str(shape)][target] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
                print(f"    {results[str(shape)][target]['error']}", flush=True)
            finally:
                if cluster is not None:
                    cluster.close()
            if args.json:
                Path(args.json).write_text(json.dumps(results, indent=2))
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
