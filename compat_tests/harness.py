"""Running drivers and judging what they print.

``run(driver, "produce", ...)`` starts one driver process (with a hard timeout), parses its JSON
lines and returns a :class:`Run`; ``start(...)`` does the same in the background for scenarios
that need two clients at once (consumer groups). :func:`expected` says which records a producer
driver was asked to write (the contract fixes key, value, headers and timestamp of record i) and
:func:`compare` checks consumed records against them exactly.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field

from compat_tests.drivers.registry import ROOT, Driver

# Hard limit for one driver process beyond the timeout it was given.
GRACE = 25.0
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def unique(*parts: str) -> str:
    """A topic name no other cell uses (the session shares one broker)."""
    name = "-".join(p.replace("_", "-").replace(".", "-") for p in parts if p)
    return f"{name}-{uuid.uuid4().hex[:6]}"


@dataclass
class Run:
    driver: Driver
    argv: list[str]
    rc: int | None = None
    events: list[dict] = field(default_factory=list)
    stderr: str = ""
    seconds: float = 0.0
    killed: bool = False

    def of(self, kind: str) -> list[dict]:
        return [e for e in self.events if e.get("event") == kind]

    @property
    def records(self) -> list[dict]:
        return self.of("record")

    @property
    def errors(self) -> list[dict]:
        return self.of("error")

    def error_text(self) -> str:
        """The client's own words for what went wrong (first error event), or stderr."""
        for e in self.errors:
            parts = [e.get("error"), e.get("code"), e.get("message")]
            return ": ".join(str(p) for p in parts if p)
        if self.killed:
            return f"killed after {self.seconds:.0f} s"
        return (self.stderr.strip().splitlines() or [f"exit code {self.rc}"])[-1][:300]

    def describe(self) -> str:
        """For assertion messages: the command, exit code, errors and the stderr tail."""
        tail = "\n".join(self.stderr.strip().splitlines()[-15:])
        return (f"{self.driver.name}: {' '.join(self.argv)}\n  exit {self.rc} after "
                f"{self.seconds:.1f} s{' (killed)' if self.killed else ''}; "
                f"errors: {self.errors}\n  stderr tail:\n{tail}")

    def ok(self) -> "Run":
        assert self.rc == 0, f"{self.error_text()}\n{self.describe()}"
        return self


class Running:
    """A driver process in the background; events are parsed as they arrive."""

    def __init__(self, driver: Driver, argv: list[str], timeout: float):
        self.run = Run(driver, argv)
        self._started = time.monotonic()
        self._proc = subprocess.Popen(
            driver.argv(argv), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self._timer = threading.Timer(timeout + GRACE, self._kill)
        self._timer.start()
        self._err: list[bytes] = []
        self._threads = [threading.Thread(target=self._read_stdout, daemon=True),
                         threading.Thread(target=lambda: self._err.extend(self._proc.stderr),
                                          daemon=True)]
        for t in self._threads:
            t.start()

    def _kill(self):
        self.run.killed = True
        self._proc.kill()

    def _read_stdout(self):
        for raw in self._proc.stdout:
            line = raw.decode(errors="replace").strip()
            if not line.startswith("{"):
                continue
            try:
                self.run.events.append(json.loads(line))
            except json.JSONDecodeError:
                self.run.events.append({"event": "garbage", "line": line[:200]})

    def events(self, kind: str | None = None) -> list[dict]:
        return [e for e in list(self.run.events) if kind is None or e.get("event") == kind]

    def wait_for(self, predicate, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if self._proc.poll() is not None and not predicate():
                self.wait()
                raise AssertionError(f"{self.run.driver.name} exited before {what}\n"
                                     f"{self.run.describe()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n"
                                     f"{self.run.describe()}")
            time.sleep(0.05)

    def wait(self) -> Run:
        self._proc.wait()
        self._timer.cancel()
        for t in self._threads:
            t.join(5)
        self.run.rc = self._proc.returncode
        self.run.stderr = b"".join(self._err).decode(errors="replace")
        self.run.seconds = time.monotonic() - self._started
        return self.run

    def stop(self) -> Run:
        self.terminate()
        return self.wait()

    def terminate(self) -> None:
        """SIGTERM without waiting: to stop several members at once (see stop_all)."""
        if self._proc.poll() is None:
            self._proc.terminate()


def stop_all(running: list[Running]) -> list[Run]:
    """Stop every process before waiting for any: a share group member stopped while the others
    still fetch would hand them the records it holds (read but not yet acknowledged)."""
    for r in running:
        r.terminate()
    return [r.wait() for r in running]


def start(driver: Driver, command: str, bootstrap: str, *args, timeout: float = 30.0,
          **options) -> Running:
    """Start ``driver command --bootstrap B args... --option value...`` in the background.
    Options: ``foo_bar=1`` becomes ``--foo-bar 1``; True becomes a bare flag; None is left out."""
    argv = [command] + (["--bootstrap", bootstrap] if bootstrap else [])
    for name, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + name.replace("_", "-")
        argv += [flag] if value is True else [flag, str(value)]
    argv += [str(a) for a in args]
    return Running(driver, argv, timeout)


def run(driver: Driver, command: str, bootstrap: str, *args, timeout: float = 30.0,
        **options) -> Run:
    return start(driver, command, bootstrap, *args, timeout=timeout, **options).wait()


def produce(driver: Driver, bootstrap: str, topic: str, spec: "Spec", timeout: float = 30.0,
            args: list[str] = (), **options) -> Run:
    """``args``: more raw arguments, e.g. repeated ``--property k=v`` (security settings)."""
    extra = driver.timeout_args(int(timeout * 1000)) if "produce-timeout" not in \
        driver.lacks and "produce-timeout" not in driver.todo else []
    return run(driver, "produce", bootstrap, *extra, *args, timeout=timeout, topic=topic,
               **spec.options(), **options)


def consume(driver: Driver, bootstrap: str, topic: str, count: int, timeout: float = 20.0,
            args: list[str] = (), **options) -> Run:
    options.setdefault("from_beginning", True)
    return run(driver, "consume", bootstrap, *args, timeout=timeout, topic=topic, count=count,
               timeout_ms=int(timeout * 1000), **options)


# ------------------------------------------------------------------------------ what to expect

@dataclass
class Spec:
    """What ``produce`` is asked to write; record i is fully determined by it (the contract)."""
    count: int = 6
    key_prefix: str = "key-"
    value_prefix: str = "value-"
    null_key_every: int = 3
    headers: bool = True
    timestamp: int | None = None
    value_size: int = 0
    compression: str = "none"

    def options(self) -> dict:
        return {"count": self.count, "key_prefix": self.key_prefix,
                "value_prefix": self.value_prefix, "null_key_every": self.null_key_every or None,
                "headers": self.headers, "timestamp": self.timestamp,
                "value_size": self.value_size or None, "compression": self.compression}


def expected(spec: Spec, producer: Driver) -> list[dict]:
    out = []
    for i in range(spec.count):
        null_key = spec.null_key_every and i % spec.null_key_every == spec.null_key_every - 1
        value = f"{spec.value_prefix}{i}"
        value += "." * max(0, spec.value_size - len(value))
        out.append({
            "index": i,
            "key": None if null_key else f"{spec.key_prefix}{i}",
            "value": value,
            "headers": [{"key": "h-index", "value": str(i)},
                        {"key": "h-client", "value": producer.header_value}]
            if spec.headers else [],
            "timestamp": None if spec.timestamp is None else spec.timestamp + i,
        })
    return out


def index_of(record: dict, spec: Spec) -> int | None:
    value = record.get("value") or ""
    head = value[len(spec.value_prefix):].split(".", 1)[0]
    if not value.startswith(spec.value_prefix) or not head.isdigit():
        return None
    return int(head)


def short(value, limit: int = 60):
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"...({len(text)} chars)"


def compare(spec: Spec, producer: Driver, produce_run: Run, consumed: list[dict],
            window: tuple[float, float] | None = None) -> list[str]:
    """Problems with ``consumed`` against what ``producer`` was asked to write: every record
    exactly once, key/value/headers byte-exact, CreateTime timestamps (the explicit ones, else
    those the producer reported, else within the producer's run), and for each partition offsets
    in production order."""
    problems = []
    want = expected(spec, producer)
    acks = {e["index"]: e for e in produce_run.of("produced")}
    by_index: dict[int, list[dict]] = {}
    for r in consumed:
        i = index_of(r, spec)
        if i is None or i >= spec.count:
            problems.append(f"unexpected record {short(r)}")
            continue
        by_index.setdefault(i, []).append(r)
    missing = [i for i in range(spec.count) if i not in by_index]
    dupes = [i for i, rs in by_index.items() if len(rs) > 1]
    if missing:
        problems.append(f"missing records {missing}")
    if dupes:
        problems.append(f"duplicated records {dupes}")
    for i, rs in sorted(by_index.items()):
        got, exp = rs[0], want[i]
        for name in ("key", "value", "headers"):
            if got.get(name) != exp[name]:
                problems.append(f"record {i}: {name} {short(got.get(name))} != "
                                f"{short(exp[name])}")
        if got.get("timestampType") != "CreateTime":
            problems.append(f"record {i}: timestampType {got.get('timestampType')}")
        ack = acks.get(i, {})
        if exp["timestamp"] is not None:
            if got.get("timestamp") != exp["timestamp"]:
                problems.append(f"record {i}: timestamp {got.get('timestamp')} != "
                                f"{exp['timestamp']} (explicit)")
        elif ack.get("timestamp") not in (None, -1):
            if got.get("timestamp") != ack["timestamp"]:
                problems.append(f"record {i}: timestamp {got.get('timestamp')} != "
                                f"{ack['timestamp']} (as acknowledged)")
        elif window is not None:
            lo, hi = window
            if not (lo - 1000 <= (got.get("timestamp") or 0) <= hi + 1000):
                problems.append(f"record {i}: timestamp {got.get('timestamp')} outside the "
                                f"producer's run [{lo:.0f}, {hi:.0f}]")
        if ack.get("offset") is not None and (ack.get("partition"), ack["offset"]) != \
                (got.get("partition"), got.get("offset")):
            problems.append(f"record {i}: at {got.get('partition')}/{got.get('offset')}, "
                            f"acknowledged at {ack.get('partition')}/{ack['offset']}")
    partitions: dict[int, list[tuple[int, int]]] = {}
    for r in consumed:
        i = index_of(r, spec)
        if i is not None:
            partitions.setdefault(r.get("partition"), []).append((r.get("offset"), i))
    for p, pairs in partitions.items():
        indexes = [i for _, i in sorted(pairs)]
        if indexes != sorted(indexes):
            problems.append(f"partition {p}: records out of production order {indexes}")
    return problems


def now_ms() -> float:
    return time.time() * 1000
