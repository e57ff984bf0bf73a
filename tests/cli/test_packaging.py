"""Packaging: the wheel and sdist build (``python -m build``) with the entry points and metadata
users rely on; ``python -m kbroker``; the Dockerfile's health check probes /healthz on the HTTP
port it sets."""

from __future__ import annotations

import json
import os
import re
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
    assert "kbroker = kbroker.cli.main:run" in entry_points
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


def _dockerfile_env(dockerfile: str) -> dict:
    return dict(line[len("ENV "):].split("=", 1) for line in dockerfile.splitlines()
                if line.startswith("ENV "))


def test_dockerfile_runs_as_non_root_with_a_healthcheck_on_healthz(broker_factory):
    """The image's HEALTHCHECK probes /healthz on the HTTP port its ENTRYPOINT sets: run the
    check's own command against a real broker with that port."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "\nUSER kbroker\n" in dockerfile
    lines = dockerfile.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("HEALTHCHECK"))
    check = json.loads(lines[at + 1].strip().removeprefix("CMD "))
    assert "/healthz" in check[-1]
    entrypoint = next(line for line in lines if line.startswith("ENTRYPOINT"))
    assert '--set http.port=\\"$KBROKER_HTTP_PORT\\"' in entrypoint
    env = _dockerfile_env(dockerfile)
    assert int(env["KBROKER_HTTP_PORT"]) > 0
    broker = broker_factory({"http.port": "0"})
    port = int(re.search(r"kbroker HTTP on http://[^:]+:(\d+)/", broker.log()).group(1))
    command = [sys.executable if part == "python" else part for part in check]
    command[-1] = command[-1].replace("python -c", f"{sys.executable} -c")
    ok = subprocess.run(command, env={**os.environ, "KBROKER_HTTP_PORT": str(port)}, timeout=30)
    assert ok.returncode == 0
    broker.kill()
    failed = subprocess.run(command, env={**os.environ, "KBROKER_HTTP_PORT": str(port)},
                            timeout=30, capture_output=True)
    assert failed.returncode != 0  # no broker, no health
