"""``kbroker topic produce T``: records from stdin, one per line or as ``-f FORMAT`` reads them
(:mod:`.produce_format`)."""

from __future__ import annotations

import sys

from kbroker.cli.commands.common import (CommandError, client_config,
                                         connect, leaf)

COMPRESSION = ("none", "gzip", "snappy", "lz4", "zstd")


def register(topic, shared) -> None:
    p = leaf(topic, "produce", shared, "produce records from stdin (one per line, or -f)",
             examples="""
echo hello | kbroker topic produce orders
echo 'user1 hello' | kbroker topic produce orders -f '%k %v\\n'
printf 'orders;k;v\\n' | kbroker topic produce -f '%t;%k;%v\\n'   # the topic from the input
printf 'a\\nb\\n' | kbroker topic produce orders -k user1 -H source:cli -p 0 -z zstd --acks 1""")
    p.add_argument("topic", metavar="TOPIC", nargs="?",
                   help="topic of every record (optional when -f reads %%t)")
    p.add_argument("-f", "--format", default="%v\\n",
                   help="input format, rpk style: %%t topic, %%k key, %%v value, %%p partition, "
                        "%%h headers (k=v,...), text between them as delimiters, \\n \\t \\xNN "
                        "(default '%%v\\n': one value per line)")
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

    from kbroker.cli.commands import produce_format

    try:
        tokens = produce_format.compile_format(args.format)
    except produce_format.FormatError as exc:
        raise CommandError(str(exc), 2) from None
    if args.topic is None and ("field", "topic") not in tokens:
        raise CommandError("name a TOPIC, or read it from the input with -f '...%t...'", 2)
    headers = [parse_header(h) for h in args.headers]
    config = client_config(args)
    acks = {"-1": "all", "all": "all", "0": 0, "1": 1}[args.acks]
    producer = connect(lambda: KafkaProducer(
        **config, acks=acks,
        compression_type=None if args.compression == "none" else args.compression, linger_ms=5),
        config["bootstrap_servers"])
    key = args.key.encode() if args.key is not None else None
    pending = []
    try:
        for record in produce_format.records(tokens, sys.stdin.buffer):
            pending.append(producer.send(
                record.topic or args.topic, record.value,
                key=record.key if record.key is not None else key,
                partition=record.partition if record.partition is not None else args.partition,
                headers=headers + record.headers))
            if len(pending) >= 1000:
                _report(pending, args.quiet)
                pending = []
        producer.flush()
        _report(pending, args.quiet)
    except produce_format.FormatError as exc:
        producer.flush()  # what was read before the bad record is sent
        _report(pending, args.quiet)
        raise CommandError(f"-f: {exc}", 2) from None
    finally:
        producer.close(timeout=5)
    return 0


def _report(futures, quiet: bool) -> None:
    for future in futures:
        meta = future.get(timeout=30)
        if not quiet:
            print(f"Produced to partition {meta.partition} at offset {meta.offset} "
                  f"with timestamp {meta.timestamp}.")
