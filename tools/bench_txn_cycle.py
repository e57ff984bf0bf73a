#!/usr/bin/env python3
"""The exactly-once transaction cycle, kbroker against Apache Kafka (the reference version of
tools/kafka_ref, 4.4.0) in the same run: how many consume-transform-produce transactions one
member completes per second, and how long each cycle takes.

A fresh kbroker and a fresh Kafka run side by side (both at once, so the machine's noise falls on
both). On each, an idempotent producer writes ``--rate`` records/s to a 7-partition input topic,
and one member per client family copies it to an output topic in transactions, one transaction per
poll, for ``--seconds``: franz-go (``compat_tests/go``'s ``eos-copy``, transactions v2 / KIP-890)
and the Java client (the Java driver's ``eos-member``). With a steady input the cycle time decides
how many records each transaction holds, so a slow cycle shows as fewer, bigger transactions
(the finding of the 30-minute eos_chains soak: franz-go made 5x fewer transactions on kbroker).

Reported per broker and client: transactions/s, records per transaction, and for franz-go the
cycle time (End to End), the poll that fed the transaction and the End (flush, offsets, EndTxn)
as p50/p99 in milliseconds.

Run: ``python tools/bench_txn_cycle.py [--seconds 60] [--rate 1000] [--clients go,java]``.
Needs the built drivers (``scripts/install-test-deps.sh``) and Kafka's jars
(``python tools/kafka_ref/run_kafka.py fetch``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.broker_process import BrokerProcess  # noqa: E402
from tools.eos_chains import GO_DRIVER, InputProducer, member_command  # noqa: E402
from tools.kafka_ref.run_kafka import COMPARABLE_SETTINGS, free_port, start_kafka  # noqa: E402

PARTITIONS = 7


def create_topics(bootstrap: str, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(n, PARTITIONS, 1) for n in names]).values():
        future.result(30)


def member(client: str, bootstrap: str, source: str, sink: str, seconds: float,
           log_path: Path) -> dict:
    """One member copying ``source`` to ``sink`` for ``seconds``; its "done" event."""
    tag = uuid.uuid4().hex[:8]
    command = member_command(client, bootstrap, source, sink, f"cycle-{client}-{tag}",
                             f"cycle-{client}-{tag}", 10**9, int(seconds * 1000))
    with open(log_path, "wb") as out, open(log_path.with_suffix(".err"), "wb") as err:
        subprocess.run(command, stdout=out, stderr=err, timeout=seconds + 120)
    for line in reversed(log_path.read_text(errors="replace").splitlines()):
        if line.startswith("{") and '"done"' in line:
            return json.loads(line)
    raise RuntimeError(f"{client} member ended without a done event; see {log_path}")


def workload(which: str, bootstrap: str, clients: list[str], seconds: float, rate: int,
             workdir: Path) -> dict:
    """Every client in turn against ``bootstrap``, each on its own input topic fed at ``rate``."""
    results = {}
    for client in clients:
        source, sink = f"cycle-in-{uuid.uuid4().hex[:6]}", f"cycle-out-{uuid.uuid4().hex[:6]}"
        create_topics(bootstrap, source, sink)
        producer = InputProducer(bootstrap, source, rate)
        producer.start()
        try:
            done = member(client, bootstrap, source, sink, seconds,
                          workdir / f"{which}-{client}.log")
        finally:
            producer.stopping.set()
            producer.join(60)
        done["seconds"] = seconds
        results[client] = done
    return results


def line(which: str, client: str, done: dict) -> str:
    txns = done["committed"] + done["aborted"]
    text = (f"{which:8} {client:5} {txns / done['seconds']:7.1f} txn/s "
            f"{done['copied'] / max(1, done['committed']):7.1f} records/txn "
            f"({done['committed']} committed, {done['aborted']} aborted)")
    for key in ("cycle_ms", "poll_ms", "end_ms"):
        q = done.get(key)
        if q:
            text += f"  {key[:-3]} p50 {q['p50']:.1f} p99 {q['p99']:.1f}"
    if done.get("errors"):
        text += f"  errors {done['errors']}"
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--rate", type=int, default=1000, help="input records per second")
    parser.add_argument("--clients", default="go,java", help="go, java or both")
    parser.add_argument("--only", choices=("kbroker", "kafka"),
                        help="one broker instead of both")
    parser.add_argument("--broker-set", action="append", default=[], metavar="K=V",
                        help="a kbroker setting (e.g. kbroker.trace=json)")
    args = parser.parse_args()
    clients = args.clients.split(",")
    if "go" in clients and not GO_DRIVER.exists():
        parser.error(f"{GO_DRIVER} is missing: build compat_tests/go")
    workdir = Path(tempfile.mkdtemp(prefix="bench-txn-cycle-"))
    print(f"logs in {workdir}")
    # kbroker gets the reference Kafka's group/transaction settings (no initial rebalance delay).
    overrides = {**COMPARABLE_SETTINGS, **dict(kv.split("=", 1) for kv in args.broker_set)}
    results: dict[str, dict] = {}
    errors: list[str] = []
    brokers = {}
    try:
        if args.only != "kafka":
            brokers["kbroker"] = BrokerProcess(workdir / "kbroker", overrides).start()
        if args.only != "kbroker":
            brokers["kafka"] = start_kafka(port=free_port(), data_dir=str(workdir / "kafka"))

        def run(which):
            try:
                results[which] = workload(which, brokers[which].bootstrap, clients,
                                          args.seconds, args.rate, workdir)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(f"{which}: {e!r}")

        threads = [threading.Thread(target=run, args=(w,)) for w in brokers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for b in brokers.values():
            b.stop()
    for which in brokers:
        for client, done in results.get(which, {}).items():
            print(line(which, client, done))
    for client in clients:
        if all(client in results.get(w, {}) for w in ("kbroker", "kafka")):
            k, r = results["kbroker"][client], results["kafka"][client]
            ratio = ((k["committed"] + k["aborted"]) / max(1, r["committed"] + r["aborted"]))
            print(f"{client}: kbroker/Kafka transactions {ratio:.2f}")
    for e in errors:
        print(e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
