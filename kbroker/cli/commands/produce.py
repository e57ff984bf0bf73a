"""``kbroker topic produce T``: one record per line of stdin."""

from __future__ import annotations

import sys

from kbroker.cli.commands.common import (BOOTSTRAP_TIMEOUT_MS, CommandError, client_config,
                                         connect, leaf)

COMPRESSION = ("none", "gzip", "snappy", "lz4", "zstd")


def register(topic, shared) -> None:
    p = leaf(topic, "produce", shared, "produce records, one per line of stdin", examples="""
echo hello | kbroker topic produce orders
printf 'a\\nb\\n' | kbroker topic produce orders -k user1 -H source:cli -p 0 -z zstd --acks 1""")
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("-k", "--key", help="key of every record")
    p.add_argument("-H", "--header", dest="headers", action="append", default=[],
                   metavar="KEY:VALUE", help="header of every record; repeatable")
    p.add_argument("-p", "--partition", type=int, help="partition (default: the partitioner's)")
    p.add_argument("-z", "--compression", choices=COMPRESSION, default="none")
    p.add_argument("--acks", choices=["-1", "all", "0", "1"], default="-1",
                   help="-1/all (default), 1 or 0")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing per record")
    p.set_defaults(run=run)


def parse_header(item: str) -> tuple[str, bytes]:
    key, sep, value = item.partition(":")
    if not sep:
        key, sep, value = item.partition("=")
    if not sep or not key:
        raise CommandError(f"-H {item!r}: expected KEY:VALUE", 2)
    return key, value.encode()


def run(args) -> int:
    from kafka import KafkaProducer

    headers = [parse_header(h) for h in args.headers]
    config = client_config(args)
    acks = {"-1": "all", "all": "all", "0": 0, "1": 1}[args.acks]
    producer = connect(lambda: KafkaProducer(
        **config,
        bootstrap_timeout_ms=BOOTSTRAP_TIMEOUT_MS, acks=acks,
        compression_type=None if args.compression == "none" else args.compression, linger_ms=5),
        config["bootstrap_servers"])
    key = args.key.encode() if args.key is not None else None
    pending = []
    try:
        for line in sys.stdin.buffer:
            value = line[:-1] if line.endswith(b"\n") else line
            pending.append(producer.send(args.topic, value, key=key, partition=args.partition,
                                         headers=headers))
            if len(pending) >= 1000:
                _report(pending, args.quiet)
                pending = []
        producer.flush()
        _report(pending, args.quiet)
    finally:
        producer.close(timeout=5)
    return 0


def _report(futures, quiet: bool) -> None:
    for future in futures:
        meta = future.get(timeout=30)
        if not quiet:
            print(f"Produced to partition {meta.partition} at offset {meta.offset} "
                  f"with timestamp {meta.timestamp}.")
