"""``kbroker topic consume T``: records as JSON lines, or through an rpk-style format string.

``-o`` takes ``start``, ``end``, an offset, or ``@TIMESTAMP`` (ms); a ``:end`` suffix
(``-o start:end``) stops at the log end as of start-up. ``-f`` understands ``%t`` topic, ``%k``
key, ``%v`` value, ``%p`` partition, ``%o`` offset, ``%T`` timestamp, ``%h`` headers (k=v,...),
``%K``/``%V`` key/value length, ``%%``, and ``\\n``, ``\\t``, ``\\\\``.
"""

from __future__ import annotations

import json
import re
import sys

from kbroker.cli.commands.common import (BOOTSTRAP_TIMEOUT_MS, CommandError, client_config,
                                         connect, leaf)

_FORMAT_TOKEN = re.compile(rb"%[tkvpoThKV%]|\\[nt\\]")


def register(topic, shared) -> None:
    p = leaf(topic, "consume", shared, "consume records", examples="""
kbroker topic consume orders -o start -n 10
kbroker topic consume orders -o start:end -f '%p/%o %k=%v\\n'
kbroker topic consume orders -o @1700000000000
kbroker topic consume orders -g my-group            # commits offsets as my-group""")
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("-o", "--offset", default=None,
                   help="start|end|OFFSET|@TIMESTAMP, optional :end suffix (default: end, or the "
                        "group's committed offset)")
    p.add_argument("-g", "--group", help="consume as this group and commit offsets")
    p.add_argument("-n", "--num", type=int, help="stop after this many records")
    p.add_argument("-p", "--partitions", type=lambda s: [int(x) for x in s.split(",")],
                   help="comma-separated partitions (without -g)")
    p.add_argument("-f", "--format", help="format string (default: one JSON object per record)")
    p.set_defaults(run=run)


def parse_offset(text: str | None) -> tuple[str, int | None, bool]:
    """(kind, number, stop_at_end): kind is start, end, offset or timestamp."""
    if text is None:
        return "end", None, False
    stop_at_end = text.endswith(":end")
    text = text[:-4] if stop_at_end else text
    if text in ("start", "end", "", "oldest", "newest"):
        return {"": "start", "oldest": "start", "newest": "end"}.get(text, text), None, stop_at_end
    try:
        if text.startswith("@"):
            return "timestamp", int(text[1:]), stop_at_end
        return "offset", int(text), stop_at_end
    except ValueError:
        raise CommandError(f"-o {text!r}: expected start, end, OFFSET or @TIMESTAMP", 2) from None


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

    kind, number, stop_at_end = parse_offset(args.offset)
    render = formatter(args.format)
    config = client_config(args)
    if args.group and kind in ("offset", "timestamp"):
        raise CommandError("with -g, -o takes start or end (where to begin without a committed "
                           "offset); use `kbroker group seek` to move a group", 2)
    consumer = connect(lambda: KafkaConsumer(
        **config,
        bootstrap_timeout_ms=BOOTSTRAP_TIMEOUT_MS, group_id=args.group,
        enable_auto_commit=False, auto_offset_reset="earliest" if kind == "start" else "latest"),
        config["bootstrap_servers"])
    try:
        partitions = consumer.partitions_for_topic(args.topic)
        if not partitions:
            raise CommandError(f"UNKNOWN_TOPIC_OR_PARTITION: topic {args.topic}")
        tps = [TopicPartition(args.topic, p) for p in sorted(args.partitions or partitions)]
        if args.group:
            consumer.subscribe([args.topic])
        else:
            consumer.assign(tps)
            _seek(consumer, tps, kind, number)
        stop_at = consumer.end_offsets(tps) if stop_at_end else None
        return _loop(consumer, render, args.num, stop_at, commit=bool(args.group))
    finally:
        consumer.close(autocommit=False)


def _seek(consumer, tps, kind: str, number: int | None) -> None:
    if kind == "start":
        consumer.seek_to_beginning(*tps)
    elif kind == "end":
        consumer.seek_to_end(*tps)
    elif kind == "offset":
        for tp in tps:
            consumer.seek(tp, number)
    else:
        found = consumer.offsets_for_times({tp: number for tp in tps})
        ends = consumer.end_offsets(tps)
        for tp in tps:
            consumer.seek(tp, found[tp].offset if found.get(tp) else ends[tp])


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
