"""kcat adapter (the Debian package; librdkafka built in). ``config`` holds librdkafka
properties, passed as ``-X k=v``.

kcat sends one line per record (``key<TAB>value``; no tab means a null key) and cannot set
timestamps; its ``-H`` puts the same headers on every record of a run, so ``produce`` runs one
kcat per stretch of records sharing headers and partition. Delivery reports (``-v -v``) give
each record's partition and offset.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading

from .records import Ack, Failed, Got, Unsupported, as_rec, start_position

KEY_DELIMITER = "\t"
DELIVERED = re.compile(r"Message delivered to partition (-?\d+) \(offset (-?\d+)\)")
ASSIGNED = re.compile(r"rebalanced .*: (assigned|revoked): (.*)")
ERRORISH = re.compile(r"ERROR|Failed|failed|error", re.I)


class KcatError(Exception):
    pass


def path() -> str:
    found = shutil.which("kcat")
    if found is None:
        raise RuntimeError("kcat is not installed (scripts/install-test-deps.sh installs it)")
    return found


def version() -> dict:
    out = subprocess.run([path(), "-V"], capture_output=True, text=True).stdout
    kv = re.search(r"Version (\S+)", out)
    lib = re.search(r"librdkafka (\S+)", out)
    return {"version": kv.group(1) if kv else "?", "librdkafka": lib.group(1) if lib else "?"}


def base_args(bootstrap: str, config: dict | None) -> list[str]:
    args = [path(), "-b", bootstrap]
    for key, value in (config or {}).items():
        args += ["-X", f"{key}={value}"]
    return args


def first_error(stderr: str) -> str:
    lines = [line.strip("% ") for line in stderr.splitlines() if ERRORISH.search(line)]
    return lines[0] if lines else stderr.strip()[-500:]


def _line(rec) -> str:
    value = rec.value.decode() if rec.value is not None else None
    if value is None or "\n" in value or KEY_DELIMITER in value:
        raise Unsupported("kcat sends one line per record: values must be text without "
                          "newlines or tabs")
    if rec.key is None:
        return value + "\n"
    key = rec.key.decode()
    if KEY_DELIMITER in key or "\n" in key:
        raise Unsupported("kcat keys must be text without newlines or tabs")
    return f"{key}{KEY_DELIMITER}{value}\n"


def produce(bootstrap: str, topic: str, records, *, codec: str = "none", acks="all",
            config: dict | None = None, timeout: float = 30.0) -> list:
    """One Ack (timestamp unknown) or Failed per record, in record order. After a failed run
    the remaining records are not sent."""
    recs = [as_rec(r) for r in records]
    if any(r.timestamp is not None for r in recs):
        raise Unsupported("kcat -P cannot set per-message timestamps")
    args = base_args(bootstrap, {"acks": acks, "linger.ms": 5, **(config or {})}) + [
        "-P", "-t", topic, "-z", codec, "-K", "\\t", "-v", "-v"]
    runs: list[list[int]] = []
    for i, rec in enumerate(recs):
        last = recs[runs[-1][0]] if runs else None
        if last is not None and (last.headers, last.partition) == (rec.headers, rec.partition):
            runs[-1].append(i)
        else:
            runs.append([i])
    results: list = [None] * len(recs)
    for indexes in runs:
        first = recs[indexes[0]]
        extra = ["-p", str(first.partition)] if first.partition is not None else []
        for name, value in first.headers:
            extra += ["-H", f"{name}={value.decode()}"]
        proc = subprocess.run(args + extra, input="".join(_line(recs[i]) for i in indexes)
                              .encode(), capture_output=True, timeout=timeout + 30)
        stderr = proc.stderr.decode(errors="replace")
        delivered = DELIVERED.findall(stderr)
        for index, (partition, offset) in zip(indexes, delivered):
            results[index] = Ack(int(partition), int(offset))
        if proc.returncode != 0 or len(delivered) < len(indexes):
            error = KcatError(first_error(stderr))
            return [r if r is not None else Failed(error) for r in results]
    return results


def consume(bootstrap: str, topic: str, count: int, *, partitions=None, start="beginning",
            group: str | None = None, isolation: str = "read_uncommitted",
            config: dict | None = None, timeout: float = 20.0, on_record=None,
            on_rebalance=None, stderr_errors: list | None = None) -> list[Got]:
    """Given ``partitions``, each is read from ``start`` to its current end (``-e``), one kcat
    each. Otherwise one kcat reads every partition (or joins ``group``, with kcat's balanced
    consumer: auto commit, committed again on close) until ``count`` records or ``timeout``.
    kcat's error lines go to ``stderr_errors``; a kcat that fails by itself raises KcatError."""
    start = start_position(start)
    args = base_args(bootstrap, {"isolation.level": isolation, **(config or {})}) + ["-J", "-u"]
    position = str(start)
    if group:
        reset = "latest" if start == "end" else "earliest"
        runs = [args + ["-c", str(count), "-X", f"auto.offset.reset={reset}", "-G", group,
                        "-v", topic]]
    elif partitions is None:
        runs = [args + ["-c", str(count), "-C", "-t", topic, "-o", position]]
    else:
        runs = [args + ["-C", "-t", topic, "-p", str(p), "-o", position, "-e"]
                for p in partitions]
    got: list[Got] = []
    errors = stderr_errors if stderr_errors is not None else []
    for run in runs:
        got += _run_consumer(run, timeout, errors, on_record, on_rebalance)
    return sorted(got, key=lambda g: (g.partition, g.offset))


def _run_consumer(args, timeout, errors, on_record, on_rebalance) -> list[Got]:
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    timed_out = threading.Event()

    def stop():
        timed_out.set()
        proc.kill()

    timer = threading.Timer(timeout, stop)
    timer.start()

    def watch_stderr():
        for raw in proc.stderr:
            text = raw.decode(errors="replace").strip()
            match = ASSIGNED.search(text)
            if match:
                if on_rebalance is not None:
                    on_rebalance(match.group(1), sorted(
                        {int(p) for p in re.findall(r"\[(\d+)\]", match.group(2))}))
            elif ERRORISH.search(text):
                errors.append(text.strip("% "))

    watcher = threading.Thread(target=watch_stderr, daemon=True)
    watcher.start()
    got = []
    try:
        for raw in proc.stdout:
            if not raw.startswith(b"{"):
                continue
            m = json.loads(raw)
            flat = m.get("headers") or []
            headers = tuple((flat[i], None if flat[i + 1] is None else flat[i + 1].encode())
                            for i in range(0, len(flat), 2))
            record = Got(m["partition"], m["offset"],
                         None if m.get("key") is None else m["key"].encode(),
                         None if m.get("payload") is None else m["payload"].encode(),
                         headers, m.get("ts"),
                         "append" if m.get("tstype") == "logappend" else "create", m["topic"])
            got.append(record)
            if on_record is not None:
                on_record(record)
        proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
        watcher.join(2)
    if proc.returncode != 0 and not timed_out.is_set():
        raise KcatError(errors[0] if errors else f"kcat exited with {proc.returncode}")
    return got
