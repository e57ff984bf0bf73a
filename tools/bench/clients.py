"""confluent-kafka workloads, run as a child process so the harness never shares its interpreter.

    python tools/bench/clients.py produce  BOOTSTRAP TOPIC RECORDS SIZE ACKS COMPRESSION
    python tools/bench/clients.py consume  BOOTSTRAP TOPIC RECORDS
    python tools/bench/clients.py latency  BOOTSTRAP TOPIC RATE SECONDS SIZE

Each prints one JSON object. Produce and consume use librdkafka's defaults apart from a larger
local queue (so the Python loop is never the one waiting); records are random upper-case letters,
like Kafka's ProducerPerformance payload. The latency workload sends SIZE-byte records at a fixed
RATE with ``linger.ms=0`` and acks=1; a consumer in the same process (assign(), default
``fetch.wait.max.ms``, ``fetch.min.bytes=1``, ``poll()`` per record) reads them back; both
disable Nagle. Each record carries its send time, so the latency is send-to-receive end to end
(the first second is warm-up and not counted).
"""

from __future__ import annotations

import json
import random
import struct
import sys
import threading
import time

from confluent_kafka import OFFSET_END, Consumer, KafkaException, Producer, TopicPartition


def payload(size: int) -> bytes:
    rng = random.Random(42)
    return bytes(rng.randrange(65, 91) for _ in range(size))


def produce(bootstrap: str, topic: str, records: int, size: int, acks: str,
            compression: str) -> dict:
    errors = []

    def delivered(err, _msg):
        if err is not None and len(errors) < 5:
            errors.append(str(err))

    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks,
                         "compression.type": compression,
                         "queue.buffering.max.messages": 2_000_000,
                         "queue.buffering.max.kbytes": 2_097_151})
    value = payload(size)
    produce_ = producer.produce
    started = time.perf_counter()
    for i in range(records):
        try:
            produce_(topic, value, on_delivery=delivered)
        except BufferError:
            producer.poll(0.01)
            produce_(topic, value, on_delivery=delivered)
        if not i & 0x3FFF:
            producer.poll(0)
    left = producer.flush(300)
    elapsed = time.perf_counter() - started
    if left or errors:
        raise SystemExit(f"produce failed: {left} undelivered, errors {errors}")
    return {"seconds": elapsed, "mb_per_s": records * size / 1e6 / elapsed,
            "records_per_s": records / elapsed}


def consume(bootstrap: str, topic: str, records: int) -> dict:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-confluent",
                         "enable.auto.commit": False, "enable.partition.eof": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen = size = 0
    started = time.perf_counter()
    while seen < records:
        # Never ask for more than remain: consume() waits for the full count or the timeout.
        messages = consumer.consume(min(10000, records - seen), 10)
        if not messages:
            raise SystemExit(f"consumer stalled after {seen} records")
        for m in messages:
            if m.error() is not None:
                raise KafkaException(m.error())
            size += len(m.value())
        seen += len(messages)
    elapsed = time.perf_counter() - started
    consumer.close()
    return {"seconds": elapsed, "mb_per_s": size / 1e6 / elapsed, "records": seen}


def latency(bootstrap: str, topic: str, rate: int, seconds: float, size: int) -> dict:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-latency",
                         "enable.auto.commit": False, "fetch.min.bytes": 1,
                         "socket.nagle.disable": True})
    consumer.assign([TopicPartition(topic, 0, OFFSET_END)])
    # Let the consumer resolve its position before the first record goes out.
    deadline = time.time() + 10
    while time.time() < deadline:
        consumer.consume(1, 0.1)
        if consumer.position([TopicPartition(topic, 0)])[0].offset >= 0:
            break
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0,
                         "socket.nagle.disable": True})
    filler = payload(max(0, size - 8))
    total = int(rate * seconds)
    warmup = rate  # the first second
    latencies: list[float] = []
    done = threading.Event()

    def receive():
        got = 0
        while got < total and not done.is_set():
            m = consumer.poll(0.1)  # returns at the first record (consume(n) waits for n)
            if m is None or m.error() is not None:
                continue
            now = time.perf_counter()
            sent = struct.unpack_from(">d", m.value())[0]
            if got >= warmup:
                latencies.append(now - sent)
            got += 1

    reader = threading.Thread(target=receive)
    reader.start()
    started = time.perf_counter()
    for i in range(total):
        due = started + i / rate
        wait = due - time.perf_counter()
        if wait > 0.0005:
            time.sleep(wait)
        producer.produce(topic, struct.pack(">d", time.perf_counter()) + filler)
        if not i % 50:
            producer.poll(0)
    producer.flush(30)
    reader.join(30)
    done.set()
    consumer.close()
    latencies.sort()
    if len(latencies) < (total - warmup) * 0.99:
        raise SystemExit(f"latency: only {len(latencies)} of {total - warmup} records came back")

    def pct(p):
        return latencies[min(len(latencies) - 1, int(p / 100 * len(latencies)))] * 1000

    return {"p50_ms": pct(50), "p99_ms": pct(99), "max_ms": latencies[-1] * 1000,
            "records": len(latencies)}


def main(argv: list[str]) -> int:
    cmd, args = argv[0], argv[1:]
    if cmd == "produce":
        out = produce(args[0], args[1], int(args[2]), int(args[3]), args[4], args[5])
    elif cmd == "consume":
        out = consume(args[0], args[1], int(args[2]))
    elif cmd == "latency":
        out = latency(args[0], args[1], int(args[2]), float(args[3]), int(args[4]))
    else:
        raise SystemExit(f"unknown workload {cmd}")
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
