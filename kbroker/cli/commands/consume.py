"""``kbroker topic consume T``: records as JSON lines, or through an rpk-style format string.

``-o`` speaks rpk's offset language (:mod:`.offsets`): ``start`` (the default), ``end``, ``N``,
``+N``, ``-N``, ``@TIMESTAMP``, and ranges ``A:B`` / ``@T1:T2`` that stop at B. ``-f`` understands ``%t`` topic, ``%k``
key, ``%v`` value, ``%p`` partition, ``%o`` offset, ``%T`` timestamp, ``%h`` headers (k=v,...),
``%K``/``%V`` key/value length, ``%%``, and ``\\n``, ``\\t``, ``\\\\``.
"""

from __future__ import annotations

import json
import re
import sys

from kbroker.cli.commands import offsets
from kbroker.cli.commands.common import (CommandError, client_config,
                                         connect, leaf)

_FORMAT_TOKEN = re.compile(rb"%[tkvpoThKV%]|\\[nt\\]")


def register(topic, shared) -> None:
    p = leaf(topic, "consume", shared, "consume records", examples="""
kbroker topic consume orders -o start -n 10
kbroker topic consume orders -o start:end -f '%p/%o %k=%v\\n'
kbroker topic consume orders -o -10:end             # the last 10 records per partition
kbroker topic consume orders -o @-1h:end            # the last hour
kbroker topic consume orders -o @2024-05-01:1h      # one hour of a day
kbroker topic consume orders -g my-group            # commits offsets as my-group""")
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("-o", "--offset", default=None,
                   help="start|end|N|+N|-N|@T, then optionally :end, :N or (after @T1) :T2, as in "
                        "rpk (default: start, or the group's committed offset)")
    p.add_argument("-g", "--group", help="consume as this group and commit offsets")
    p.add_argument("-n", "--num", type=int, help="stop after this many records")
    p.add_argument("-p", "--partitions", type=lambda s: [int(x) for x in s.split(",")],
                   help="comma-separated partitions (without -g)")
    p.add_argument("-f", "--format", help="format string (default: one JSON object per record)")
    p.set_defaults(run=run)


def parse_offset(text: str | None):
    """The ``-o`` value as an :class:`offsets.OffsetRange` (rpk's default: ``start``)."""
    try:
        return offsets.parse("start" if text is None else text)
    except offsets.OffsetError as exc:
        raise CommandError(f"-o {exc}", 2) from None


def formatter(fmt: str | None):
    if fmt is None:
        return _json_line
    template = fmt.encode()

    def render(record) -> bytes:
        def token(match) -> bytes:
            t = match.group(0)
            return {
                b"%t": lambda: record.topic.encode(), b"%k": lambda: record.key or b"",
                b"%v": lambda: record.value or b"", b"%p": lambda: str(record.partition).encode(),
                b"%o": lambda: str(record.offset).encode(), b"%T": lambda: str(record.timestamp).encode(),
                b"%h": lambda: b",".join(k.encode() + b"=" + (v or b"") for k, v in record.headers),
                b"%K": lambda: str(len(record.key or b"")).encode(),
                b"%V": lambda: str(len(record.value or b"")).encode(),
                b"%%": lambda: b"%", b"\\n": lambda: b"\n", b"\\t": lambda: b"\t", b"\\\\": lambda: b"\\",
            }[t]()
        return _FORMAT_TOKEN.sub(token, template)

    return render


def _json_line(record) -> bytes:
    def text(value):
        return None if value is None else value.decode("utf-8", errors="replace")

    entry = {"topic": record.topic, "key": text(record.key), "value": text(record.value),
             "timestamp": record.timestamp, "partition": record.partition, "offset": record.offset}
    if record.headers:
        entry["headers"] = [{"key": k, "value": text(v)} for k, v in record.headers]
    return (json.dumps(entry) + "\n").encode()


def run(args) -> int:
    from kafka import KafkaConsumer, TopicPartition

    wanted = parse_offset(args.offset)
    render = formatter(args.format)
    config = client_config(args)
    if args.group and wanted.begin.kind not in ("start", "end"):
        raise CommandError("with -g, -o begins at start or end (where to begin without a committed "
                           "offset); use `kbroker group seek` to move a group", 2)
    consumer = connect(lambda: KafkaConsumer(
        **config, group_id=args.group, enable_auto_commit=False,
        auto_offset_reset="earliest" if wanted.begin.kind == "start" else "latest"),
        config["bootstrap_servers"])
    try:
        partitions = consumer.partitions_for_topic(args.topic)
        if not partitions:
            raise CommandError(f"UNKNOWN_TOPIC_OR_PARTITION: topic {args.topic}")
        tps = [TopicPartition(args.topic, p) for p in sorted(args.partitions or partitions)]
        starts, ends = consumer.beginning_offsets(tps), consumer.end_offsets(tps)
        bounds = {tp: (starts[tp], ends[tp]) for tp in tps}

        def by_time(ms: int) -> dict:
            found = consumer.offsets_for_times({tp: ms for tp in tps})
            return {tp: found[tp].offset if found.get(tp) else None for tp in tps}

        if args.group:
            consumer.subscribe([args.topic])
        else:
            consumer.assign(tps)
            for tp, offset in offsets.resolve(wanted.begin, bounds, by_time).items():
                consumer.seek(tp, offset)
        stop_at = offsets.resolve(wanted.stop, bounds, by_time) if wanted.stop else None
        return _loop(consumer, render, args.num, stop_at, commit=bool(args.group))
    finally:
        consumer.close(autocommit=False)


def _loop(consumer, render, limit: int | None, stop_at: dict | None, commit: bool) -> int:
    """Print records until ``limit`` or ``stop_at``; with a group, commit exactly what was
    printed (a poll may fetch more than ``-n`` asks for)."""
    from kafka import OffsetAndMetadata

    out = sys.stdout.buffer
    seen = 0
    printed: dict = {}

    def reached(tp, end) -> bool:
        return end == 0 or (tp in consumer.assignment() and consumer.position(tp) >= end)

    def flush() -> None:
        out.flush()
        if commit and printed:
            consumer.commit({tp: OffsetAndMetadata(offset, "", -1) for tp, offset in printed.items()})
            printed.clear()

    try:
        while stop_at is None or not all(reached(tp, end) for tp, end in stop_at.items()):
            for tp, batch in consumer.poll(timeout_ms=500).items():
                for record in batch:
                    if stop_at is not None and record.offset >= stop_at.get(tp, 0):
                        continue
                    out.write(render(record))
                    printed[tp] = record.offset + 1
                    seen += 1
                    if limit is not None and seen >= limit:
                        return 0
            flush()
        return 0
    finally:
        flush()
