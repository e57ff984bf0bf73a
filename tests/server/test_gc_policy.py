"""The broker process's garbage collection around start-up (``kbroker.server.broker.serve``):
off while start-up builds the broker, then on again with what start-up built frozen."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import gc, os, signal, sys
from kbroker.config import load_config
from kbroker.server.broker import run_broker

seen = {}

def ready(broker):
    seen.update(enabled=gc.isenabled(), frozen=gc.get_freeze_count())
    os.kill(os.getpid(), signal.SIGTERM)

config = load_config(None, ["listeners=PLAINTEXT://127.0.0.1:0", "log.dirs=" + sys.argv[1]])
try:
    run_broker(config, on_ready=ready)
except Exception as exc:
    print("failed", type(exc).__name__, gc.isenabled())
else:
    print("ready", seen["enabled"], seen["frozen"], gc.isenabled())
"""


def probe(data_dir: Path) -> list[str]:
    done = subprocess.run([sys.executable, "-c", PROBE, str(data_dir)], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.split()


def test_collection_is_back_on_once_ready_with_start_up_frozen(tmp_path):
    event, enabled_at_ready, frozen, enabled_after_stop = probe(tmp_path / "data")
    assert event == "ready"
    assert enabled_at_ready == "True" and enabled_after_stop == "True"
    # What start-up built (modules, the config, the image) is out of later collections: tens of
    # thousands of objects (41,688 once handler modules came to be loaded on first use), where a
    # start-up that froze nothing leaves 0.
    assert int(frozen) > 20_000


def test_collection_is_back_on_after_a_failed_start(tmp_path):
    blocker = tmp_path / "data"
    blocker.write_text("a file where the log dir should be")
    assert probe(blocker) == ["failed", "StartupError", "True"]
