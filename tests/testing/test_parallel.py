"""The suite's own parallel machinery (tests/parallel.py, tests/failure_logs.py): the lock that
keeps an alone test alone across workers, the order modules are handed out in, and the broker
logs a failed test's report carries. Threads stand in for xdist workers: the lock is a pair of
flock()ed files, and two opens of a file conflict within one process as across processes."""

from __future__ import annotations

import os
import shutil
import threading
import time
import uuid
from types import SimpleNamespace

import pytest

from tests import failure_logs, parallel


@pytest.fixture(autouse=True)
def own_run(monkeypatch):
    """A run of the test's own: the real run's locks are held by the worker running this test."""
    monkeypatch.setenv(parallel.RUN_ENV, f"unit-{uuid.uuid4().hex}")
    yield
    shutil.rmtree(parallel.run_dir(), ignore_errors=True)


def _worker_config():
    return SimpleNamespace(workerinput={})


def _hold(config, alone: bool, entered: threading.Event, release: threading.Event, log: list,
          name: str):
    with parallel.running(config, alone):
        log.append(("in", name))
        entered.set()
        release.wait(10)
        log.append(("out", name))


def test_an_alone_test_waits_for_running_tests_and_holds_back_new_ones():
    config = _worker_config()
    log: list = []
    events = {name: (threading.Event(), threading.Event()) for name in ("a", "alone", "b")}

    def start(name, alone):
        entered, release = events[name]
        thread = threading.Thread(target=_hold, args=(config, alone, entered, release, log, name))
        thread.start()
        return thread

    first = start("a", False)
    assert events["a"][0].wait(5)
    lonely = start("alone", True)
    time.sleep(0.3)
    assert not events["alone"][0].is_set()  # "a" is still running
    second = start("b", False)
    time.sleep(0.3)
    assert not events["b"][0].is_set()  # no new test starts while an alone one waits
    events["a"][1].set()
    assert events["alone"][0].wait(5)
    time.sleep(0.3)
    assert not events["b"][0].is_set()  # nor while it runs
    events["alone"][1].set()
    assert events["b"][0].wait(5)
    events["b"][1].set()
    for thread in (first, lonely, second):
        thread.join(5)
    assert log == [("in", "a"), ("out", "a"), ("in", "alone"), ("out", "alone"), ("in", "b"),
                   ("out", "b")]


def test_tests_that_are_not_alone_run_together():
    config = _worker_config()
    log: list = []
    pairs = [(threading.Event(), threading.Event()) for _ in range(3)]
    threads = [threading.Thread(target=_hold, args=(config, False, entered, release, log, str(i)))
               for i, (entered, release) in enumerate(pairs)]
    for thread in threads:
        thread.start()
    assert all(entered.wait(5) for entered, _ in pairs)  # all three in at once
    for _, release in pairs:
        release.set()
    for thread in threads:
        thread.join(5)


def test_outside_xdist_the_lock_is_not_taken():
    with parallel.running(SimpleNamespace(), alone=True):
        with parallel.running(SimpleNamespace(), alone=True):
            pass


def _item(nodeid: str, alone: bool = False):
    return SimpleNamespace(nodeid=nodeid,
                           get_closest_marker=lambda name: object() if alone else None)


def test_modules_are_handed_out_longest_first_and_alone_ones_last(monkeypatch):
    monkeypatch.setattr(parallel, "expected_durations",
                        lambda: {"t/short.py": 1.0, "t/long.py": 90.0, "t/alone.py": 500.0})
    items = [_item("t/short.py::a"), _item("t/alone.py::x", alone=True), _item("t/long.py::b"),
             _item("t/short.py::c"), _item("t/new.py::d")]
    parallel.pytest_collection_modifyitems(None, items)
    assert [i.nodeid for i in items] == ["t/long.py::b", "t/new.py::d", "t/short.py::a",
                                         "t/short.py::c", "t/alone.py::x"]


def test_workers_fit_the_machine(monkeypatch):
    monkeypatch.delenv("KBROKER_TEST_WORKERS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(parallel, "_memory_gib", lambda: 24.0)
    assert parallel.workers_for_machine() == 4
    monkeypatch.setattr(parallel, "_memory_gib", lambda: 7.0)  # memory bounds it
    assert parallel.workers_for_machine() == 2
    monkeypatch.setenv("KBROKER_TEST_WORKERS", "3")
    assert parallel.workers_for_machine() == 3
    for bad in ("0", "four", "-2"):
        monkeypatch.setenv("KBROKER_TEST_WORKERS", bad)
        with pytest.raises(pytest.UsageError, match="KBROKER_TEST_WORKERS"):
            parallel.workers_for_machine()


def test_a_failed_tests_report_gets_the_logs_written_while_it_ran(tmp_path):
    old = tmp_path / "earlier" / "data0-broker.log"
    old.parent.mkdir()
    old.write_text("an earlier test's broker\n")
    os.utime(old, (time.time() - 600, time.time() - 600))
    started = time.time() - 1
    fresh = tmp_path / "now" / "data0-broker.log"
    fresh.parent.mkdir()
    fresh.write_text("".join(f"line {i}\n" for i in range(200)))
    segment = tmp_path / "now" / "data0" / "t-0" / "00000000000000000000.log"
    segment.parent.mkdir(parents=True)
    segment.write_bytes(b"\0" * 64)  # a segment file is not a broker log
    assert failure_logs.logs_written_since(tmp_path, started) == [fresh]
    tail = failure_logs._tail(fresh).splitlines()
    assert len(tail) == failure_logs.TAIL_LINES and tail[-1] == "line 199"
