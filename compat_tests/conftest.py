"""The compatibility matrix as a pytest plugin.

- Brokers: one real ``kbroker serve`` for the whole session (every cell uses its own topics);
  scenarios that need other broker settings start their own per module; the cluster column
  (``test_cluster.py``) shares one three-broker ``kbroker cluster up`` per session.
- Parametrization: a test that takes ``driver`` runs once per registered driver; one that takes
  ``producer`` and ``consumer`` runs for every pair; ``codec`` runs for every compression codec.
  ``COMPAT_CLIENTS=confluent,java`` and ``COMPAT_CODECS=none,zstd`` narrow a local run.
- Results: every test marked ``@pytest.mark.compat("scenario {param}")`` is one cell of the
  matrix (the client is the ``driver`` param, or ``client="name"`` on the marker for a
  client-specific scenario, with ``version="..."`` if it is not a registered driver). Its outcome (pass, fail and why, or a skip whose reason starts with ``n/a:``, ``gap:`` or
  ``pending:``) and the notes it adds through the ``cell`` fixture are collected, and at the end of
  the session ``tools/compat_report.py`` writes ``COMPATIBILITY.md`` (a full run) or
  ``build/compat/COMPATIBILITY.partial.md`` (a subset).
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compat_tests import harness, reference, security
from compat_tests.drivers.registry import DRIVERS, FEATURES, ROOT, Driver
from kbroker.cluster.processes import free_port
from tests.broker_process import BrokerProcess
from tests.parallel import is_worker
from tests.integration.clients import Wire

sys.path.insert(0, str(ROOT / "tools"))
import compat_report  # noqa: E402

# Scenarios too long or too load-sensitive for `make test`, run by `make test-long`: MirrorMaker 2
# between Kafka 4.4.0 and kbroker (a Kafka JVM, kbroker and MirrorMaker's JVM on 2 cores) missed
# its offset-translation deadline under load (the same scenario between two kbroker nodes runs in
# `make test`: test_mirror_maker.py), and the Faust agent takes over a minute (Quix Streams'
# application stays).
LONG_ONLY = ("pipeline/test_mirror_maker_kafka.py", "pipeline/test_faust.py")
LONG_RUN = bool(os.environ.get("KBROKER_LONG_TESTS"))
collect_ignore = [] if LONG_RUN else list(LONG_ONLY)

HERE = Path(__file__).resolve().parent
FULL_REPORT = ROOT / "COMPATIBILITY.md"
BUILD = ROOT / "build" / "compat"
# The cells of the LONG_ONLY modules from the last run that had them (``make test-long``): the
# report of a run without them shows these, dated, so the matrix keeps a row for every component.
CARRIED = HERE / "long_only_results.json"

# Api keys a consumer group needs from the broker.
GROUP_APIS = {10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup",
              14: "SyncGroup", 8: "OffsetCommit", 9: "OffsetFetch"}


def selected_drivers() -> list[Driver]:
    wanted = os.environ.get("COMPAT_CLIENTS")
    if not wanted:
        return list(DRIVERS)
    names = {n.strip() for n in wanted.split(",") if n.strip()}
    unknown = names - {d.name for d in DRIVERS}
    if unknown:
        raise pytest.UsageError(f"COMPAT_CLIENTS names unknown drivers {sorted(unknown)}; "
                                f"known: {[d.name for d in DRIVERS]}")
    return [d for d in DRIVERS if d.name in names]


def selected_codecs() -> list[str]:
    wanted = os.environ.get("COMPAT_CODECS")
    return [c for c in harness.CODECS if not wanted or c in wanted.split(",")]


def pytest_configure(config):
    config.addinivalue_line("markers", "compat(scenario): one cell of the compatibility matrix "
                                       "per parametrization; the scenario may name params")
    config.addinivalue_line("markers", "pairs_of(*features): producer x consumer only over the "
                                       "drivers whose clients have the features")
    # One session's results. Under pytest-xdist each worker fills its own and hands it to the
    # controller when it ends (``workeroutput``), which merges them and writes the report.
    # ``clients`` and ``scenarios`` are what a plugin of a client without a driver (Spark's)
    # adds to the report.
    config._compat = {"cells": [], "partial": bool(os.environ.get("COMPAT_CLIENTS")
                                                   or os.environ.get("COMPAT_CODECS")),
                      "started": time.time(), "versions": {}, "collected": False,
                      "clients": {}, "scenarios": {}}


def pytest_generate_tests(metafunc):
    drivers = selected_drivers()
    ids = [d.name for d in drivers]
    if "driver" in metafunc.fixturenames:
        metafunc.parametrize("driver", drivers, ids=ids)
    # A cross-client scenario of a feature few clients have pairs only those: its n/a cells
    # would repeat the single-client row's.
    marker = metafunc.definition.get_closest_marker("pairs_of")
    if marker is not None:
        drivers = [d for d in drivers if not any(f in d.lacks for f in marker.args)]
        ids = [d.name for d in drivers]
    if "producer" in metafunc.fixturenames:
        metafunc.parametrize("producer", drivers, ids=[f"{i}-to" for i in ids])
    if "consumer" in metafunc.fixturenames:
        metafunc.parametrize("consumer", drivers, ids=ids)
    if "codec" in metafunc.fixturenames:
        metafunc.parametrize("codec", selected_codecs())


def pytest_collection_modifyitems(config, items):
    # Cross-client cells share one production per (producer, codec): keep them together.
    def key(item):
        params = getattr(item, "callspec", None)
        params = params.params if params else {}
        return (str(item.fspath), params.get("codec", ""),
                getattr(params.get("producer"), "name", ""))
    compat = [i for i in items if i.get_closest_marker("compat")]
    if compat:
        order = {id(i): n for n, i in enumerate(sorted(compat, key=key))}
        slots = [n for n, i in enumerate(items) if i.get_closest_marker("compat")]
        ordered = sorted(compat, key=lambda i: order[id(i)])
        for slot, item in zip(slots, ordered):
            items[slot] = item


def pytest_deselected(items):
    if any(i.get_closest_marker("compat") for i in items):
        items[0].config._compat["partial"] = True


def module_name(path) -> str:
    """A compat module's path below compat_tests/ (``pipeline/test_faust.py``)."""
    return Path(str(path)).resolve().relative_to(HERE).as_posix()


def expected_modules() -> set[Path]:
    """The compat modules a complete run collects, Spark's and the pipeline's included (not the
    LONG_ONLY ones, unless this is a long run)."""
    return {p.resolve() for p in HERE.rglob("test_*.py")
            if not any(part in ("target", "node_modules", "build") for part in p.parts)
            and "mark.compat" in p.read_text()
            and (LONG_RUN or module_name(p) not in LONG_ONLY)}


def pytest_collection_finish(session):
    state = session.config._compat
    modules = {Path(str(i.fspath)).resolve() for i in session.items
               if i.get_closest_marker("compat")}
    state["collected"] = state["collected"] or bool(modules)
    if modules and not expected_modules() <= modules:
        state["partial"] = True


# ------------------------------------------------------------------------------------ fixtures

@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    """The shared broker: Kafka's defaults (auto-create on, message.max.bytes 1 MiB), with two
    log dirs (``log_dirs``) for moves between them, and its schema registry on
    (``registry``, the URL the drivers' ``--registry`` option takes)."""
    base = tmp_path_factory.mktemp("compat")
    log_dirs = [str(base / "data"), str(base / "data2")]
    registry = f"http://127.0.0.1:{free_port()}"
    process = BrokerProcess(base / "data", {"group.initial.rebalance.delay.ms": 0,
                                            "log.dirs": ",".join(log_dirs),
                                            "schema.registry.listeners": registry}).start()
    process.log_dirs = log_dirs
    process.registry = registry
    yield process
    reference.forget(process.bootstrap)
    process.stop(timeout=10)


@pytest.fixture(scope="session")
def secure_broker(tmp_path_factory):
    """The security columns' broker: a listener per mode (compat_tests/security.py), certificates
    from a CA made for this session. Started only when a security cell runs."""
    directory = tmp_path_factory.mktemp("compat-secure")
    process = security.SecureBroker(directory / "data",
                                    security.make_ca(directory / "certs")).start()
    yield process
    reference.forget(process.plaintext)
    process.stop()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    """The cluster column's three brokers (``kbroker cluster up``: a real ZooKeeper, one process
    per broker), with the fault matrix's durability settings. Started only when a cluster cell
    runs; without ZooKeeper's jars every cluster cell fails with the launcher's hint."""
    from kbroker.testing.cluster import KafkaCluster

    cluster = KafkaCluster(3, data_dir=tmp_path_factory.mktemp("compat-cluster"), settings={
        "default.replication.factor": "3", "min.insync.replicas": "2",
        "transaction.state.log.min.isr": "2", "group.initial.rebalance.delay.ms": "0"}).start()
    yield cluster
    reference.forget(cluster.bootstrap_servers)
    cluster.stop()


@pytest.fixture(scope="session")
def advertised(broker) -> dict[int, tuple[int, int]]:
    with Wire(broker.bootstrap) as wire:
        wire.api_versions()
        return dict(wire.versions)


@pytest.fixture(scope="session")
def groups_pending(advertised) -> str | None:
    """Why consumer-group scenarios cannot run yet, or None once the broker serves groups."""
    missing = [name for key, name in GROUP_APIS.items() if key not in advertised]
    if missing:
        return ("pending: consumer groups not implemented in broker (ApiVersions does not "
                f"advertise {', '.join(missing)})")
    return None


class Cell:
    def __init__(self, item):
        self.item = item
        self.notes: list[str] = []

    def note(self, text: str) -> None:
        self.notes.append(text)

    def need(self, driver: Driver, *features: str) -> None:
        """Skip (reported as n/a or gap, with the reason) unless ``driver`` can run all of
        ``features``; fail when the driver cannot run at all (it should have been installed)."""
        reason = driver.unavailable()
        if reason:
            pytest.fail(f"driver unavailable: {reason}")
        for feature in features:
            assert feature in FEATURES, f"unknown feature {feature}"
            why = driver.why_not(feature)
            if why:
                pytest.skip(f"{why[0]}: {why[1]}")


@pytest.fixture
def cell(request) -> Cell:
    c = Cell(request.node)
    request.node._compat_cell = c
    return c


# ------------------------------------------------------------------------------------- results

def _label(item) -> tuple[str, str] | None:
    marker = item.get_closest_marker("compat")
    if marker is None:
        return None
    params = item.callspec.params if hasattr(item, "callspec") else {}
    names = {k: getattr(v, "name", v) for k, v in params.items()}
    scenario = marker.args[0].format(**names)
    if "producer" in names and "consumer" in names:
        client = f"{names['producer']} → {names['consumer']}"
    else:
        # A scenario of one client only (Spark's) names it: compat("...", client="spark").
        client = marker.kwargs.get("client") or names.get("driver", "")
    return scenario, client


def _reason(report) -> str:
    if report.skipped:
        longrepr = report.longrepr
        text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        return text.removeprefix("Skipped: ")
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return " ".join(lines[:3])[:400] if lines else "failed"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    label = _label(item)
    if label is None:
        return
    decisive = (report.when == "call") or (report.when == "setup" and not report.passed)
    if report.when == "teardown" and report.failed:
        decisive = True
    if not decisive:
        return
    if report.passed:
        status, reason = "pass", ""
    elif report.skipped:
        reason = _reason(report)
        status = reason.split(":", 1)[0] if reason.split(":", 1)[0] in (
            "n/a", "gap", "pending") else "skipped"
        reason = reason.split(":", 1)[1].strip() if status != "skipped" else reason
    else:
        status, reason = "fail", _reason(report)
    cell = getattr(item, "_compat_cell", None)
    marker = item.get_closest_marker("compat")
    if marker.kwargs.get("version"):
        item.config._compat["versions"][label[1]] = marker.kwargs["version"]
    cells = item.config._compat["cells"]
    cells[:] = [c for c in cells if (c["scenario"], c["client"]) != label] + [{
        "scenario": label[0], "client": label[1], "status": status, "reason": reason,
        "notes": list(cell.notes) if cell else [], "seconds": round(report.duration, 1),
        "module": module_name(item.fspath)}]


def _versions(names: set[str]) -> dict:
    out = {}
    for d in DRIVERS:
        if d.name not in names:
            continue
        info = {"client": d.client, "version": "?"}
        if d.unavailable() is None:
            try:
                r = harness.run(d, "version", None, timeout=30)
                event = next(iter(r.of("version")), {})
                details = {k: v for k, v in event.items() if k not in ("event", "client")}
                info["version"] = str(details.pop("version", details.pop("kafkaClients", "?")))
                details.pop("commitId", None)
                if details:
                    info["details"] = ", ".join(f"{k} {v}" for k, v in details.items())
            except Exception as exc:  # noqa: BLE001 - the report says so
                info["version"] = f"? ({exc})"
        else:
            info["version"] = f"unavailable: {d.unavailable()}"
        out[d.name] = info
    return out


def _merge(state: dict, part: dict) -> None:
    """Add one worker's results to the session's (a cell run twice keeps its last result)."""
    labels = {(c["scenario"], c["client"]) for c in part["cells"]}
    state["cells"][:] = [c for c in state["cells"]
                         if (c["scenario"], c["client"]) not in labels] + part["cells"]
    state["partial"] = state["partial"] or part["partial"]
    state["collected"] = state["collected"] or part["collected"]
    for key in ("versions", "clients", "scenarios"):
        state[key].update(part[key])


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """xdist, on the controller: a worker has ended; its results join the session's."""
    part = getattr(node, "workeroutput", {}).get("compat")
    if part:
        _merge(node.config._compat, json.loads(part))
    elif error is not None:  # a worker that died took its cells with it
        node.config._compat["partial"] = True


def carry_long_only_cells(state: dict, commit: str) -> None:
    """Keep this run's cells of the LONG_ONLY modules for later runs, or, when it ran none of
    them, add the kept ones, each with a note saying when and on which commit it ran."""
    ran = [c for c in state["cells"] if c.get("module") in LONG_ONLY]
    if ran:
        day = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
        versions = {c["client"]: state["versions"][c["client"]] for c in ran
                    if c["client"] in state["versions"]}
        CARRIED.write_text(json.dumps({"ran": day, "commit": commit, "cells": ran,
                                       "versions": versions}, indent=1) + "\n")
        return
    if not CARRIED.exists():
        return
    carried = json.loads(CARRIED.read_text())
    labels = {(c["scenario"], c["client"]) for c in state["cells"]}
    for cell in carried["cells"]:
        if (cell["scenario"], cell["client"]) not in labels:
            when = f"result of `make test-long` on {carried['ran']} (commit {carried['commit']})"
            state["cells"].append({**cell, "notes": [when, *cell.get("notes", [])]})
            if cell["client"] in carried.get("versions", {}):
                state["versions"].setdefault(cell["client"], carried["versions"][cell["client"]])


def pytest_sessionfinish(session, exitstatus):
    state = session.config._compat
    if is_worker(session.config):
        keys = ("cells", "partial", "collected", "versions", "clients", "scenarios")
        session.config.workeroutput["compat"] = json.dumps({k: state[k] for k in keys})
        return
    if not state.get("collected") or not state["cells"]:
        return
    partial = state["partial"] or session.shouldstop or session.shouldfail or \
        exitstatus == pytest.ExitCode.INTERRUPTED
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip() or "?"
    carry_long_only_cells(state, commit)
    names = {d.name for d in DRIVERS}
    used = {n for c in state["cells"] for n in c["client"].split(" → ") if n in names}
    others = list(dict.fromkeys(c["client"] for c in state["cells"]
                                if c["client"] and " → " not in c["client"]
                                and c["client"] not in names))
    results = {
        "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit,
        "minutes": round((time.time() - state["started"]) / 60, 1),
        "complete": not partial,
        "clients": {**_versions(used), **{n: state["clients"].get(n) or {
            "client": n, "version": state["versions"].get(n, "?")} for n in others}},
        "drivers": [d.name for d in DRIVERS if d.name in used] + others,
        "registered": [d.name for d in DRIVERS if d.name in used],
        "codecs": list(harness.CODECS),
        "cells": state["cells"],
        "scenarios": state["scenarios"],
    }
    BUILD.mkdir(parents=True, exist_ok=True)
    (BUILD / "results.json").write_text(json.dumps(results, indent=1))
    target = FULL_REPORT if not partial else BUILD / "COMPATIBILITY.partial.md"
    target.write_text(compat_report.render(results))
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"compatibility matrix written to {target.relative_to(ROOT)}")
