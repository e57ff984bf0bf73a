"""``python -m kbroker ...`` from this checkout, as the CLI tests run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_kbroker(*args: str, stdin: str | bytes | None = None, env: dict | None = None,
                text: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    """The command's result with its output captured (``text=False``: as bytes), importing
    kbroker from this checkout; ``env`` adds to the environment."""
    return subprocess.run([sys.executable, "-m", "kbroker", *args], input=stdin,
                          capture_output=True, text=text, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
