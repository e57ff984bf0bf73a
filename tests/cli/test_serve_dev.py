"""``kbroker serve --dev`` / ``kbroker dev``: ready file, JSON logs and ready line, banner, version."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from kafka.admin import KafkaAdminClient

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def start(tmp_path, *args) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "kbroker", *args, "--set", "listeners=PLAINTEXT://127.0.0.1:0",
         "--set", f"log.dirs={tmp_path / 'data'}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no ready file"
        time.sleep(0.02)
    return json.loads(path.read_text())


def stop(proc: subprocess.Popen) -> tuple[str, str]:
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return out, err


def test_dev_ready_file_and_banner(tmp_path):
    ready = tmp_path / "ready.json"
    proc = start(tmp_path, "dev", "--ready-file", str(ready))
    info = wait_for(ready, proc)
    try:
        assert info["pid"] == proc.pid
        port = info["listeners"]["PLAINTEXT"]["port"]
        assert port > 0 and info["bootstrap_servers"] == f"127.0.0.1:{port}"
        admin = KafkaAdminClient(bootstrap_servers=info["bootstrap_servers"])
        configs = admin.describe_configs(
            [__import__("kafka.admin", fromlist=["ConfigResource"]).ConfigResource("BROKER", "1")],
            config_filter="all")["broker"]["1"]
        admin.close()
        assert configs["group.initial.rebalance.delay.ms"]["value"] == "0"
        assert configs["offsets.topic.num.partitions"]["value"] == "1"
        assert configs["auto.create.topics.enable"]["value"] == "true"
    finally:
        out, _ = stop(proc)
    assert "(dev profile) ready" in out
    assert f"bootstrap servers  127.0.0.1:{port}" in out
    assert str(tmp_path / "data") in out and "Ctrl-C" in out


def test_json_logs_and_ready_line(tmp_path):
    proc = start(tmp_path, "serve", "--dev", "--log-format", "json")
    line = proc.stdout.readline()
    out, err = stop(proc)
    ready = json.loads(line)
    assert ready["event"] == "ready" and ready["pid"] == proc.pid
    assert ready["listeners"]["PLAINTEXT"]["port"] > 0
    entries = [json.loads(l) for l in err.splitlines() if l.strip()]
    assert any(e["message"].startswith("kbroker ready:") for e in entries)
    assert all({"ts", "level", "logger", "message"} <= set(e) for e in entries)


def test_clean_stop_writes_everything_before_the_fast_exit(tmp_path):
    """The process skips the interpreter's teardown (``kbroker.cli.main.run``), and only once
    the broker has stopped: its last log line and the clean-shutdown marker are out."""
    ready = tmp_path / "ready.json"
    proc = start(tmp_path, "dev", "--ready-file", str(ready), "--log-level", "info")
    wait_for(ready, proc)
    out, err = stop(proc)
    assert "(dev profile) ready" in out
    assert err.splitlines()[-1].endswith("kbroker: kbroker stopped cleanly")
    assert (tmp_path / "data" / ".kafka_cleanshutdown").exists()


def test_bare_kbroker_serves_and_prints_the_banner(tmp_path):
    proc = start(tmp_path)
    lines = [proc.stdout.readline()]
    while "kbroker --help" not in lines[-1] and lines[-1]:
        lines.append(proc.stdout.readline())
    stop(proc)
    assert lines[0].startswith("kbroker ") and " ready in " in lines[0]
    assert "(dev profile)" not in lines[0]
    assert any(line.split() == ["bootstrap", "servers", lines[0] and line.split()[-1]]
               for line in lines if line.startswith("  bootstrap servers"))


def run(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "kbroker", *args], capture_output=True, text=True,
                          env=ENV, timeout=60, **kwargs)


def test_version():
    result = run("--version")
    assert result.returncode == 0 and result.stdout.startswith("kbroker ")


def test_unknown_setting_names_the_closest(tmp_path):
    ready = tmp_path / "ready.json"
    proc = start(tmp_path, "dev", "--ready-file", str(ready), "--set", "num.partitons=3")
    wait_for(ready, proc)
    _, err = stop(proc)
    assert "unknown broker setting 'num.partitons' is ignored (did you mean 'num.partitions'?)" in err


def test_unknown_serve_flag_is_one_line(tmp_path):
    result = run("serve", "--ready-fil", "x", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == \
        "kbroker serve: error: unknown flag '--ready-fil' (did you mean '--ready-file'?)"
