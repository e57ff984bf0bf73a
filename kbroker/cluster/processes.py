"""The processes a local cluster is made of (ZooKeeper, brokers, Kafka's tools), as a launcher,
a test or a fault tool handles them: a free port for one, a start in its own session with its
output in a log, a stop that asks before it kills, and the launcher's watch over its brokers."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_logged(command: list[str], log_path: str | os.PathLike,
                 cwd: str | os.PathLike | None = None) -> subprocess.Popen:
    """``command`` appending its stdout and stderr to ``log_path``, in its own session: a
    terminal's Ctrl-C reaches the launcher only, which stops things in order."""
    with open(log_path, "ab") as log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, cwd=cwd)


def stop_process(process: subprocess.Popen, timeout: float) -> None:
    """SIGTERM (the process shuts down cleanly), then SIGKILL if it is still up after
    ``timeout`` seconds."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def watch_brokers(brokers: list[dict], processes: list[subprocess.Popen], stopping: list,
                  launcher: str) -> None:
    """A foreground launcher's loop until ``stopping`` holds a signal: each broker that exits is
    reported once on stderr and not restarted (restarting is the tests' and tools' job)."""
    reported = set()
    while not stopping:
        for b, process in zip(brokers, processes):
            if process.poll() is not None and b["id"] not in reported:
                reported.add(b["id"])
                print(f"{launcher}: broker {b['id']} (pid {b['pid']}) exited with "
                      f"{process.returncode}; not restarted", file=sys.stderr, flush=True)
        time.sleep(0.2)
