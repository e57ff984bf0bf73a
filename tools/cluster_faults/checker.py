"""The verdict on a run: 0 acknowledged writes lost, no duplicates from idempotent producers,
acknowledged offsets never move (the log never went back under an acked write), committed group
offsets never go back, and every replica's log identical up to the high watermark once healed.
"""
from __future__ import annotations

import struct
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .drivers import ConsumerResult, ProducerResult


@dataclass
class Verdict:
    acked: int = 0
    lost: int = 0
    duplicated: int = 0
    moved: int = 0  # acked at one offset, found at another
    commits_backwards: int = 0
    commits_lost: int = 0
    group_missed: int = 0  # acked but never delivered to the group consumer
    replicas_diverged: list[str] = field(default_factory=list)
    replica_batches_compared: int = 0
    examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.moved or self.commits_backwards
                    or self.commits_lost or self.group_missed or self.replicas_diverged)

    def as_dict(self) -> dict:
        return {"acked": self.acked, "lost": self.lost, "duplicated": self.duplicated,
                "moved": self.moved, "commits_backwards": self.commits_backwards,
                "commits_lost": self.commits_lost,
                "group_missed": self.group_missed, "replicas_diverged": self.replicas_diverged,
                "replica_batches_compared": self.replica_batches_compared,
                "examples": self.examples[:5], "ok": self.ok}


def read_topic(bootstrap: str, topic: str, timeout: float = 120) -> tuple[list, dict[int, int]]:
    """Every record of the topic from the start to the high watermark read at the start:
    ([(partition, offset, value)], {partition: high watermark})."""
    import time

    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fault-checker",
                         "enable.auto.commit": False, "log_level": 0})
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                for p in partitions}
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        records, position = [], {p: 0 for p in partitions}
        deadline = time.monotonic() + timeout
        while any(position[p] < ends[p] for p in partitions):
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic}: at {position}, high watermarks {ends}")
            for msg in consumer.consume(1000, 1.0):
                if msg.error():
                    continue
                records.append((msg.partition(), msg.offset(), msg.value().decode()))
                position[msg.partition()] = msg.offset() + 1
        return records, ends
    finally:
        consumer.close()


def check(producers: list[ProducerResult], records: list, consumer: ConsumerResult | None = None,
          group_values: set[str] | None = None,
          committed: dict[int, int] | None = None) -> Verdict:
    """``committed``: the group's offsets as the cluster reports them at the end; each must be
    at least the last commit the consumer saw succeed (a committed offset never lost)."""
    verdict = Verdict()
    where = {}
    counts = Counter(v for _, _, v in records)
    for partition, offset, value in records:
        where.setdefault(value, (partition, offset))  # a duplicate counts once, below
    for producer in producers:
        verdict.acked += len(producer.acked)
        for a in producer.acked:
            found = where.get(a.value)
            if found is None:
                verdict.lost += 1
                verdict.examples.append(f"lost {producer.name} {a.value} acked at "
                                        f"{a.partition}@{a.offset}")
            elif found != (a.partition, a.offset):
                verdict.moved += 1
                verdict.examples.append(f"moved {a.value}: acked {a.partition}@{a.offset}, "
                                        f"found {found[0]}@{found[1]}")
    duplicated = {v: n for v, n in counts.items() if n > 1}
    verdict.duplicated = sum(n - 1 for n in duplicated.values())
    verdict.examples += [f"duplicated {v} x{n}" for v, n in list(duplicated.items())[:3]]
    if consumer is not None:
        last: dict[int, int] = {}
        for partition, offset in consumer.commits:
            if offset < last.get(partition, -1):
                verdict.commits_backwards += 1
                verdict.examples.append(f"commit went back on {partition}: "
                                        f"{last[partition]} -> {offset}")
            last[partition] = max(offset, last.get(partition, -1))
        if committed is not None:
            for partition, offset in last.items():
                if committed.get(partition, -1) < offset:
                    verdict.commits_lost += 1
                    verdict.examples.append(f"committed offset of {partition} is "
                                            f"{committed.get(partition)}, {offset} was committed")
    if group_values is not None:
        missed = {a.value for p in producers for a in p.acked} - group_values
        verdict.group_missed = len(missed)
        verdict.examples += [f"group never got {v}" for v in sorted(missed)[:3]]
    return verdict


# ---------------------------------------------------------------- replica logs on disk

_HEADER = struct.Struct(">qiibIhi")  # base offset, length, leader epoch, magic, crc, attrs, delta


def batches(partition_dir: Path) -> list[tuple[int, int, int, int]]:
    """(base offset, last offset, partition leader epoch, crc) of each complete batch in the
    partition's segment files, in offset order (Kafka's v2 record batch header)."""
    out = []
    for segment in sorted(partition_dir.glob("*.log")):
        data = segment.read_bytes()
        position = 0
        while position + _HEADER.size <= len(data):
            base, length, epoch, magic, crc, _attrs, delta = _HEADER.unpack_from(data, position)
            if length <= 0 or position + 12 + length > len(data):
                break  # preallocated tail or a batch being written
            out.append((base, base + delta, epoch, crc))
            position += 12 + length
    return out


def compare_replicas(data_dirs: dict[int, str], topic: str, assignment: dict[int, list[int]],
                     high_watermarks: dict[int, int]) -> tuple[int, list[str]]:
    """(batches compared, replicas whose batches below the high watermark differ from the first
    replica's)."""
    diverged, compared = [], 0
    for partition, replicas in sorted(assignment.items()):
        hw = high_watermarks.get(partition, 0)
        seen = {}
        for broker in replicas:
            directory = Path(data_dirs[broker]) / f"{topic}-{partition}"
            seen[broker] = [b for b in batches(directory) if b[1] < hw]
        reference = seen[replicas[0]]
        compared += sum(len(got) for got in seen.values())
        if reference and reference[-1][1] != hw - 1 and hw > 0:
            diverged.append(f"{topic}-{partition} on broker {replicas[0]}: batches end at "
                            f"{reference[-1][1]}, high watermark {hw}")
        for broker, got in seen.items():
            if got != reference:
                first = next((i for i, (a, b) in enumerate(zip(got, reference)) if a != b),
                             min(len(got), len(reference)))
                diverged.append(f"{topic}-{partition}: broker {broker} differs from broker "
                                f"{replicas[0]} at batch {first} ({len(got)} vs "
                                f"{len(reference)} batches below HW {hw})")
    return compared, diverged

