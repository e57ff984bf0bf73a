#!/usr/bin/env python3
"""Compatibility driver for kcat (the Debian package; librdkafka built in).

Translates the driver contract of ``compat_tests/README.md`` into kcat command lines and kcat's
output into the contract's JSON-lines events. What kcat itself cannot do is refused with exit code
64 and an ``error`` event whose ``error`` is ``unsupported`` (the registry names these features so
the matrix reports them as "not supported by client"):

- per-message timestamps (``kcat -P`` has no option for them);
- admin operations other than metadata (``-L``) and offset queries (``-Q``).

kcat's ``-H`` puts the same headers on every message, so ``--headers`` (whose ``h-index`` differs
per record) runs one kcat per record; without it, one kcat sends them all. Delivery reports
(``-v -v``) give each record's partition and offset.
"""

from __future__ import annotations

import json
import subprocess
import sys

from contract import (EXIT_ERROR, EXIT_OK, EXIT_USAGE, Usage, contract_records,  # noqa: E402
                      done_consuming, emit, rebalance_event, record_event, report_produced)

from compat_tests.clients import kcat  # noqa: E402
from compat_tests.clients.records import Unsupported  # noqa: E402


def parse(argv: list[str], flags: set[str]) -> tuple[list[str], dict[str, list[str]]]:
    """The Java driver's parser: ``--name value``, ``--name=value`` or a known ``--flag``."""
    positional, opts = [], {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("--"):
            name, eq, value = arg[2:].partition("=")
            if name in flags and not eq:
                opts.setdefault(name, []).append("true")
            else:
                if not eq:
                    i += 1
                    if i >= len(argv):
                        raise Usage(f"missing value for --{name}")
                    value = argv[i]
                opts.setdefault(name, []).append(value)
        else:
            positional.append(arg)
        i += 1
    return positional, opts


class Opts:
    def __init__(self, opts: dict[str, list[str]]):
        self.opts = opts

    def get(self, name, default=None):
        return self.opts.get(name, [default])[-1]

    def require(self, name):
        value = self.get(name)
        if value is None:
            raise Usage(f"--{name} is required")
        return value

    def int(self, name, default=None):
        value = self.get(name)
        return default if value is None else int(value)

    def all(self, name):
        return self.opts.get(name, [])

    def flag(self, name):
        return self.get(name, "false") == "true"


def settings(o: Opts) -> dict:
    """-X properties: the client id, then --property pairs."""
    config = {"client.id": o.get("client-id", "kcat")}
    for kv in o.all("property"):
        key, _, value = kv.partition("=")
        config[key] = value
    return config


def base_args(o: Opts) -> list[str]:
    return kcat.base_args(o.require("bootstrap"), settings(o))


# --------------------------------------------------------------------------------------- produce

def produce(o: Opts) -> int:
    count, value_size = o.int("count", 10), o.int("value-size", 0)
    timeout_ms = o.int("timeout-ms", 30000)
    config = {**settings(o), "enable.idempotence": o.get("idempotent", "true"),
              "linger.ms": o.get("linger-ms", "5"), "message.timeout.ms": timeout_ms}
    if value_size:
        config["message.max.bytes"] = max(1000000, value_size + 65536)
    records = contract_records(
        count, o.get("key-prefix", "key-"), o.get("value-prefix", "value-"),
        o.int("null-key-every", 0), value_size, "kcat" if o.flag("headers") else None,
        o.int("partition"), o.int("timestamp"))
    results = kcat.produce(o.require("bootstrap"), o.require("topic"), records,
                           codec=o.get("compression", "none"), acks=o.get("acks", "all"),
                           config=config, timeout=timeout_ms / 1000)
    return report_produced(o.require("topic"), results)


# --------------------------------------------------------------------------------------- consume

def consume(o: Opts) -> int:
    count, errors = o.int("count", 10), []
    got = kcat.consume(o.require("bootstrap"), o.require("topic"), count,
                       start="beginning" if o.flag("from-beginning") else "end",
                       group=o.get("group"), isolation=o.get("isolation", "read_uncommitted"),
                       config=settings(o), timeout=o.int("timeout-ms", 30000) / 1000,
                       on_record=record_event, on_rebalance=rebalance_event,
                       stderr_errors=errors)
    if len(got) < count and errors:
        emit("error", error="KcatError", message=errors[0])
    return done_consuming(len(got), count)


# ----------------------------------------------------------------------------------------- admin

def metadata(o: Opts, topic: str | None) -> dict:
    args = base_args(o) + ["-L", "-J", "-m", str(max(1, o.int("timeout-ms", 30000) // 1000))]
    if topic:
        args += ["-t", topic]
    proc = subprocess.run(args, capture_output=True, timeout=o.int("timeout-ms", 30000) / 1000 + 30)
    if proc.returncode != 0:
        raise RuntimeError(kcat.first_error(proc.stderr.decode(errors="replace")))
    return json.loads(proc.stdout)


def topic_metadata(o: Opts, topic: str) -> dict:
    for t in metadata(o, topic)["topics"]:
        if t["topic"] == topic:
            if t.get("error"):
                raise RuntimeError(f"{topic}: {t['error']}")
            return t
    raise RuntimeError(f"{topic}: not in metadata")


def query_offset(o: Opts, topic: str, partition: int, timestamp: int) -> int:
    args = base_args(o) + ["-Q", "-J", "-t", f"{topic}:{partition}:{timestamp}"]
    proc = subprocess.run(args, capture_output=True, timeout=o.int("timeout-ms", 30000) / 1000 + 30)
    if proc.returncode != 0:
        raise RuntimeError(kcat.first_error(proc.stderr.decode(errors="replace")))
    answer = json.loads(proc.stdout)[topic][str(partition)]
    if answer.get("error"):
        raise RuntimeError(f"{topic} [{partition}]: {answer['error']}")
    return answer["offset"]


def admin(positional: list[str], o: Opts) -> int:
    if not positional:
        raise Usage("admin needs an action")
    action = positional[0]
    if action == "list-topics":
        names = [t["topic"] for t in metadata(o, None)["topics"]]
        emit("topics", topics=sorted(n for n in names if o.flag("internal")
                                     or not n.startswith("__")))
    elif action == "describe-topic":
        t = topic_metadata(o, o.require("topic"))
        emit("topic", topic=t["topic"], partitions=[
            {"partition": p["partition"], "leader": p["leader"],
             "replicas": [r["id"] for r in p["replicas"]], "isr": [r["id"] for r in p["isrs"]]}
            for p in sorted(t["partitions"], key=lambda p: p["partition"])])
    elif action == "list-offsets":
        topic = o.require("topic")
        out = []
        for p in sorted(q["partition"] for q in topic_metadata(o, topic)["partitions"]):
            entry = {"partition": p, "earliest": query_offset(o, topic, p, -2),
                     "latest": query_offset(o, topic, p, -1)}
            if o.get("timestamp") is not None:
                entry["forTimestamp"] = query_offset(o, topic, p, o.int("timestamp"))
            out.append(entry)
        emit("offsets", topic=topic, partitions=out)
    elif action in ("create-topic", "delete-topic", "create-partitions", "describe-configs",
                    "alter-configs", "delete-records"):
        raise Unsupported(f"kcat has no admin API for {action} (only -L metadata and -Q offsets)")
    else:
        raise Usage(f"unknown admin action {action}")
    return EXIT_OK


def version() -> int:
    emit("version", client="kcat", **kcat.version())
    return EXIT_OK


def main(argv: list[str]) -> int:
    if not argv:
        emit("error", error="usage", message="kcat_driver.py produce|consume|admin|version ...")
        return EXIT_USAGE
    command, rest = argv[0], argv[1:]
    try:
        if command == "version":
            return version()
        flags = {"produce": {"headers"}, "consume": {"from-beginning"},
                 "admin": {"internal"}}.get(command)
        if flags is None:
            raise Usage(f"unknown command {command}")
        positional, opts = parse(rest, flags)
        o = Opts(opts)
        if command == "produce":
            return produce(o)
        if command == "consume":
            return consume(o)
        return admin(positional, o)
    except Usage as exc:
        emit("error", error="usage", message=str(exc))
        return EXIT_USAGE
    except Unsupported as exc:
        emit("error", error="unsupported", message=str(exc))
        return EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 - every failure is reported as an event
        emit("error", error=type(exc).__name__, message=str(exc))
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
