"""The plugin's experimental ``kafka_cluster`` fixture, used by a sample project in its own pytest
process; afterwards none of its processes is left running."""

from __future__ import annotations

import os
import re
from pathlib import Path

from tests.testing.test_plugin import outcome, run_sample

CLUSTER_PROJECT = Path(__file__).parent / "cluster_project"


def _our_processes(basetemp: Path) -> list[str]:
    """Command lines of live processes that mention this run's temp dirs."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            command = stat.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "kbroker" in command and str(basetemp) in command:
            found.append(command)
    return found


def test_cluster_sample_project(tmp_path):
    # the cluster's data goes under this test's temp dir, so leftovers can be found by path
    code, output = run_sample(tmp_path, project=CLUSTER_PROJECT,
                              env={"TMPDIR": str(tmp_path)})
    assert code == 0, output
    assert outcome(output) == {"passed": 2}, output
    assert _our_processes(tmp_path) == []
    assert not [p for p in os.listdir(tmp_path) if re.match(r"kbroker-cluster-", p)]
