#!/usr/bin/env python3
"""Offset-commit latency against the size of the coordinator's shard (issue 34), kbroker against
Apache Kafka 3.9.1 (ZooKeeper mode, tools/kafka_ref/zk_cluster.py) on the same shape:

- 3 brokers, ``__consumer_offsets`` at 10 partitions and replication factor 3 (zk_cluster.py's
  settings; kbroker's cluster gets ``offsets.topic.num.partitions=10`` to match);
- a probe group commits one partition's offset (OffsetCommit over one raw connection to its
  coordinator, one at a time, ``--commits`` of them) with the shard holding nothing else, then
  after other groups *of the same shard* (group ids chosen by Kafka's partitioning rule) have
  committed 100 partitions each, up to every level of ``--levels``;
- median and p99 of the probe's round trip at each level, and the ratio to the empty shard.

Target (issue 34): at 1,000,000 committed offsets the median within 1.5x of the empty shard's.

    python tools/bench_offset_commit.py                           # both clusters
    python tools/bench_offset_commit.py --targets kbroker --levels 0,200000
    python tools/bench_offset_commit.py --attach kbroker=cluster.json   # a running cluster
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kbroker.coordinator.partitioning import partition_for  # noqa: E402
from kbroker.protocol import messages  # noqa: E402
from tests.integration.clients import Wire  # noqa: E402
from tools.cluster_faults.cluster import attach, launch  # noqa: E402

OFFSETS_PARTITIONS = 10
TOPIC = "bench-offset-commit"
TOPIC_PARTITIONS = 100  # one filler group commits every partition of the topic
OFFSET_COMMIT, FIND_COORDINATOR, CREATE_TOPICS = 8, 10, 19
WINDOW = 32  # filler requests in flight on the one connection


def create_topic(wire: Wire) -> None:
    cls = messages.request_class(CREATE_TOPICS)
    request = cls(topics=[cls.CreatableTopic(name=TOPIC, num_partitions=TOPIC_PARTITIONS,
                                             replication_factor=1)], timeout_ms=30000)
    response = wire.call(CREATE_TOPICS, wire.version(CREATE_TOPICS, 5), request)
    error = response.topics[0].error_code
    if error not in (0, 36):  # 36: TOPIC_ALREADY_EXISTS
        raise RuntimeError(f"CreateTopics {TOPIC}: error {error}")


def coordinator_of(bootstrap: str, group: str) -> str:
    cls = messages.request_class(FIND_COORDINATOR)
    deadline = time.monotonic() + 60
    with Wire(bootstrap) as wire:
        while True:
            response = wire.call(FIND_COORDINATOR, wire.version(FIND_COORDINATOR, 3),
                                 cls(key=group, key_type=0))
            if response.error_code == 0:
                return f"{response.host}:{response.port}"
            if time.monotonic() > deadline:
                raise RuntimeError(f"FindCoordinator {group}: error {response.error_code}")
            time.sleep(0.2)


def first_commit(bootstrap: str, group: str) -> str:
    """The group's coordinator, once it takes a commit: a new ``__consumer_offsets`` answers
    NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS for a moment on both brokers."""
    deadline = time.monotonic() + 60
    while True:
        coordinator = coordinator_of(bootstrap, group)
        with Wire(coordinator) as wire:
            version = wire.version(OFFSET_COMMIT, 8)
            try:
                check(wire.call(OFFSET_COMMIT, version, commit_request(group, range(1), 0)))
                return coordinator
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
        time.sleep(0.5)


def commit_request(group: str, partitions: range, offset: int):
    cls = messages.request_class(OFFSET_COMMIT)
    return cls(group_id=group, generation_id_or_member_epoch=-1, member_id="",
               group_instance_id=None, topics=[cls.OffsetCommitRequestTopic(
                   name=TOPIC, partitions=[cls.OffsetCommitRequestPartition(
                       partition_index=p, committed_offset=offset, committed_leader_epoch=-1,
                       committed_metadata="") for p in partitions])])


def check(response) -> None:
    for topic in response.topics:
        for partition in topic.partitions:
            if partition.error_code:
                raise RuntimeError(f"OffsetCommit: error {partition.error_code}")


def same_shard_groups(shard: int, prefix: str):
    """Group ids that Kafka (and kbroker) place in ``shard`` of __consumer_offsets."""
    i = 0
    while True:
        group = f"{prefix}-{i}"
        if partition_for(group, OFFSETS_PARTITIONS) == shard:
            yield group
        i += 1


def fill(wire: Wire, version: int, groups, count: int) -> float:
    """Commit ``count`` groups of TOPIC_PARTITIONS offsets, WINDOW requests in flight."""
    started = time.monotonic()
    in_flight = 0
    for _ in range(count):
        wire.send(OFFSET_COMMIT, version, commit_request(next(groups), range(TOPIC_PARTITIONS),
                                                         7))
        in_flight += 1
        if in_flight >= WINDOW:
            check(wire.receive(OFFSET_COMMIT, version)[1])
            in_flight -= 1
    for _ in range(in_flight):
        check(wire.receive(OFFSET_COMMIT, version)[1])
    return time.monotonic() - started


def probe(wire: Wire, version: int, group: str, commits: int) -> list[float]:
    times = []
    for i in range(commits):
        started = time.perf_counter()
        check(wire.call(OFFSET_COMMIT, version, commit_request(group, range(1), i)))
        times.append((time.perf_counter() - started) * 1000)
    return times


def bench(bootstrap: str, levels: list[int], commits: int) -> dict:
    bootstrap = bootstrap.split(",")[0]
    with Wire(bootstrap) as wire:
        create_topic(wire)
    time.sleep(2)  # the topic reaches every broker's metadata (both: asynchronous propagation)
    probe_group = "probe-offset-commit"
    shard = partition_for(probe_group, OFFSETS_PARTITIONS)
    coordinator = first_commit(bootstrap, probe_group)
    fillers = same_shard_groups(shard, "filler")
    held = 0
    results = {}
    with Wire(coordinator, timeout=120) as wire:
        version = wire.version(OFFSET_COMMIT, 8)
        probe(wire, version, probe_group, 20)  # warm-up
        for level in levels:
            groups = (level - held) // TOPIC_PARTITIONS
            if groups > 0:
                seconds = fill(wire, version, fillers, groups)
                held += groups * TOPIC_PARTITIONS
                print(f"  filled to {held:,} offsets ({groups * TOPIC_PARTITIONS / seconds:,.0f}"
                      f" offsets/s)", flush=True)
            times = sorted(probe(wire, version, probe_group, commits))
            results[level] = {"median_ms": statistics.median(times),
                              "p99_ms": times[min(len(times) - 1, int(len(times) * 0.99))]}
            print(f"  {level:>9,} offsets: median {results[level]['median_ms']:.2f} ms, "
                  f"p99 {results[level]['p99_ms']:.2f} ms", flush=True)
    return results


def table(results: dict[str, dict]) -> str:
    lines = ["| cluster | offsets in the shard | median | p99 | median / empty |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for name, by_level in results.items():
        if "error" in by_level:
            lines.append(f"| {name} | {by_level['error']} | | | |")
            continue
        empty = by_level[min(by_level)]["median_ms"]
        for level, r in by_level.items():
            lines.append(f"| {name} | {level:,} | {r['median_ms']:.2f} ms | {r['p99_ms']:.2f} ms"
                         f" | {r['median_ms'] / empty:.2f}x |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--targets", default="kafka,kbroker", help="clusters to launch, in order")
    ap.add_argument("--attach", action="append", default=[], metavar="NAME=JSON",
                    help="a running cluster instead of launching one")
    ap.add_argument("--levels", default="0,200000,1000000",
                    help="committed offsets in the probe's shard at each measurement")
    ap.add_argument("--commits", type=int, default=500, help="probe commits per level")
    ap.add_argument("--workdir")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    levels = sorted(int(x) for x in args.levels.split(","))
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench-offset-commit-"))
    targets = [(t, None) for t in args.targets.split(",") if t] if not args.attach else []
    targets += [tuple(a.split("=", 1)) for a in args.attach]
    results: dict[str, dict] = {}
    for name, json_file in targets:
        print(f"== {name}", flush=True)
        settings = {"offsets.topic.num.partitions": str(OFFSETS_PARTITIONS)} \
            if name == "kbroker" else None
        try:
            cluster = attach(json_file) if json_file else launch(name, workdir,
                                                                 settings=settings,
                                                                 kafka_heap="1g"
                                                                 if name == "kafka" else None)
        except Exception as e:  # noqa: BLE001
            results[name] = {"error": f"launch: {type(e).__name__}: {e}"[:200]}
            continue
        try:
            results[name] = bench(cluster.bootstrap, levels, args.commits)
        except Exception as e:  # noqa: BLE001
            results[name] = {"error": f"{type(e).__name__}: {e}"[:200]}
        finally:
            cluster.close()
    print(table(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
