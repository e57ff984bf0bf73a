#!/usr/bin/env python3
"""Micro-benchmark of the protocol layer (not a test): decode/encode times and codec speeds.

    python tools/bench_protocol.py [--quick]

Cases: ProduceRequest with 1 topic x 1 partition x 1 MiB of records and with 50 topics x 20
partitions; FetchResponse and MetadataResponse with 1,000 partitions; CRC32C over 1 MiB; each
compression codec over 1 MiB of semi-compressible data. Targets (issue 2): the structure of the
1 MiB single-partition ProduceRequest decodes in under 20 microseconds without touching the
record bytes; CRC32C >= 1 GB/s.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import crc32c  # noqa: E402

from kbroker.protocol import messages  # noqa: E402

MIB = 1024 * 1024


def best_of(fn, repeat: int, number: int) -> float:
    """Best mean seconds per call over ``repeat`` runs of ``number`` calls."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    return best


def fmt_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:9.2f} us"
    return f"{seconds * 1e3:9.2f} ms"


def produce_request(topics: int, partitions: int, record_bytes: int):
    P = messages.request_class(0)
    records = os.urandom(record_bytes)
    return P(acks=-1, timeout_ms=30000, topic_data=[
        P.TopicProduceData(name=f"topic-{t}", partition_data=[
            P.PartitionProduceData(index=p, records=records) for p in range(partitions)])
        for t in range(topics)])


def fetch_response(partitions: int):
    F = messages.response_class(1)
    records = os.urandom(1024)
    per_topic = 10
    return F(responses=[
        F.FetchableTopicResponse(topic=f"topic-{t}", topic_id=uuid.uuid4(), partitions=[
            F.PartitionData(partition_index=p, high_watermark=1000, last_stable_offset=1000,
                            log_start_offset=0, records=records) for p in range(per_topic)])
        for t in range(partitions // per_topic)])


def metadata_response(partitions: int):
    M = messages.response_class(3)
    per_topic = 10
    return M(brokers=[M.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=9092)],
             cluster_id="abc", controller_id=1, topics=[
        M.MetadataResponseTopic(name=f"topic-{t}", topic_id=uuid.uuid4(), partitions=[
            M.MetadataResponsePartition(partition_index=p, leader_id=1, leader_epoch=0,
                                        replica_nodes=[1], isr_nodes=[1]) for p in range(per_topic)])
        for t in range(partitions // per_topic)])


def bench_message(name, message, cls, version, repeat, number):
    encoded = memoryview(b"".join(message.encode(version)))
    decode = best_of(lambda: cls.decode(encoded, version), repeat, number)
    encode = best_of(lambda: message.encode(version), repeat, number)
    print(f"{name:<58} v{version:<3} decode {fmt_time(decode)}   encode {fmt_time(encode)}"
          f"   ({len(encoded):,} bytes)")


def compressible(size: int) -> bytes:
    rng = random.Random(7)
    words = [bytes(rng.choice(b"abcdefghijklmnop") for _ in range(rng.randint(3, 9)))
             for _ in range(500)]
    out = bytearray()
    while len(out) < size:
        out += b'{"user": "' + rng.choice(words) + b'", "n": ' + str(rng.randint(0, 10**6)).encode() + b"}\n"
    return bytes(out[:size])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args(argv)
    repeat = 3 if args.quick else 7
    print(f"python {sys.version.split()[0]} on {os.cpu_count()} cores\n")

    P = messages.request_class(0)
    big = produce_request(1, 1, MIB)
    for version in (3, 9, 12):
        bench_message("ProduceRequest 1 topic x 1 partition x 1 MiB", big, P, version,
                      repeat, 2000)
    wide = produce_request(50, 20, 1024)
    bench_message("ProduceRequest 50 topics x 20 partitions x 1 KiB", wide, P, 9, repeat, 20)
    F = messages.response_class(1)
    bench_message("FetchResponse 1,000 partitions x 1 KiB", fetch_response(1000), F, 16,
                  repeat, 20)
    M = messages.response_class(3)
    bench_message("MetadataResponse 1,000 partitions", metadata_response(1000), M, 12, repeat, 20)
    bench_message("MetadataResponse 1,000 partitions", metadata_response(1000), M, 1, repeat, 20)

    data = os.urandom(MIB)
    crc = best_of(lambda: crc32c.crc32c(data), repeat, 200)
    print(f"\nCRC32C over 1 MiB: {MIB / crc / 1e9:.2f} GB/s")

    try:
        from kbroker.protocol import compression
    except ImportError:
        print("codecs: kbroker.protocol.compression not available")
        return 0
    sample = compressible(MIB)
    print("\ncodecs over 1 MiB of JSON-like text:")
    for codec in (compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD):
        packed = compression.compress(codec, sample)
        c = best_of(lambda: compression.compress(codec, sample), max(2, repeat // 2), 3)
        d = best_of(lambda: compression.decompress(codec, packed, 2 * MIB), max(2, repeat // 2), 5)
        print(f"  {compression.CODEC_NAMES[codec]:<7} ratio {len(sample) / len(packed):5.2f}   "
              f"compress {MIB / c / 1e6:8.1f} MB/s   decompress {MIB / d / 1e6:8.1f} MB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
