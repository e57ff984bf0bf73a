"""A throwaway MIT Kerberos KDC on 127.0.0.1, for testing GSSAPI: a realm of its own in a
directory, principals and keytabs made on demand.

    kdc = TestKdc(tmp_path / "kdc").start()          # realm KBROKER.TEST, a free port
    broker_keytab = kdc.keytab("kafka/localhost")    # principal created, key exported
    alice_keytab = kdc.keytab("alice")
    os.environ.update(kdc.env)                       # KRB5_CONFIG for this process and children
    ... java -Djava.security.krb5.conf={kdc.krb5_conf} ...
    kdc.stop()

Needs MIT Kerberos's KDC and admin tools from Debian (krb5-kdc, krb5-admin-server; installed by
scripts/install-test-deps.sh): ``kdb5_util`` makes the database, ``kadmin.local`` the principals
(random keys) and keytabs, ``krb5kdc -n`` serves on UDP and TCP. The krb5.conf it writes turns
off DNS (no reverse lookups, no canonicalization) and prefers TCP, so Java, librdkafka's Cyrus
SASL and MIT clients all reach it the same way.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

KDC_PROGRAMS = ("krb5kdc", "kdb5_util", "kadmin.local")


def _find(program: str) -> str:
    for directory in ("/usr/sbin", "/usr/bin", "/sbin"):
        path = Path(directory) / program
        if path.exists():
            return str(path)
    found = shutil.which(program)
    if found is None:
        raise FileNotFoundError(f"{program} is not installed (Debian: krb5-kdc krb5-admin-server; "
                                f"run scripts/install-test-deps.sh)")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TestKdc:
    __test__ = False  # not a pytest class

    def __init__(self, directory: Path, realm: str = "KBROKER.TEST"):
        self.dir = Path(directory)
        self.realm = realm
        self.port = _free_port()
        self.krb5_conf = self.dir / "krb5.conf"
        self.kdc_conf = self.dir / "kdc.conf"
        self._proc: subprocess.Popen | None = None

    @property
    def env(self) -> dict[str, str]:
        return {"KRB5_CONFIG": str(self.krb5_conf), "KRB5_KDC_PROFILE": str(self.kdc_conf)}

    def start(self) -> "TestKdc":
        self.dir.mkdir(parents=True, exist_ok=True)
        d, realm, port = self.dir, self.realm, self.port
        self.kdc_conf.write_text(f"""[kdcdefaults]
 kdc_ports = {port}
 kdc_tcp_ports = {port}
[realms]
 {realm} = {{
  database_name = {d}/principal
  admin_keytab = FILE:{d}/kadm5.keytab
  acl_file = {d}/kadm5.acl
  key_stash_file = {d}/stash
  kdc_ports = {port}
  kdc_tcp_ports = {port}
  max_life = 1d
  max_renewable_life = 7d
  supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
 }}
[logging]
 kdc = FILE:{d}/kdc.log
 admin_server = FILE:{d}/kadmin.log
""")
        self.krb5_conf.write_text(f"""[libdefaults]
 default_realm = {realm}
 dns_lookup_realm = false
 dns_lookup_kdc = false
 rdns = false
 dns_canonicalize_hostname = false
 udp_preference_limit = 1
 ticket_lifetime = 24h
 forwardable = true
[realms]
 {realm} = {{
  kdc = 127.0.0.1:{port}
 }}
[domain_realm]
 localhost = {realm}
 127.0.0.1 = {realm}
""")
        (d / "kadm5.acl").write_text(f"*/admin@{realm} *\n")
        env = {**os.environ, **self.env}
        subprocess.run([_find("kdb5_util"), "-r", realm, "create", "-s", "-P",
                        "kbroker-test-master"], env=env, check=True, capture_output=True)
        self._proc = subprocess.Popen([_find("krb5kdc"), "-n", "-r", realm], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                return self
            except OSError:
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"krb5kdc did not start: {self.log()}")
                time.sleep(0.05)

    def kadmin(self, query: str) -> str:
        done = subprocess.run([_find("kadmin.local"), "-r", self.realm, "-q", query],
                              env={**os.environ, **self.env}, capture_output=True, text=True)
        if done.returncode != 0 or "error" in done.stderr.lower():
            raise RuntimeError(f"kadmin.local {query!r}: {done.stdout}{done.stderr}")
        return done.stdout

    def principal(self, name: str) -> str:
        return name if "@" in name else f"{name}@{self.realm}"

    def keytab(self, *names: str, path: Path | None = None) -> Path:
        """Create the principals (random keys) and export their keys to one keytab."""
        path = path or self.dir / f"{names[0].replace('/', '_')}.keytab"
        for name in names:
            if f'"{self.principal(name)}"' not in self.kadmin(f"getprinc {name}") and \
                    self.principal(name) not in self.kadmin("listprincs"):
                self.kadmin(f"addprinc -randkey {name}")
        # ktadd re-randomizes the key unless -norandkey: export each principal once.
        self.kadmin(f"ktadd -k {path} -norandkey {' '.join(names)}")
        return path

    def log(self) -> str:
        try:
            return (self.dir / "kdc.log").read_text(errors="replace")[-4000:]
        except FileNotFoundError:
            return ""

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
