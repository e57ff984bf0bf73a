#!/usr/bin/env python3
"""Capture the raw internal records real Apache Kafka writes to __consumer_offsets and
__transaction_state, for tests/protocol/test_internal_records.py.

    .venv/bin/python tests/golden/internal/capture_internal_records.py [--port 19192]

Starts the reference Kafka (tools/kafka_ref/run_kafka.py), then with confluent-kafka:
  1. produces 3 records to topic ``golden-internal`` (1 partition);
  2. a classic-protocol consumer in group ``golden-group`` subscribes, reads the 3 records and
     commits synchronously (offset 3), then commits offset 2 with metadata ``golden-meta``
     explicitly, then closes (leaves the group);
  3. a transactional producer (``transactional.id=golden-txn``) runs init_transactions, begin,
     produce 1 record to ``golden-txn-topic``, commit;
  4. the same with the Java client (TxnProducer.java, ``transactional.id=golden-java-txn``), which
     uses transaction version 2 (KIP-890) and so sets the tagged fields of TransactionLogValue v1;
then reads every partition of the two internal topics from the beginning by assignment and
writes each raw (key, value) as one line of ``records.jsonl`` next to this script. Stops Kafka.
"""
from __future__ import annotations

import argparse
import json
import struct
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition, version, libversion

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tools" / "kafka_ref"))
import run_kafka  # noqa: E402

OUT = Path(__file__).resolve().parent / "records.jsonl"
TOPIC = "golden-internal"
TXN_TOPIC = "golden-txn-topic"
GROUP = "golden-group"
TXN_ID = "golden-txn"
JAVA_TXN_ID = "golden-java-txn"


def log(msg):
    print(f"[capture-internal] {msg}", file=sys.stderr, flush=True)


def describe(topic: str, key: bytes | None, value: bytes | None) -> str:
    if key is None or len(key) < 2:
        return "unknown"
    (rtype,) = struct.unpack_from(">h", key)
    if topic == "__transaction_state":
        kind = {0: "TransactionLog"}.get(rtype, f"type{rtype}")
    else:
        kind = {0: "LegacyOffsetCommit", 1: "OffsetCommit", 2: "GroupMetadata"}.get(
            rtype, f"type{rtype}")
    if value is None:
        return f"{kind} tombstone"
    (vver,) = struct.unpack_from(">h", value)
    return f"{kind} key v{rtype} value v{vver}"


def run(bootstrap: str):
    p = Producer({"bootstrap.servers": bootstrap, "client.id": "golden-producer"})
    for i in range(3):
        p.produce(TOPIC, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0)
    assert p.flush(30) == 0

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "client.id": "golden-client",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "session.timeout.ms": 10000})
    c.subscribe([TOPIC])
    got = []
    deadline = time.time() + 60
    while len(got) < 3 and time.time() < deadline:
        m = c.poll(1.0)
        if m is not None and not m.error():
            got.append(m)
    assert len(got) == 3, got
    c.commit(asynchronous=False)
    c.commit(offsets=[TopicPartition(TOPIC, 0, 2, metadata="golden-meta")], asynchronous=False)
    c.close()
    log("group done")

    tp = Producer({"bootstrap.servers": bootstrap, "client.id": "golden-txn-producer",
                   "transactional.id": TXN_ID, "transaction.timeout.ms": 60000})
    tp.init_transactions(30)
    tp.begin_transaction()
    tp.produce(TXN_TOPIC, key=b"tk", value=b"tv", partition=0)
    tp.commit_transaction(30)
    log("transaction done")

    # The same with the Java client, which uses transaction version 2 (KIP-890) against 4.x.
    cp = run_kafka.classpath()
    subprocess.run(["java", "-cp", cp, str(Path(__file__).with_name("TxnProducer.java")),
                    bootstrap, JAVA_TXN_ID, TXN_TOPIC], check=True, timeout=120)
    log("java transaction done")
    time.sleep(3)  # the CompleteCommit record follows the markers asynchronously

    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "golden-reader",
                       "enable.auto.commit": False, "enable.partition.eof": True})
    md = reader.list_topics(timeout=10)
    rows = []
    for topic in ("__consumer_offsets", "__transaction_state"):
        parts = sorted(md.topics[topic].partitions)
        reader.assign([TopicPartition(topic, n, -2) for n in parts])  # -2 = beginning
        eof = set()
        deadline = time.time() + 30
        while len(eof) < len(parts) and time.time() < deadline:
            m = reader.poll(1.0)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    eof.add(m.partition())
                continue
            rows.append({
                "topic": topic, "partition": m.partition(), "offset": m.offset(),
                "what": describe(topic, m.key(), m.value()),
                "key": m.key().hex() if m.key() is not None else None,
                "value": m.value().hex() if m.value() is not None else None,
            })
        reader.unassign()
    reader.close()
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=19192)
    args = ap.parse_args()
    h = run_kafka.start_kafka(port=args.port)
    try:
        rows = run(h.bootstrap)
    finally:
        h.stop()
    ck = version() if isinstance(version(), str) else version()[0]
    confluent = f"confluent-kafka {ck} (librdkafka {libversion()[0]})"
    java = f"Java kafka-clients {run_kafka.DEFAULT_VERSION}"
    with OUT.open("w") as f:
        for row in rows:
            row["kafka_version"] = run_kafka.DEFAULT_VERSION
            row["client"] = java if row["key"].endswith(JAVA_TXN_ID.encode().hex()) else confluent
            f.write(json.dumps(row, sort_keys=True) + "\n")
    for row in rows:
        log(f"{row['topic']}[{row['partition']}]@{row['offset']}: {row['what']}")
    log(f"wrote {len(rows)} records to {OUT}")


if __name__ == "__main__":
    main()
