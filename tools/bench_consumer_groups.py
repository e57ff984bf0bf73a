#!/usr/bin/env python3
"""Consumer-group (KIP-848, ``group.protocol=consumer``) benchmarks, kbroker against Apache Kafka
(tools/kafka_ref's reference version, 4.4.0) in the same run, alternating. Both brokers run with
their defaults (Kafka's: 5 s heartbeat interval, 1 s assignment interval), so what is measured is
what a user sees.

- join: time from ``subscribe()`` of 1, 3 and 10 members (librdkafka 2.12+ through
  confluent-kafka, one thread each; Kafka has no tool for this) to every one of 100 partitions
  owned by exactly one member, balanced;
- settle after leave / join: in a settled group of 3, time from one member's ``close()`` (or a 4th
  member's ``subscribe()``) to the partitions covered again, balanced, no partition owned twice;
- heartbeat round trip: 1,000 members in 100 groups (raw ConsumerGroupHeartbeat v1 over 10
  connections, each member heartbeating at the interval the broker hands out, as clients do),
  p50 and p99 of the round trip once every member is settled (same epoch twice in a row), the
  members spread evenly over the interval (see ``heartbeat_round``).

Target: kbroker/Kafka <= 1.0 on every line. Run:
``python tools/bench_consumer_groups.py [--rounds 2] [--hb-seconds 20]``; ``--cells heartbeat``
runs a part, ``--only kbroker --bootstrap HOST:PORT`` one running broker (e.g. under a profiler).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import struct
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from confluent_kafka import Consumer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.broker_process import BrokerProcess  # noqa: E402
from tools.kafka_ref.run_kafka import DEFAULT_VERSION, free_port, start_kafka  # noqa: E402

PARTITIONS = 100


def new_topic(bootstrap: str, partitions: int = PARTITIONS) -> str:
    """A new topic, given time to reach the group coordinator's metadata (on Kafka the
    coordinator learns of it from the KRaft log a moment after CreateTopics answers; a member
    subscribing before that gets nothing until its next heartbeat, which is not what is
    measured here)."""
    topic = f"cg-bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    time.sleep(2)
    return topic


class Member:
    """A librdkafka consumer in its own thread; ``owned`` follows its incremental
    assignments."""

    def __init__(self, bootstrap, group, topic):
        self.owned: set = set()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "group.protocol": "consumer", "enable.auto.commit": False,
                                  "auto.offset.reset": "latest"})
        self.topic = topic
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _assign(self, _, partitions):
        with self.lock:
            self.owned |= {p.partition for p in partitions}

    def _revoke(self, _, partitions):
        with self.lock:
            self.owned -= {p.partition for p in partitions}

    def start(self):
        self.consumer.subscribe([self.topic], on_assign=self._assign, on_revoke=self._revoke,
                                on_lost=self._revoke)
        self.thread.start()

    def _run(self):
        while not self.stop.is_set():
            self.consumer.poll(0.02)
        self.consumer.close()

    def close(self):
        self.stop.set()
        self.thread.join(30)


def settled(members) -> bool:
    owned = []
    for m in members:
        with m.lock:
            owned.append(set(m.owned))
    every = [p for o in owned for p in o]
    sizes = [len(o) for o in owned]
    return (len(every) == PARTITIONS and len(set(every)) == PARTITIONS
            and max(sizes) - min(sizes) <= 1)


def wait_settled(members, timeout=120.0) -> float:
    deadline = time.monotonic() + timeout
    while not settled(members):
        if time.monotonic() > deadline:
            raise RuntimeError("the group did not settle")
        time.sleep(0.005)
    return time.monotonic()


def join_round(bootstrap: str, n: int) -> float:
    topic, group = new_topic(bootstrap), f"bench-join-{uuid.uuid4().hex[:6]}"
    members = [Member(bootstrap, group, topic) for _ in range(n)]
    t0 = time.monotonic()
    for m in members:
        m.start()
    took = wait_settled(members) - t0
    for m in members:
        m.close()
    return took


def settle_rounds(bootstrap: str) -> tuple[float, float]:
    topic, group = new_topic(bootstrap), f"bench-settle-{uuid.uuid4().hex[:6]}"
    members = [Member(bootstrap, group, topic) for _ in range(3)]
    for m in members:
        m.start()
    wait_settled(members)
    time.sleep(1)
    leaving = members.pop()
    t0 = time.monotonic()
    leaving.close()
    leave = wait_settled(members) - t0
    time.sleep(1)
    joining = Member(bootstrap, group, topic)
    t0 = time.monotonic()
    joining.start()
    members.append(joining)
    join = wait_settled(members) - t0
    for m in members:
        m.close()
    return leave, join


# --- heartbeat round trips: a raw client ---------------------------------------------------------

async def heartbeat_round(bootstrap: str, seconds: float, groups=100, per_group=10,
                          connections=10) -> tuple[float, float]:
    from kbroker.protocol.messages.consumer_group_heartbeat import (
        ConsumerGroupHeartbeatRequest as Req, ConsumerGroupHeartbeatResponse as Resp)
    from kbroker.protocol.messages.find_coordinator import (FindCoordinatorRequest,
                                                            FindCoordinatorResponse)
    from kbroker.protocol.messages.headers import RequestHeader
    topic = new_topic(bootstrap, per_group)
    host, port = bootstrap.rsplit(":", 1)

    class Conn:
        def __init__(self):
            self.pending = {}
            self.cid = 0

        async def open(self):
            self.reader, self.writer = await asyncio.open_connection(host, int(port))
            self.task = asyncio.create_task(self.read())

        async def read(self):
            while True:
                size = struct.unpack(">i", await self.reader.readexactly(4))[0]
                data = await self.reader.readexactly(size)
                cid = struct.unpack(">i", data[:4])[0]
                fut, cls, version = self.pending.pop(cid)
                # flexible response header: correlation id + tagged fields (one 0 byte)
                fut.set_result(cls.decode(memoryview(data)[5:], version))

        async def call(self, key, version, request, cls, header_version=2):
            self.cid += 1
            header = RequestHeader(request_api_key=key, request_api_version=version,
                                   correlation_id=self.cid, client_id="bench")
            payload = header.to_bytes(header_version) + request.to_bytes(version)
            fut = asyncio.get_running_loop().create_future()
            self.pending[self.cid] = (fut, cls, version)
            self.writer.write(struct.pack(">i", len(payload)) + payload)
            return await fut

    conns = [Conn() for _ in range(connections)]
    for c in conns:
        await c.open()
    for g in range(groups):  # the coordinators exist (Kafka: FindCoordinator creates the topic)
        while True:
            r = await conns[0].call(10, 4, FindCoordinatorRequest(
                key_type=0, coordinator_keys=[f"hb-{g}-{topic}"]), FindCoordinatorResponse)
            if r.coordinators[0].error_code == 0:
                break
            await asyncio.sleep(0.2)
    rtts: list = []
    # Once every member is settled, the members' phases are whatever the joins left them: on
    # both brokers the reconciliation answers whole groups at once, so hundreds of members end
    # up heartbeating within the same ~100 ms every interval (a measured 440 in one 100 ms
    # slice), and the round trip then measures how fast a burst drains, which depends on the
    # broker's join timing more than on its heartbeat. For the measurement every member moves
    # to its own slot of the interval (index / total of it, from ``phase0`` on) and sends on a
    # fixed schedule from there (open loop: a slow answer does not delay the next send), so
    # both brokers see the same even 200 heartbeats/s.
    phase0: list = [None]
    stop_at = [0.0]
    settled: set = set()
    total = groups * per_group
    intervals = [1.0]

    async def member(index):
        conn = conns[index % connections]
        group = f"hb-{index // per_group}-{topic}"
        member_id = uuid.uuid4().hex[:22]
        epoch, owned = 0, []
        next_at = None
        await asyncio.sleep((index % 100) / 100)
        while not stop_at[0] or (next_at or 0.0) < stop_at[0]:
            if epoch == 0:
                req = Req(group_id=group, member_id=member_id, member_epoch=0,
                          rebalance_timeout_ms=30000, subscribed_topic_names=[topic],
                          topic_partitions=[])
            else:
                req = Req(group_id=group, member_id=member_id, member_epoch=epoch,
                          topic_partitions=owned)
            t0 = time.monotonic()
            r = await conn.call(68, 1, req, Resp)
            if phase0[0] is not None and t0 >= phase0[0]:
                rtts.append(time.monotonic() - t0)
            interval = 1.0
            if r.error_code:
                epoch, owned = 0, []
                settled.discard(index)
            else:
                if r.member_epoch == epoch and r.assignment is None:
                    settled.add(index)
                else:
                    settled.discard(index)
                epoch = r.member_epoch
                interval = r.heartbeat_interval_ms / 1000
                intervals.append(interval)
                if r.assignment is not None:
                    owned = [Req.TopicPartitions(topic_id=tp.topic_id, partitions=tp.partitions)
                             for tp in r.assignment.topic_partitions]
            if phase0[0] is None:
                await asyncio.sleep(interval)
                continue
            next_at = phase0[0] + index / total * interval if next_at is None \
                else next_at + interval
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    tasks = [asyncio.create_task(member(i)) for i in range(total)]
    deadline = time.monotonic() + 180
    while len(settled) < total and time.monotonic() < deadline:  # joins and reconciliation
        await asyncio.sleep(0.5)
    if len(settled) < total:
        raise RuntimeError(f"only {len(settled)} of {total} members settled in 180 s")
    # Every member answers once more before phase0, then takes its slot.
    phase0[0] = time.monotonic() + max(intervals) + 1.0
    stop_at[0] = phase0[0] + seconds
    await asyncio.gather(*tasks)
    for c in conns:
        c.task.cancel()
        c.writer.close()
    rtts.sort()
    return (statistics.median(rtts) * 1000, rtts[int(0.99 * len(rtts))] * 1000)


CELLS = ("join", "settle", "heartbeat")


def one_round(bootstrap: str, hb_seconds: float, cells_wanted=CELLS) -> dict:
    cells = {}
    if "join" in cells_wanted:
        for n in (1, 3, 10):
            cells[f"join_{n}_members_s"] = join_round(bootstrap, n)
    if "settle" in cells_wanted:
        cells["settle_after_leave_s"], cells["settle_after_join_s"] = settle_rounds(bootstrap)
    if "heartbeat" in cells_wanted:
        p50, p99 = asyncio.run(heartbeat_round(bootstrap, hb_seconds))
        cells["heartbeat_p50_ms"], cells["heartbeat_p99_ms"] = p50, p99
    return cells


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--hb-seconds", type=float, default=30.0)
    ap.add_argument("--cells", default=",".join(CELLS),
                    help=f"comma-separated subset of {', '.join(CELLS)} (default: all)")
    ap.add_argument("--only", choices=("kbroker", "kafka"),
                    help="run one broker only (no ratio): e.g. to profile it")
    ap.add_argument("--bootstrap", help="with --only: use this running broker instead of "
                    "starting one (e.g. a kbroker under a profiler)")
    ap.add_argument("--kbroker-port", type=int, default=0, help="default: any free port")
    ap.add_argument("--kafka-port", type=int, help="Kafka's port (its controller: the next "
                    "one); default: any free ports")
    args = ap.parse_args()
    wanted = tuple(c for c in args.cells.split(",") if c)
    if unknown := set(wanted) - set(CELLS):
        ap.error(f"unknown cells: {', '.join(sorted(unknown))}")
    if args.bootstrap and not args.only:
        ap.error("--bootstrap needs --only")
    work = Path(tempfile.mkdtemp(prefix="bench-cg-"))
    kbroker = kafka = None
    brokers = []
    if args.only != "kafka":
        if args.bootstrap is None:
            kbroker = BrokerProcess(work / "kbroker", port=args.kbroker_port).start()
        brokers.append(("kbroker", args.bootstrap or kbroker.bootstrap))
    if args.only != "kbroker":
        if args.bootstrap is None:
            kafka = start_kafka(port=args.kafka_port or free_port(),
                                controller_port=args.kafka_port and args.kafka_port + 1,
                                data_dir=str(work / "kafka"))
        brokers.append(("kafka", args.bootstrap or kafka.bootstrap))
    results: dict[str, list[dict]] = {name: [] for name, _ in brokers}
    try:
        for i in range(args.rounds):
            for name, bootstrap in brokers if i % 2 == 0 else brokers[::-1]:
                cells = one_round(bootstrap, args.hb_seconds, wanted)
                results[name].append(cells)
                print(f"round {i} {name}: " + ", ".join(f"{k}={v:,.2f}" for k, v in cells.items()),
                      flush=True)
    finally:
        if kbroker is not None:
            kbroker.kill()
        if kafka is not None:
            kafka.stop()
    if len(brokers) < 2:
        return 0
    print(f"\n| metric | kbroker | Kafka {DEFAULT_VERSION} | ratio |\n| --- | ---: | ---: | ---: |")
    for key in results["kbroker"][0]:
        k = statistics.median(c[key] for c in results["kbroker"])
        a = statistics.median(c[key] for c in results["kafka"])
        print(f"| {key} | {k:,.2f} | {a:,.2f} | {k / a:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
