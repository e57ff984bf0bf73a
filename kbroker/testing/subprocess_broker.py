"""A real ``kbroker serve --dev`` child process, found through its ``--ready-file``.

Isolates the broker from the test process (its own GIL, its own crash); the pytest plugin uses it
with ``--kafka-broker-mode=subprocess``. Same surface as :class:`KafkaBroker`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Mapping

from kbroker.config.profile import as_string


class SubprocessKafkaBroker:
    def __init__(self, settings: Mapping[str, object] | None = None, *,
                 data_dir: str | Path | None = None, keep_data: bool = False,
                 start_timeout: float = 30.0, security=None) -> None:
        from kbroker.testing.security import BrokerSecurity

        self.settings = dict(settings or {})
        self.security_options = BrokerSecurity.of(security)
        self._prepared = None
        self.security = None  # SecurityInfo once started with ``security``
        self._given_data_dir = data_dir
        self.keep_data = keep_data or data_dir is not None
        self.start_timeout = start_timeout
        self.data_dir: Path | None = None
        self.proc: subprocess.Popen | None = None
        self.info: dict = {}

    @property
    def log_path(self) -> Path:
        return self.data_dir / "broker.log"

    def start(self) -> "SubprocessKafkaBroker":
        if self.security_options is not None:
            self.security_options.check_settings(self.settings)
        self.data_dir = Path(self._given_data_dir or tempfile.mkdtemp(prefix="kbroker-"))
        self.data_dir.mkdir(parents=True, exist_ok=True)
        ready_file = self.data_dir / "ready.json"
        ready_file.unlink(missing_ok=True)
        settings = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(self.data_dir / "logs")}
        if self.security_options is not None:
            self._prepared = self.security_options.prepare()
            settings.update(self._prepared.broker_settings())
        settings.update(self.settings)
        args = [sys.executable, "-m", "kbroker", "serve", "--dev", "--ready-file", str(ready_file)]
        for key, value in settings.items():
            args += ["--set", f"{key}={as_string(value)}"]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.start_timeout
        while not ready_file.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                self.proc.wait()
                self._remove_certificates()
                raise RuntimeError(f"kbroker did not start (exit {self.proc.returncode}); its log:\n"
                                   f"{self.log_path.read_text(errors='replace')}")
            time.sleep(0.01)
        self.info = json.loads(ready_file.read_text())
        if self._prepared is not None:
            try:
                self._prepared.create_scram_users(self._address("PLAINTEXT"))
            except BaseException:
                self.stop()
                raise
            self.security = self._prepared.info(self.listeners)
        return self

    def _address(self, listener: str) -> str:
        host, port = self.listeners[listener]
        return f"{host}:{port}"

    def _remove_certificates(self) -> None:
        if self._prepared is not None:
            self._prepared.remove()
            self._prepared = None

    def stop(self, timeout: float = 30.0) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # clean shutdown: flush and checkpoint
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None
        self._remove_certificates()
        if self.data_dir is not None and not self.keep_data:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> "SubprocessKafkaBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def bootstrap_servers(self) -> str:
        if self.security_options is not None:  # as KafkaBroker: the PLAINTEXT listener
            return self._address("PLAINTEXT")
        return self.info["bootstrap_servers"]

    @property
    def listeners(self) -> dict[str, tuple[str, int]]:
        return {name: (l["host"], l["port"]) for name, l in self.info["listeners"].items()}

    @property
    def port(self) -> int:
        return next(iter(self.listeners.values()))[1]

    @property
    def schema_registry_url(self) -> str | None:
        """The schema registry's URL from the ready file (on in the dev profile)."""
        return self.info.get("schema_registry")
