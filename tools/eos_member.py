#!/usr/bin/env python3
"""One member of a transactional consume-transform-produce chain on librdkafka (confluent-kafka),
the pattern of confluent-kafka's own ``eos-transactions.py`` example: read_committed input in a
consumer group, each poll's records copied to the same partition of the output topic in one
transaction, the group's offsets committed in it (``send_offsets_to_transaction`` with the
consumer's group metadata). An abortable error aborts and rewinds to the committed offsets.

    python tools/eos_member.py --bootstrap H:P --input IN --output OUT --group G
        --transactional-id ID [--transactions N] [--max-ms MS]

It stops after N transactions, MS, or SIGTERM and prints one JSON "done" event (copied,
committed, aborted, errors by where and name), the contract of ``tools/eos_chains.py``.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections import Counter

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition


def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("bootstrap", "input", "output", "group", "transactional-id"):
        parser.add_argument(f"--{name}", required=True)
    parser.add_argument("--transactions", type=int, default=0)
    parser.add_argument("--max-ms", type=int, default=120_000)
    args = parser.parse_args()
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    errors: Counter = Counter()

    def on_delivery(err, _msg):
        if err is not None:
            errors[f"produce:{err.name()}"] += 1

    producer = Producer({"bootstrap.servers": args.bootstrap,
                         "transactional.id": args.transactional_id, "linger.ms": 5,
                         "log_level": 0})
    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": args.group,
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest", "log_level": 0})
    producer.init_transactions(30)
    consumer.subscribe([args.input])
    copied = committed = aborted = 0
    deadline = time.monotonic() + args.max_ms / 1000
    while not stopping and time.monotonic() < deadline and (
            not args.transactions or committed + aborted < args.transactions):
        batch = [m for m in consumer.consume(1000, 0.2) if m.error() is None]
        if not batch:
            continue
        producer.begin_transaction()
        try:
            offsets = {}
            for msg in batch:
                while True:
                    try:
                        producer.produce(args.output, key=msg.key(), value=msg.value(),
                                         partition=msg.partition(), on_delivery=on_delivery)
                        break
                    except BufferError:
                        producer.poll(0.05)
                offsets[msg.partition()] = msg.offset() + 1
            producer.send_offsets_to_transaction(
                [TopicPartition(args.input, p, o) for p, o in offsets.items()],
                consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
            committed += 1
            copied += len(batch)
        except KafkaException as exc:
            error = exc.args[0]
            errors[f"end:{error.name()}"] += 1
            if not error.txn_requires_abort():
                break  # fatal (fenced): this member is done
            producer.abort_transaction(30)
            aborted += 1
            rewind(consumer)
    consumer.close()
    producer.flush(10)
    print(json.dumps({"event": "done", "copied": copied, "committed": committed,
                      "aborted": aborted, "errors": dict(sorted(errors.items()))}), flush=True)
    return 0


def rewind(consumer: Consumer) -> None:
    assigned = consumer.assignment()
    for tp in consumer.committed(assigned, 30):
        consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))


if __name__ == "__main__":
    sys.exit(main())
