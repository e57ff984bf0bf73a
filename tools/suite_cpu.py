"""Where a test run's CPU goes: samples every process on the machine and sums its CPU by kind.

    python tools/suite_cpu.py -- make test PARALLEL="-n auto --dist loadfile"
    python tools/suite_cpu.py --interval 1 -- .venv/bin/python -m pytest -n auto tests/cli

Runs the command, reads /proc every ``--interval`` seconds, and at the end prints the CPU seconds
and the number of processes of each kind (the pytest workers, kbroker brokers and CLI commands,
each JVM by its main class, Node, the Go driver, ...), its share of the whole, and the machine's
busy fraction over the run.
A process's last interval before it exits is not seen: with short-lived processes (a CLI tool's
JVM) the figure for them is a lower bound.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import time

CLOCK = os.sysconf("SC_CLK_TCK")


def _cmdline(pid: str) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return [part.decode(errors="replace") for part in handle.read().split(b"\0") if part]
    except OSError:
        return []


def _stat(pid: str) -> tuple[int, str] | None:
    """(CPU ticks, start time) of a process, from one read of /proc/PID/stat."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[11]) + int(fields[12]), fields[19]  # utime + stime, starttime


def _java_kind(args: list[str]) -> str:
    """A JVM named by its main class (or -jar), the flags skipped."""
    skip_next = False
    for arg in args[1:]:
        if skip_next:
            skip_next = False
            continue
        if arg in ("-cp", "-classpath", "--class-path", "--add-opens", "--add-exports"):
            skip_next = True
            continue
        if arg == "-jar":
            skip_next = False
            continue
        if arg.startswith("-"):
            continue
        return "java " + arg.rsplit("/", 1)[-1][:60]
    return "java ?"


def kind_of(args: list[str]) -> str:
    if not args:
        return "?"
    program = os.path.basename(args[0])
    text = " ".join(args)
    if program.startswith("java"):
        return _java_kind(args)
    if program.startswith("python"):
        # the broker first: its data dirs are often under pytest's temporary directory
        script = os.path.basename(args[1]) if len(args) > 1 else ""
        if "kbroker" in text and ("serve" in text or "kbroker.server" in text
                                  or "-m kbroker" in text or script == "kbroker"):
            command = [a for a in args[1:] if not a.startswith("-") and "kbroker" not in a]
            if command[:1] in (["serve"], ["dev"]) or "serve" in args or "kbroker.server" in text:
                return "python: kbroker broker process"
            return "python: kbroker CLI command"
        if ("-m pytest" in text or "xdist" in text or "execnet" in text
                or "exec(eval(" in text or os.path.basename(args[1] if len(args) > 1 else "")
                in ("pytest", "py.test")):
            return "python: pytest (worker or controller)"
        if "zookeeper" in text:
            return "python: zookeeper helper"
        script = next((a for a in args[1:] if not a.startswith("-")), "?")
        return "python: " + os.path.basename(script)[:60]
    if program in ("node", "nodejs"):
        return "node"
    return program[:40]


def sample(seen: dict[tuple[str, str], int], totals: collections.Counter,
           processes: dict[str, set]) -> None:
    """One look at every process. A process is named by its command line at each look, not at
    the first: a child seen between fork and exec still has its parent's, and a shell script
    that execs java (Kafka's bin/*.sh) is bash first and java after."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        stat = _stat(pid)
        if stat is None:
            continue
        ticks, started = stat
        kind = kind_of(_cmdline(pid))
        key = (pid, started)  # a pid used again is another process
        totals[kind] += ticks - seen.get(key, 0)
        seen[key] = ticks
        processes.setdefault(kind, set()).add(key)


def machine_ticks() -> tuple[int, int]:
    with open("/proc/stat") as handle:
        fields = [int(v) for v in handle.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    options = parser.parse_args()
    command = options.command[1:] if options.command[:1] == ["--"] else options.command
    if not command:
        parser.error("give the command to run after --")
    seen: dict[tuple[str, str], int] = {}
    totals: collections.Counter = collections.Counter()
    processes: dict[str, set] = {}
    sample(seen, totals, processes)
    totals.clear()
    processes.clear()  # what ran before the command is not the command's
    busy0, all0 = machine_ticks()
    started = time.monotonic()
    child = subprocess.Popen(command)
    while child.poll() is None:
        time.sleep(options.interval)
        sample(seen, totals, processes)
    elapsed = time.monotonic() - started
    busy1, all1 = machine_ticks()
    whole = sum(totals.values()) / CLOCK
    print(f"\n{elapsed / 60:.1f} min wall, {whole / 60:.1f} CPU-min seen, machine busy "
          f"{(busy1 - busy0) / max(1, all1 - all0):.0%}", file=sys.stderr)
    for kind, ticks in totals.most_common(options.top):
        seconds = ticks / CLOCK
        count = len(processes.get(kind, ()))
        print(f"{seconds:8.1f} s  {seconds / max(whole, 1e-9):5.1%}  {count:5d}  {kind}",
              file=sys.stderr)
    return child.returncode


if __name__ == "__main__":
    sys.exit(main())
