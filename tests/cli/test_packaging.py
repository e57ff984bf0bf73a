"""Packaging: the wheel and sdist build (``python -m build``) with the entry points and metadata
users rely on; ``python -m kbroker``; the Dockerfile's health check names a real command."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_wheel_and_sdist(tmp_path):
    result = subprocess.run([sys.executable, "-m", "build", "--outdir", str(tmp_path), str(ROOT)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    [wheel] = tmp_path.glob("kbroker-*.whl")
    [sdist] = tmp_path.glob("kbroker-*.tar.gz")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        info = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(zf.read(info).decode())
        entry_points = zf.read(info.replace("METADATA", "entry_points.txt")).decode()
    assert "kbroker/testing/plugin.py" in names and "kbroker/__main__.py" in names
    assert "kbroker = kbroker.cli.main:main" in entry_points
    assert "[pytest11]\nkbroker = kbroker.testing.plugin" in entry_points
    assert metadata["License-Expression"] == "Apache-2.0"
    assert any(r.startswith("kafka-python") for r in metadata.get_all("Requires-Dist"))
    assert "Framework :: Pytest" in metadata.get_all("Classifier")
    with tarfile.open(sdist) as tf:
        assert any(n.endswith("/pyproject.toml") for n in tf.getnames())


def test_python_dash_m_kbroker():
    result = subprocess.run([sys.executable, "-m", "kbroker", "--help"], capture_output=True,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert result.returncode == 0 and "topic" in result.stdout and "examples:" in result.stdout


def test_dockerfile_runs_as_non_root_with_a_healthcheck():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "\nUSER kbroker\n" in dockerfile
    healthcheck = next(line for line in dockerfile.splitlines() if "CMD [\"kbroker\", \"cluster\"" in line)
    assert "info" in healthcheck
