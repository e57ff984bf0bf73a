"""A throwaway PostgreSQL (Debian's packages) with logical decoding on, for Debezium.

``Postgres().start()`` runs ``initdb`` and ``postgres`` in a fresh directory on a free loopback
port, with ``wal_level=logical`` and trust authentication for local connections; it runs as the
``postgres`` system user when the tests run as root (PostgreSQL refuses root). ``sql()`` runs
statements through ``psql``; ``stop()`` removes everything.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from compat_tests.pipeline.connect import free_port


def bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(found[-1]).parent if found else None


def missing() -> str | None:
    if bin_dir() is None:
        return "PostgreSQL is not installed: run scripts/install-test-deps.sh (Debian's postgresql)"
    return None


class Postgres:
    def __init__(self):
        self.port = free_port()
        self.directory = Path(tempfile.mkdtemp(prefix="kbroker-pg-"))
        self.data = self.directory / "data"
        self.user = "postgres"
        self._as = []
        if os.geteuid() == 0:
            entry = pwd.getpwnam("postgres")
            os.chown(self.directory, entry.pw_uid, entry.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]

    def _run(self, *command, **kw):
        return subprocess.run([*self._as, *command], check=True, capture_output=True, text=True,
                              **kw)

    def start(self) -> "Postgres":
        bindir = bin_dir()
        self._run(str(bindir / "initdb"), "-D", str(self.data), "-U", self.user,
                  "--auth=trust", "-E", "UTF8")
        settings = {"listen_addresses": "'127.0.0.1'", "port": str(self.port),
                    "unix_socket_directories": f"'{self.directory}'", "wal_level": "logical",
                    "max_wal_senders": "4", "max_replication_slots": "4", "fsync": "off",
                    "shared_buffers": "32MB"}
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.writelines(f"{k} = {v}\n" for k, v in settings.items())
        self._run(str(bindir / "pg_ctl"), "-D", str(self.data), "-l",
                  str(self.directory / "postgres.log"), "-w", "-t", "60", "start")
        return self

    def sql(self, statements: str, database: str = "postgres") -> str:
        done = subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user,
                               "-d", database, "-v", "ON_ERROR_STOP=1", "-qAt", "-c",
                               statements], capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"psql failed: {done.stderr}")
        return done.stdout

    def stop(self) -> None:
        try:
            self._run(str(bin_dir() / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                      "stop")
        except subprocess.CalledProcessError:
            pass
        for _ in range(20):
            try:
                shutil.rmtree(self.directory)
                return
            except OSError:
                time.sleep(0.2)
