"""A failed test's report carries the logs of the brokers it ran (loaded by the root conftest.py).

Brokers started by tests write their output under the session's temporary directory
(``tests/broker_process.py``: ``<data dir>-broker.log``; ``kbroker cluster up``: ``broker.log`` and
``launcher.log`` per broker; the reference Kafka: ``kafka.out``). When a test fails, the tail of
every such log written to while it ran is added to its report, so that CI's output says what the
broker said without anyone having to reproduce the run.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

LOG_NAMES = ("broker.log", "launcher.log", "kafka.out")
TAIL_LINES = 60
MOST_LOGS = 6


def _tail(path: Path) -> str:
    with open(path, "rb") as handle:
        handle.seek(0, 2)
        handle.seek(max(0, handle.tell() - 64 * 1024))
        lines = handle.read().decode(errors="replace").splitlines()
    return "\n".join(lines[-TAIL_LINES:])


def logs_written_since(root: Path, since: float) -> list[Path]:
    """The broker logs under ``root`` written to after ``since`` (wall clock), newest first."""
    found = []
    for name in LOG_NAMES:
        for path in root.rglob(f"*{name}"):
            try:
                modified = path.stat().st_mtime
            except OSError:
                continue
            if modified >= since:
                found.append((modified, path))
    return [path for _, path in sorted(found, reverse=True)[:MOST_LOGS]]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    item._kbroker_started = time.time()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    factory = getattr(item.config, "_tmp_path_factory", None)
    if factory is None:
        return
    try:
        root = factory.getbasetemp()
        logs = logs_written_since(root, getattr(item, "_kbroker_started", time.time()))
    except OSError:
        return
    for path in logs:
        report.sections.append((f"broker log {path.relative_to(root)} (last {TAIL_LINES} lines)",
                                _tail(path)))
