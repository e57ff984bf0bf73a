"""Soak: replicas moved between log dirs again and again under an idempotent acks=all producer,
with kill -9 of the broker in the middle of moves; at the end every acknowledged record must be
readable, once (issue 36 part 5).

    .venv/bin/python -m tools.log_dir_move_soak --seconds 300 --seed 7

One kbroker with two log dirs and a topic of ``--partitions`` partitions. A producer thread
(confluent-kafka, ``enable.idempotence``, acks=all) writes numbered keys at ``--produce-rate``
records/s the whole time and keeps the numbers acknowledged. The mover asks AlterReplicaLogDirs for a random partition to go to its
other dir every ``--every`` seconds, with the copy throttled (``--rate`` bytes/s, a dynamic broker
config, so moves last a while); with probability ``--kill`` per move the broker is killed with
SIGKILL while that move is in progress and started again. The report: moves asked, moves completed
(partitions seen in their new dir), kills, records acknowledged, lost, duplicated.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kbroker.protocol import messages  # noqa: E402
from tests.broker_process import BrokerProcess  # noqa: E402
from tests.integration.clients import Wire, ensure_topic  # noqa: E402

TOPIC = "soak-moves"


def where(bootstrap: str) -> dict[int, list[tuple[str, bool]]]:
    cls = messages.request_class(35)
    with Wire(bootstrap, timeout=30) as wire:
        answer = wire.call(35, 4, cls(topics=None))
    found: dict[int, list[tuple[str, bool]]] = {}
    for result in answer.results:
        for topic in result.topics:
            if topic.name == TOPIC:
                for p in topic.partitions:
                    found.setdefault(p.partition_index, []).append(
                        (result.log_dir, p.is_future_key))
    return found


def alter(bootstrap: str, partition: int, log_dir: str) -> int:
    cls = messages.request_class(34)
    with Wire(bootstrap, timeout=30) as wire:
        answer = wire.call(34, 2, cls(dirs=[cls.AlterReplicaLogDir(
            path=log_dir, topics=[cls.AlterReplicaLogDirTopic(name=TOPIC,
                                                               partitions=[partition])])]))
    return answer.results[0].partitions[0].error_code


def set_rate(bootstrap: str, rate: int) -> None:
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,
                                       ConfigResource, ResourceType)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[ConfigEntry(
        "replica.alter.log.dirs.io.max.bytes.per.second", str(rate),
        incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


class Producing(threading.Thread):
    def __init__(self, bootstrap: str, value_size: int, rate: int):
        super().__init__(daemon=True)
        self.rate = rate
        self.bootstrap = bootstrap
        self.value = b"x" * value_size
        self.acked: set[int] = set()
        self.errors = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        from confluent_kafka import Producer
        producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                             "acks": "all", "linger.ms": 5, "message.timeout.ms": 120000,
                             "reconnect.backoff.max.ms": 500})

        def done(err, msg):
            if err is None:
                self.acked.add(int(msg.key()))
            else:
                self.errors += 1

        n = 0
        began = time.monotonic()
        while not self.stopping.is_set():
            ahead = n / self.rate - (time.monotonic() - began)
            if ahead > 0:
                producer.poll(min(ahead, 0.05))
                continue
            try:
                producer.produce(TOPIC, self.value, key=str(n).encode(), on_delivery=done)
                n += 1
            except BufferError:
                producer.poll(0.05)
            producer.poll(0)
        producer.flush(120)


def read_all(bootstrap: str, partitions: int) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"soak-{time.time()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    ends = {}
    for p in range(partitions):
        ends[p] = consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1]
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
    keys, positions = [], {p: 0 for p in range(partitions)}
    deadline = time.monotonic() + 300
    while any(positions[p] < ends[p] for p in ends) and time.monotonic() < deadline:
        for message in consumer.consume(1000, 1.0):
            if message.error() is None:
                keys.append(int(message.key()))
                positions[message.partition()] = message.offset() + 1
    consumer.close()
    return keys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--every", type=float, default=2.0)
    parser.add_argument("--rate", type=int, default=8_000_000, help="copy bytes/s")
    parser.add_argument("--produce-rate", type=int, default=4000, help="records/s")
    parser.add_argument("--kill", type=float, default=0.3)
    parser.add_argument("--value-size", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    a = parser.parse_args(argv)
    rng = random.Random(a.seed)
    base = Path(tempfile.mkdtemp(prefix="kbroker-move-soak-"))
    dirs = [str(base / "one"), str(base / "two")]
    broker = BrokerProcess(base / "one", {"log.dirs": ",".join(dirs)}).start()
    ensure_topic(broker.bootstrap, TOPIC, a.partitions)
    set_rate(broker.bootstrap, a.rate)
    producing = Producing(broker.bootstrap, a.value_size, a.produce_rate)
    producing.start()
    asked = completed = kills = 0
    pending: dict[int, str] = {}
    started = time.monotonic()
    try:
        while time.monotonic() - started < a.seconds:
            time.sleep(a.every)
            placed = where(broker.bootstrap)
            for partition, destination in list(pending.items()):
                if placed.get(partition) == [(destination, False)]:
                    completed += 1
                    del pending[partition]
            partition = rng.randrange(a.partitions)
            if partition in pending:
                continue
            current = next(d for d, future in placed[partition] if not future)
            destination = dirs[1] if current == dirs[0] else dirs[0]
            error = alter(broker.bootstrap, partition, destination)
            if error:
                print(f"AlterReplicaLogDirs of {TOPIC}-{partition}: error {error}")
                continue
            asked += 1
            pending[partition] = destination
            if rng.random() < a.kill:
                time.sleep(rng.uniform(0.05, 0.5))
                moving = [p for p, entries in where(broker.bootstrap).items()
                          if any(future for _, future in entries)]
                broker.kill()
                kills += 1
                print(f"killed with {len(moving)} move(s) in progress: {sorted(moving)}")
                broker.start()
        producing.stopping.set()
        producing.join(180)
        time.sleep(5 if pending else 0)
        placed = where(broker.bootstrap)
        completed += sum(1 for p, d in pending.items() if placed.get(p) == [(d, False)])
        keys = read_all(broker.bootstrap, a.partitions)
    finally:
        broker.stop()
    acked = producing.acked
    seen = set(keys)
    lost = sorted(acked - seen)
    duplicated = len(keys) - len(seen)
    print(f"moves asked {asked}, completed {completed}, kills {kills}; records acknowledged "
          f"{len(acked)}, delivery errors {producing.errors}, read {len(keys)}, lost {len(lost)}, "
          f"duplicated {duplicated}")
    if lost:
        print(f"first lost: {lost[:20]}")
    return 1 if lost or duplicated else 0


if __name__ == "__main__":
    sys.exit(main())
