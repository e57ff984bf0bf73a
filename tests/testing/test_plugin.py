"""The pytest plugin, as a user gets it: a sample project run by a separate pytest process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROJECT = Path(__file__).parent / "plugin_project"


def _plugin_args() -> list[str]:
    """Installed kbroker registers the plugin through its pytest11 entry point; a checkout that
    is not (re)installed yet loads it by name."""
    installed = any(ep.name == "kbroker" for ep in metadata.entry_points(group="pytest11"))
    return [] if installed else ["-p", "kbroker.testing.plugin"]


def run_sample(tmp_path, *args, env=None, project: Path = PROJECT) -> tuple[int, str]:
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])), **(env or {})}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *_plugin_args(),
         f"--basetemp={tmp_path / 'basetemp'}", *args, str(project)],
        cwd=project, env=environment, capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


def outcome(output: str) -> dict[str, int]:
    """Counts from pytest's summary line (the last line saying ``in N.NNs``)."""
    summary = [line for line in output.splitlines() if re.search(r" in [\d.]+s", line)][-1:]
    return {word: int(n) for n, word in
            re.findall(r"(\d+) (passed|failed|skipped|errors?)\b", "".join(summary))}


def test_pyproject_registers_the_plugin():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"]["kbroker"] == "kbroker.testing.plugin"


@pytest.mark.parametrize("mode", ["inprocess", "subprocess"])
def test_sample_project_passes(tmp_path, mode):
    code, output = run_sample(tmp_path, f"--kafka-broker-mode={mode}")
    assert code == 0, output
    assert outcome(output) == {"passed": 6, "skipped": 1}, output


def test_xdist_gives_each_worker_its_own_broker(tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    # --dist each runs every selected test on every worker, so both workers start a broker.
    code, output = run_sample(tmp_path, "-n", "2", "--dist", "each", "-k", "worker_sees or produce_and",
                              env={"KBROKER_SAMPLE_REPORT_DIR": str(reports)})
    assert code == 0, output
    written = {p.name: p.read_text() for p in reports.iterdir()}
    assert sorted(written) == ["gw0", "gw1"], written
    assert written["gw0"] != written["gw1"]


def test_keep_data_on_failure(tmp_path):
    code, output = run_sample(tmp_path, "--kafka-keep-data", "-k", "fails_on_purpose",
                              env={"KBROKER_SAMPLE_FAIL": "1"})
    assert code == 1, output
    kept = re.search(r"kbroker: kept broker data of a failed run in (\S+)", output)
    assert kept, output
    assert any(Path(kept.group(1)).rglob("*.log")), output


def test_data_is_removed_after_a_passing_session(tmp_path):
    code, output = run_sample(tmp_path, "--kafka-keep-data", "-k", "each_topic_is_fresh")
    assert code == 0, output
    assert "kept broker data" not in output
    assert not list((tmp_path / "basetemp").glob("kafka-broker*/*")), output
