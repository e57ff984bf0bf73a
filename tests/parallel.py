"""How the suite runs in parallel (pytest-xdist), loaded by the root conftest.py.

``make test`` runs ``pytest -n auto --dist loadfile``: every test module runs whole on one worker
(its module fixtures, brokers and JVMs are started once), and the workers share nothing but the
machine. This plugin decides the rest:

- **How many workers.** ``-n auto`` asks :func:`pytest_xdist_auto_num_workers`: most tests wait
  (on clients, group joins, JVM starts, retention), so two workers per core, and no more than the
  memory allows at ``GIB_PER_WORKER`` each (a worker may hold a reference Kafka JVM, a Spark driver
  or a three-broker cluster). ``KBROKER_TEST_WORKERS`` overrides it.
- **Which module first.** Modules are handed out in the order of their expected run time, longest
  first (``tests/durations.json``, refreshed by ``tools/test_durations.py`` from the last run's
  ``build/test-durations.json``), so that no long module starts last and keeps one worker busy
  after the rest are done.
  A module not listed there counts as ``UNKNOWN_MODULE_S``.
- **Tests that must be alone.** ``@pytest.mark.alone`` (timing-sensitive tests, fault and soak
  scenarios, ``pytestmark`` for a whole module): while one runs, no other test runs on any worker.
  The workers share a writer-preferring lock through two files: every test takes the turnstile for
  a moment and then the run lock shared; an alone test keeps the turnstile (so no new test starts)
  and takes the run lock exclusively (so it waits for the running ones to end). Alone modules are
  handed out last, when the other workers have little left to do.
- **What CI tells.** Each worker reports how long it was busy; the controller prints the workers'
  times after the slowest tests, and writes each module's time to ``build/test-durations.json``
  (``python tools/test_durations.py`` merges it into ``tests/durations.json``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DURATIONS = ROOT / "tests" / "durations.json"
MEASURED = ROOT / "build" / "test-durations.json"
# Each module's CPU: the worker's own and that of the processes it started and waited for. It is a
# guide, not an account: a child is counted when it is reaped, so a process started once per worker
# counts for the module whose teardown ends it, and one a test left unwaited for the module whose
# next Popen reaps it. tools/suite_cpu.py counts every process by kind.
MEASURED_CPU = ROOT / "build" / "test-cpu.json"
UNKNOWN_MODULE_S = 30.0
GIB_PER_WORKER = 3
WORKERS_PER_CORE = 2


# ------------------------------------------------------------------------------------ the run

# Names the run: set by the run's own process (the xdist controller, or pytest without workers)
# and inherited by its workers.
RUN_ENV = "KBROKER_TEST_RUN"


def is_worker(config) -> bool:
    """An xdist worker, rather than the run's own process."""
    return hasattr(config, "workerinput")


def run_known() -> bool:
    return RUN_ENV in os.environ


def run_dir() -> Path:
    """This run's directory, which its workers share (locks, the reference Kafka's handle)."""
    path = Path(tempfile.gettempdir()) / f"kbroker-run-{os.environ[RUN_ENV]}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def pytest_configure(config):
    if not is_worker(config):
        # A new run (a pytest that a test starts is a run of its own); its workers inherit it.
        os.environ[RUN_ENV] = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    config.addinivalue_line(
        "markers", "alone: no other test runs on any xdist worker while this one does "
                   "(timing-sensitive tests, fault and soak scenarios)")
    config._kbroker_busy = 0.0
    config._kbroker_modules = {}
    config._kbroker_cpu = {}  # module: CPU seconds, on the worker that ran it


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    if not is_worker(config) and run_known():
        shutil.rmtree(run_dir(), ignore_errors=True)


# ----------------------------------------------------------------------------------- workers

def _memory_gib() -> float:
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / (1 << 20)
    return GIB_PER_WORKER * 2.0


def workers_for_machine() -> int:
    wanted = os.environ.get("KBROKER_TEST_WORKERS")
    if wanted:
        if not wanted.isdigit() or int(wanted) < 1:
            raise pytest.UsageError(f"KBROKER_TEST_WORKERS={wanted!r}: give a whole number of "
                                    "workers, 1 or more")
        return int(wanted)
    cores = len(os.sched_getaffinity(0))
    return max(1, min(WORKERS_PER_CORE * cores, int(_memory_gib() // GIB_PER_WORKER)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    return workers_for_machine()


# ------------------------------------------------------------------------------------- order

def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def expected_durations() -> dict[str, float]:
    try:
        return json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        return {}


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Modules longest first and alone ones last; a module's own tests keep their order."""
    known = expected_durations()
    modules: dict[str, list] = {}
    for item in items:
        modules.setdefault(module_of(item.nodeid), []).append(item)

    def key(module: str):
        alone = any(i.get_closest_marker("alone") for i in modules[module])
        return (alone, -known.get(module, UNKNOWN_MODULE_S), module)

    items[:] = [item for module in sorted(modules, key=key) for item in modules[module]]


# ------------------------------------------------------------------------------------- alone

def _lock_dir(config) -> Path | None:
    """The run's directory under xdist; None outside it (nothing to share a lock with)."""
    return run_dir() if is_worker(config) and run_known() else None


@contextlib.contextmanager
def flock(path: Path, mode: int = fcntl.LOCK_EX):
    """``path`` locked (flock) for the block: exclusive, or ``fcntl.LOCK_SH``; shared by the
    run's workers (tests/shared_kafka.py starts the run's Kafka under one)."""
    with open(path, "a") as handle:
        fcntl.flock(handle, mode)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def running(config, alone: bool):
    """Hold the run lock for one test: shared, or exclusive for an alone test."""
    directory = _lock_dir(config)
    if directory is None:
        yield
        return
    turnstile, run = directory / "turnstile.lock", directory / "run.lock"
    with contextlib.ExitStack() as held:
        if alone:
            held.enter_context(flock(turnstile))  # no new test starts until this one is done
            held.enter_context(flock(run))  # and the running ones have ended
        else:
            with flock(turnstile):  # not while an alone test waits or runs
                held.enter_context(flock(run, fcntl.LOCK_SH))
        yield


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    started = time.monotonic()
    with running(item.config, alone=item.get_closest_marker("alone") is not None):
        cpu_before = _cpu_seconds()
        yield
        cpu = _cpu_seconds() - cpu_before
    item.config._kbroker_busy += time.monotonic() - started
    module = module_of(item.nodeid)
    item.config._kbroker_cpu[module] = item.config._kbroker_cpu.get(module, 0.0) + cpu


def _cpu_seconds() -> float:
    """This process's CPU and that of its children it has waited for (brokers, JVMs, drivers)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


# --------------------------------------------------------------------------- what CI is told

_CONFIG: dict = {}  # pytest_runtest_logreport is given no config: the session's is kept here


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    _CONFIG["config"] = session.config


def pytest_runtest_logreport(report):
    """Each module's time (setup, call and teardown of its tests), on the controller too."""
    config = _CONFIG.get("config")
    if config is not None and not is_worker(config):
        modules = config._kbroker_modules
        module = module_of(report.nodeid)
        modules[module] = modules.get(module, 0.0) + report.duration


def pytest_sessionfinish(session, exitstatus):
    config = session.config
    workeroutput = getattr(config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["kbroker_busy_s"] = config._kbroker_busy
        workeroutput["kbroker_cpu_s"] = json.dumps(config._kbroker_cpu)
        return
    cpu = dict(config._kbroker_cpu)
    for worker_cpu in getattr(config, "_kbroker_worker_cpu", []):
        cpu.update(worker_cpu)
    if cpu:
        MEASURED_CPU.parent.mkdir(parents=True, exist_ok=True)
        MEASURED_CPU.write_text(json.dumps({module: round(seconds, 1) for module, seconds in sorted(
            cpu.items(), key=lambda entry: -entry[1])}, indent=1) + "\n")
    if config._kbroker_modules:
        MEASURED.parent.mkdir(parents=True, exist_ok=True)
        MEASURED.write_text(json.dumps({module: round(seconds, 1) for module, seconds in sorted(
            config._kbroker_modules.items())}, indent=1) + "\n")


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    output = getattr(node, "workeroutput", {})
    busy = output.get("kbroker_busy_s")
    node.config.__dict__.setdefault("_kbroker_workers", {})[node.gateway.id] = busy
    if "kbroker_cpu_s" in output:
        node.config.__dict__.setdefault("_kbroker_worker_cpu", []).append(
            json.loads(output["kbroker_cpu_s"]))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    workers = getattr(config, "_kbroker_workers", None)
    if not workers:
        return
    terminalreporter.write_sep("=", "time each worker spent in tests")
    for name, busy in sorted(workers.items()):
        text = f"{busy / 60:.1f} min" if busy is not None else "? (the worker died)"
        terminalreporter.write_line(f"{name}: {text}")
