"""What tests and benchmarks read about a broker process from Linux's /proc: whether it still
runs, its memory and its CPU time."""

from __future__ import annotations

import os
from pathlib import Path


def alive(pid: int) -> bool:
    """``pid`` runs. A zombie (exited, not reaped yet by its parent) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return _stat_fields(pid)[0] != "Z"
    except (OSError, IndexError):
        return False


def memory_kib(pid: int, field: str) -> int:
    """A size line of /proc/PID/status in KiB: ``VmRSS`` (resident now) or ``VmHWM`` (the
    resident peak). ``LookupError`` when the process has none (a zombie has no memory)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise LookupError(f"no {field} in /proc/{pid}/status")


def memory_mb(pid: int, field: str) -> float:
    """``memory_kib`` in MiB, 0.0 for a process that is gone: for a benchmark's report."""
    try:
        return memory_kib(pid, field) / 1024
    except (OSError, LookupError):
        return 0.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` so far (on a shared machine a steadier measure than
    wall-clock throughput)."""
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat from the state on (field 3 of proc(5)): the command name before it is in
    parentheses and may hold spaces and ')'."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
