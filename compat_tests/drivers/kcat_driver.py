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
import re
import shutil
import subprocess
import sys
import threading

EXIT_OK, EXIT_ERROR, EXIT_TIMEOUT, EXIT_USAGE = 0, 1, 2, 64
KEY_DELIMITER = "\t"
DELIVERED = re.compile(r"Message delivered to partition (-?\d+) \(offset (-?\d+)\)")
ASSIGNED = re.compile(r"rebalanced .*: (assigned|revoked): (.*)")
ERRORISH = re.compile(r"ERROR|Failed|failed|error", re.I)


def emit(event: str, **fields) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


class Usage(Exception):
    pass


class Unsupported(Exception):
    pass


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


def kcat() -> str:
    path = shutil.which("kcat")
    if path is None:
        raise RuntimeError("kcat is not installed (scripts/install-test-deps.sh installs it)")
    return path


def base_args(o: Opts) -> list[str]:
    args = [kcat(), "-b", o.require("bootstrap"), "-X", f"client.id={o.get('client-id', 'kcat')}"]
    for kv in o.all("property"):
        args += ["-X", kv]
    return args


def first_error(stderr: str) -> str:
    lines = [line.strip("% ") for line in stderr.splitlines() if ERRORISH.search(line)]
    return lines[0] if lines else stderr.strip()[-500:]


# --------------------------------------------------------------------------------------- produce

def produce(o: Opts) -> int:
    if o.get("timestamp") is not None:
        raise Unsupported("kcat -P cannot set per-message timestamps")
    topic, count = o.require("topic"), o.int("count", 10)
    key_prefix, value_prefix = o.get("key-prefix", "key-"), o.get("value-prefix", "value-")
    null_every, value_size = o.int("null-key-every", 0), o.int("value-size", 0)
    timeout_ms = o.int("timeout-ms", 30000)
    args = base_args(o) + ["-P", "-t", topic, "-z", o.get("compression", "none"),
                           "-K", "\\t", "-v", "-v",
                           "-X", f"acks={o.get('acks', 'all')}",
                           "-X", f"enable.idempotence={o.get('idempotent', 'true')}",
                           "-X", f"linger.ms={o.get('linger-ms', '5')}",
                           "-X", f"message.timeout.ms={timeout_ms}"]
    if o.get("partition") is not None:
        args += ["-p", o.get("partition")]
    if value_size:
        args += ["-X", f"message.max.bytes={max(1000000, value_size + 65536)}"]

    def line(i: int) -> str:
        value = f"{value_prefix}{i}"
        value += "." * max(0, value_size - len(value))
        if null_every and i % null_every == null_every - 1:
            return value + "\n"  # no key delimiter: a null key
        return f"{key_prefix}{i}{KEY_DELIMITER}{value}\n"

    if o.flag("headers"):
        runs = [([i], ["-H", f"h-index={i}", "-H", "h-client=kcat"]) for i in range(count)]
    else:
        runs = [(list(range(count)), [])]
    acked, failed = 0, False
    for indexes, extra in runs:
        proc = subprocess.run(args + extra, input="".join(line(i) for i in indexes).encode(),
                              capture_output=True, timeout=timeout_ms / 1000 + 30)
        stderr = proc.stderr.decode(errors="replace")
        delivered = DELIVERED.findall(stderr)
        for index, (partition, offset) in zip(indexes, delivered):
            acked += 1
            emit("produced", index=index, topic=topic, partition=int(partition),
                 offset=int(offset), timestamp=None)
        if proc.returncode != 0 or len(delivered) < len(indexes):
            failed = True
            emit("error", error="KcatError", message=first_error(stderr),
                 index=indexes[len(delivered)] if len(delivered) < len(indexes) else None)
            break
    emit("done", produced=acked, requested=count)
    return EXIT_OK if not failed and acked == count else EXIT_ERROR


# --------------------------------------------------------------------------------------- consume

def consume(o: Opts) -> int:
    topic, count = o.require("topic"), o.int("count", 10)
    timeout = o.int("timeout-ms", 30000) / 1000
    group = o.get("group")
    args = base_args(o) + ["-J", "-c", str(count), "-u",
                           "-X", f"isolation.level={o.get('isolation', 'read_uncommitted')}"]
    start = "beginning" if o.flag("from-beginning") else "end"
    if group:
        # The balanced consumer (-G): auto commit, committed again on close.
        args += ["-G", group, "-X", "auto.offset.reset=" + ("earliest" if start == "beginning"
                                                               else "latest"), "-v", topic]
    else:
        args += ["-C", "-t", topic, "-o", start]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    errors: list[str] = []

    def watch_stderr():
        for raw in proc.stderr:
            text = raw.decode(errors="replace").strip()
            match = ASSIGNED.search(text)
            if match:
                parts = sorted({int(p) for p in re.findall(r"\[(\d+)\]", match.group(2))})
                emit(match.group(1), partitions=parts)
            elif ERRORISH.search(text):
                errors.append(text.strip("% "))

    watcher = threading.Thread(target=watch_stderr, daemon=True)
    watcher.start()
    seen = 0
    try:
        for raw in proc.stdout:
            if not raw.startswith(b"{"):
                continue
            m = json.loads(raw)
            flat = m.get("headers") or []
            emit("record", topic=m["topic"], partition=m["partition"], offset=m["offset"],
                 key=m.get("key"), value=m.get("payload"),
                 headers=[{"key": flat[i], "value": flat[i + 1]} for i in range(0, len(flat), 2)],
                 timestamp=m.get("ts"),
                 timestampType="LogAppendTime" if m.get("tstype") == "logappend"
                 else "CreateTime", leaderEpoch=None)
            seen += 1
        proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
        watcher.join(2)
    ok = seen >= count
    if not ok and errors:
        emit("error", error="KcatError", message=errors[0])
    emit("done", consumed=seen, requested=count, timedOut=not ok)
    return EXIT_OK if ok else EXIT_TIMEOUT


# ----------------------------------------------------------------------------------------- admin

def metadata(o: Opts, topic: str | None) -> dict:
    args = base_args(o) + ["-L", "-J", "-m", str(max(1, o.int("timeout-ms", 30000) // 1000))]
    if topic:
        args += ["-t", topic]
    proc = subprocess.run(args, capture_output=True, timeout=o.int("timeout-ms", 30000) / 1000 + 30)
    if proc.returncode != 0:
        raise RuntimeError(first_error(proc.stderr.decode(errors="replace")))
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
        raise RuntimeError(first_error(proc.stderr.decode(errors="replace")))
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
    out = subprocess.run([kcat(), "-V"], capture_output=True, text=True).stdout
    kv = re.search(r"Version (\S+)", out)
    lib = re.search(r"librdkafka (\S+)", out)
    emit("version", client="kcat", version=kv.group(1) if kv else "?",
         librdkafka=lib.group(1) if lib else "?")
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
