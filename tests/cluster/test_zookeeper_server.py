"""The ZooKeeper server helper: it serves, with the admin server off, and a missing install
says exactly how to get it (helper and `kbroker cluster up` alike)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kbroker.cluster import zookeeper as zk

ROOT = Path(__file__).resolve().parents[2]


def test_server_answers_with_the_admin_server_off(zookeeper):
    assert zk.is_serving(zookeeper.port)
    config = (zookeeper.data_dir / "zoo.cfg").read_text()
    assert "admin.enableServer=false" in config
    log = (zookeeper.data_dir / "zookeeper.log").read_text()
    assert "Started AdminServer" not in log


def test_missing_jars_name_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setenv("KBROKER_ZOOKEEPER_JARS", str(tmp_path))
    with pytest.raises(zk.ZooKeeperNotInstalled, match="scripts/install-test-deps.sh"):
        zk.start_zookeeper()


def test_cluster_up_without_zookeeper_says_how_to_install_it(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KBROKER_ZOOKEEPER_JARS": str(tmp_path)}
    result = subprocess.run([sys.executable, "-m", "kbroker.cli.main", "cluster", "up",
                             "--brokers", "1"], capture_output=True, text=True, env=env,
                            timeout=60)
    assert result.returncode == 1
    assert "tools/zookeeper/pom.xml dependency:copy-dependencies" in result.stderr
    assert "Traceback" not in result.stderr
