"""Run a real kbroker process for integration tests: an ephemeral port on 127.0.0.1, a temp dir.

The broker is the same ``kbroker serve`` a user runs; tests talk to it over real sockets with real
clients. ``stop()`` sends SIGTERM (clean shutdown), ``kill()`` sends SIGKILL (a crash), and
``start()`` again reopens the same data dir.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

READY = re.compile(r"kbroker ready: .* listening on \S+://[^:]+:(\d+)")


class BrokerProcess:
    def __init__(self, data_dir: Path, overrides: dict | None = None, port: int = 0,
                 crash_at: tuple[str, str] | None = None):
        self.data_dir = Path(data_dir)
        self.overrides = dict(overrides or {})
        self.port = port
        # (step, write): the process dies at that step of the metadata write whose description
        # holds ``write`` (tests.metadata.crashing_broker); None runs plain ``kbroker serve``.
        self.crash_at = crash_at
        self.proc: subprocess.Popen | None = None
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}-broker.log"
        self._reader: threading.Thread | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> "BrokerProcess":
        settings = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.data_dir),
            **self.overrides,
        }
        args = [sys.executable, "-m", "kbroker.cli.main", "serve"]
        if self.crash_at is not None:
            args[2:3] = ["tests.metadata.crashing_broker", *self.crash_at]
        for key, value in settings.items():
            args += ["--set", f"{key}={value}"]
        log_file = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        ready = threading.Event()

        def pump():
            for line in self.proc.stdout:
                log_file.write(line)
                log_file.flush()
                match = READY.search(line.decode(errors="replace"))
                if match and not ready.is_set():
                    self.port = int(match.group(1))
                    ready.set()
            log_file.close()

        self._reader = threading.Thread(target=pump, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + timeout
        while not ready.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                raise RuntimeError(f"broker did not start; log:\n{self.log()}")
        return self

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self, timeout: float = 20.0) -> int:
        """Clean shutdown (SIGTERM); returns the exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._reader.join(5)
        return code

    def kill(self) -> None:
        """A crash: SIGKILL, no chance to flush or checkpoint."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            self._reader.join(5)

    def restart(self) -> "BrokerProcess":
        self.stop()
        return self.start()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_dead(self, timeout: float = 20.0) -> int:
        """The exit code of a process expected to die on its own (a crash test)."""
        code = self.proc.wait(timeout)
        self._reader.join(5)
        return code
