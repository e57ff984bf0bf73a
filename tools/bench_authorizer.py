#!/usr/bin/env python3
"""The cost of the ACL authorizer on a 1,000-ACL set (issue 14; target: within 5% of off).

Two measures:

1. per check, in process: ``Authorizer.authorize`` against 1,000 ACLs (600 literal topic ACLs,
   300 prefixed, 100 group ACLs), for a topic with a literal ALLOW, one covered by a prefix, and
   one no ACL covers;
2. end to end: a broker with the authorizer off, then one with it on and the same 1,000 ACLs
   (the bench topic allowed for ``User:ANONYMOUS`` among them); confluent-kafka produces
   ``--records`` small records in small batches (many Produce requests, so per-request checks
   weigh as much as they can), then consumes them. Rounds alternate off/on; the best of each
   and the median of each are reported as ratios on/off (the machine is shared: look at both),
   and so is the broker's CPU time per record (/proc), which moves less with the machine's load.

Run: ``python tools/bench_authorizer.py [--records 200000] [--rounds 2]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kbroker.security.authorizer import (Acl, Authorizer, Op, PatternType,  # noqa: E402
                                         Permission, ResourceType)
from kbroker.testing.procfs import cpu_seconds  # noqa: E402
from tests.broker_process import BrokerProcess  # noqa: E402

TOPIC = "bench-authz"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def acl_set() -> list[Acl]:
    acls = []
    for i in range(600):
        acls.append(Acl(ResourceType.TOPIC, f"topic-{i}", PatternType.LITERAL, f"User:u{i % 50}",
                        "*", Op.WRITE if i % 2 else Op.READ, Permission.ALLOW))
    for i in range(300):
        acls.append(Acl(ResourceType.TOPIC, f"team{i}-", PatternType.PREFIXED, f"User:u{i % 50}",
                        "*", Op.ALL, Permission.ALLOW))
    for i in range(98):
        acls.append(Acl(ResourceType.GROUP, f"group-{i}", PatternType.LITERAL, f"User:u{i % 50}",
                        "*", Op.READ, Permission.ALLOW))
    acls.append(Acl(ResourceType.TOPIC, TOPIC, PatternType.LITERAL, "User:ANONYMOUS", "*",
                    Op.ALL, Permission.ALLOW))
    acls.append(Acl(ResourceType.GROUP, "bench", PatternType.LITERAL, "User:ANONYMOUS", "*",
                    Op.READ, Permission.ALLOW))
    return acls


def per_check() -> None:
    acls = tuple(acl_set())
    authorizer = Authorizer([], False)
    authorizer.index(acls)
    for label, name in (("literal ALLOW", TOPIC), ("prefixed", "team7-orders"),
                        ("no ACL", "unrelated")):
        n = 100_000
        started = time.perf_counter()
        for _ in range(n):
            authorizer._decide("User:ANONYMOUS", "127.0.0.1", Op.WRITE, ResourceType.TOPIC, name)
        decide = (time.perf_counter() - started) / n * 1e6
        started = time.perf_counter()
        for _ in range(n):
            authorizer.authorize(acls, "User:ANONYMOUS", "127.0.0.1", Op.WRITE,
                                 ResourceType.TOPIC, name)
        cached = (time.perf_counter() - started) / n * 1e6
        print(f"authorize, {label:14s}: {decide:5.2f} us decided, {cached:5.2f} us remembered")


def end_to_end(root: Path, authorized: bool, records: int) -> tuple[float, float, float, float]:
    """Produce and consume rates (records/s) and the broker's CPU microseconds per record for
    each."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AclBinding, AdminClient, NewTopic

    settings = {"authorizer.class.name": AUTHORIZER, "super.users": "User:ANONYMOUS"} \
        if authorized else {}
    broker = BrokerProcess(root / f"{'on' if authorized else 'off'}-{time.monotonic_ns()}",
                           settings).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        if authorized:
            for future in admin.create_acls([AclBinding(int(a.resource_type), a.name,
                                                        int(a.pattern_type), a.principal, a.host,
                                                        int(a.operation), int(a.permission))
                                             for a in acl_set()]).values():
                future.result(30)
            # Super user only to create the set; the measured run checks the ACLs.
            broker.stop()
            broker = BrokerProcess(broker.data_dir, {"authorizer.class.name": AUTHORIZER}).start()
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0,
                             "batch.num.messages": 20, "acks": 1})
        value = b"x" * 100
        cpu = cpu_seconds(broker.proc.pid)
        started = time.perf_counter()
        for i in range(records):
            while True:
                try:
                    producer.produce(TOPIC, value)
                    break
                except BufferError:
                    producer.poll(0.01)
            if i % 1000 == 0:
                producer.poll(0)
        assert producer.flush(60) == 0
        produce_rate = records / (time.perf_counter() - started)
        produce_cpu = (cpu_seconds(broker.proc.pid) - cpu) / records * 1e6
        cpu = cpu_seconds(broker.proc.pid)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "bench",
                             "fetch.max.bytes": 1048576, "max.partition.fetch.bytes": 16384})
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        got, started = 0, time.perf_counter()
        while got < records:
            batch = consumer.consume(1000, 5)
            got += sum(1 for m in batch if m.error() is None)
        consume_rate = records / (time.perf_counter() - started)
        consume_cpu = (cpu_seconds(broker.proc.pid) - cpu) / records * 1e6
        consumer.close()
        return produce_rate, consume_rate, produce_cpu, consume_cpu
    finally:
        broker.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    per_check()
    runs: dict[bool, list[tuple[float, float, float, float]]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as root:
        for _ in range(args.rounds):
            for authorized in (False, True):
                p, c, pc, cc = end_to_end(Path(root), authorized, args.records)
                print(f"authorizer {'on ' if authorized else 'off'}: produce {p:9.0f} rec/s, "
                      f"consume {c:9.0f} rec/s; broker CPU per record: produce {pc:.2f} us, "
                      f"consume {cc:.2f} us")
                runs[authorized].append((p, c, pc, cc))
    for label, pick in (("best", max), ("median", statistics.median)):
        off = [pick(r[i] for r in runs[False]) for i in (0, 1)]
        on = [pick(r[i] for r in runs[True]) for i in (0, 1)]
        print(f"{label}: produce on/off {on[0] / off[0]:.3f}, consume on/off "
              f"{on[1] / off[1]:.3f} (target >= 0.95)")
    off = [statistics.median(r[i] for r in runs[False]) for i in (2, 3)]
    on = [statistics.median(r[i] for r in runs[True]) for i in (2, 3)]
    print(f"broker CPU per record, median: produce {off[0]:.2f} -> {on[0]:.2f} us "
          f"(on/off {on[0] / off[0]:.3f}), consume {off[1]:.2f} -> {on[1]:.2f} us "
          f"(on/off {on[1] / off[1]:.3f}; target <= 1.05)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
