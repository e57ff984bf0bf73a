#!/usr/bin/env python3
"""SASL logins per second (issue 24): OAUTHBEARER with signed tokens (KIP-768) and GSSAPI
(Kerberos),
kbroker vs Apache Kafka, in one run.

    .venv/bin/python tools/bench_auth.py                     # 3 rounds, ~3 min here
    .venv/bin/python tools/bench_auth.py --only oauth --rounds 1

Each round starts a fresh kbroker and a fresh single-node KRaft Kafka (tools/bench/brokers.py)
with the same SASL_PLAINTEXT listener, then measures against both, alternating which goes first:

- ``oauth-login`` (logins/s): OAUTHBEARER with Kafka's OAuthBearerValidatorCallbackHandler on
  the listener, the JWKS of a local identity provider (kbroker.testing.oauth_idp, RS256, expected
  audience and issuer set). ``--threads`` client threads each loop: connect, ApiVersions v0,
  SaslHandshake v1, SaslAuthenticate v1 with a signed token minted beforehand (the client's cost
  is not the broker's), close. Every login verifies an RSA-2048 signature on the broker;
- ``cpu-oauth-login`` (broker CPU-ms per login, user + system from /proc);
- ``gssapi-login`` / ``cpu-gssapi-login``: GSSAPI against a throwaway MIT KDC
  (kbroker.testing.kdc), the broker logged in from a keytab (kafka/localhost, Kafka's
  Krb5LoginModule JAAS entry on both); each login is RFC 4752's exchange with MIT's GSS-API as the
  client (python-gssapi: the service ticket is fetched once and cached, as clients do), so the
  broker decrypts a ticket and an authenticator (AES-256) and wraps/unwraps the security layer.

Ratios: > 1 favours kbroker for logins/s, < 1 for CPU per login.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tools" / "bench"))
import brokers  # noqa: E402
from brokers import run_kafka  # noqa: E402

from kbroker.testing.procfs import cpu_seconds  # noqa: E402

JWKS_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"


def log(msg: str) -> None:
    print(f"[bench-auth {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def oauth_settings(port: int, idp) -> dict[str, str]:
    return {"listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class":
                JWKS_HANDLER,
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
            "sasl.oauthbearer.jwks.endpoint.url": idp.jwks_url,
            "sasl.oauthbearer.expected.audience": idp.audience,
            "sasl.oauthbearer.expected.issuer": idp.issuer}


def gssapi_settings(kdc) -> dict[str, str]:
    return {"sasl.enabled.mechanisms": "OAUTHBEARER,GSSAPI", "sasl.kerberos.service.name": "kafka",
            "listener.name.sasl_plaintext.gssapi.sasl.jaas.config":
                "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true "
                f'storeKey=true keyTab="{kdc.broker_keytab}" principal="kafka/localhost@{kdc.realm}";'}


def start(name: str, idp, kdc, version: str):
    sasl_port, plain_port = run_kafka.free_port(), run_kafka.free_port()
    settings = {**oauth_settings(sasl_port, idp), **gssapi_settings(kdc)}
    settings["listeners"] = f"PLAINTEXT://127.0.0.1:{plain_port}," + settings["listeners"]
    if name == "kbroker":
        broker = brokers.KBroker(port=plain_port,
                                 extra=[f"{k}={v}" for k, v in settings.items()])
    else:
        settings["listeners"] += ",CONTROLLER://127.0.0.1:{controller_port}"
        settings["listener.security.protocol.map"] = (
            "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT")
        settings["advertised.listeners"] = (f"PLAINTEXT://127.0.0.1:{plain_port},"
                                            f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}")
        broker = brokers.Kafka(version=version, port=plain_port, extra_props=settings, jvm=[
            f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={idp.jwks_url}",
            f"-Djava.security.krb5.conf={kdc.krb5_conf}"])
    broker.sasl_port = sasl_port
    # The brokers answer on PLAINTEXT first; the SASL listener follows (after the JWKS is read).
    import socket
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", sasl_port), timeout=1).close()
            return broker
        except OSError:
            if time.monotonic() > deadline:
                broker.stop()
                raise RuntimeError(f"{name}'s SASL_PLAINTEXT listener never opened")
            time.sleep(0.05)


def oauth_login(sock, token: str) -> None:
    run_kafka.request(sock, 18, 0, 1, b"", client=b"bench")
    mech = b"OAUTHBEARER"
    reply = run_kafka.request(sock, 17, 1, 2, struct.pack(">h", len(mech)) + mech,
                              client=b"bench")
    assert struct.unpack_from(">h", reply)[0] == 0, "SaslHandshake failed"
    first = f"n,,\x01auth=Bearer {token}\x01\x01".encode()
    reply = run_kafka.request(sock, 36, 1, 3, struct.pack(">i", len(first)) + first,
                              client=b"bench")
    error, msg_len = struct.unpack_from(">hh", reply)
    at = 4 + max(msg_len, 0)
    (size,) = struct.unpack_from(">i", reply, at)
    if error or size:
        raise RuntimeError(f"login refused: {error} {reply[at + 4:at + 4 + size]!r}")


def gssapi_login(sock, credentials) -> None:
    import gssapi

    run_kafka.request(sock, 18, 0, 1, b"", client=b"bench")
    mech = b"GSSAPI"
    reply = run_kafka.request(sock, 17, 1, 2, struct.pack(">h", len(mech)) + mech,
                              client=b"bench")
    assert struct.unpack_from(">h", reply)[0] == 0, "SaslHandshake failed"
    context = gssapi.SecurityContext(
        name=gssapi.Name("kafka@localhost", gssapi.NameType.hostbased_service),
        creds=credentials, usage="initiate", flags=[gssapi.RequirementFlag.mutual_authentication])
    token, correlation, answered = context.step(), 3, False
    while True:
        reply = run_kafka.request(sock, 36, 1, correlation, struct.pack(">i", len(token)) + token,
                                  client=b"bench")
        correlation += 1
        error, msg_len = struct.unpack_from(">hh", reply)
        at = 4 + max(msg_len, 0)
        (size,) = struct.unpack_from(">i", reply, at)
        challenge = reply[at + 4:at + 4 + size]
        if error:
            raise RuntimeError(f"login refused: {error} {reply[4:at]!r}")
        if answered:
            return
        if not context.complete:
            token = context.step(challenge) or b""
        elif not challenge:
            token = b""
        else:
            offer = context.unwrap(challenge).message
            token = context.wrap(b"\x01" + offer[1:4], False).message
            answered = True


def login_rate(port: int, login, threads: int, seconds: float) -> float:
    import socket

    counts = [0] * threads
    errors: list[str] = []
    stop = time.monotonic() + seconds

    def loop(i: int) -> None:
        while time.monotonic() < stop:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    login(sock)
                    counts[i] += 1
            except Exception as exc:  # noqa: BLE001 - counted, reported
                if len(errors) < 3:
                    errors.append(repr(exc))
    workers = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
    started = time.monotonic()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if errors:
        raise RuntimeError(f"logins failed: {errors}")
    return sum(counts) / (time.monotonic() - started)


def run_round(name: str, cfg, idp, kdc, results: dict) -> None:
    import gssapi

    def record(workload: str, value: float) -> None:
        results.setdefault(workload, {}).setdefault(name, []).append(round(value, 3))
        log(f"  {name} {workload}: {value:.2f}")

    token = idp.token("bench")
    credentials = gssapi.Credentials(
        name=gssapi.Name(f"bench@{kdc.realm}", gssapi.NameType.kerberos_principal),
        usage="initiate", store={"client_keytab": str(kdc.bench_keytab),
                                 "ccache": "MEMORY:bench-auth"})
    logins = {"oauth-login": lambda sock: oauth_login(sock, token),
              "gssapi-login": lambda sock: gssapi_login(sock, credentials)}
    broker = start(name, idp, kdc, cfg.version)
    try:
        for workload, login in logins.items():
            if not re.search(cfg.only, workload):
                continue
            login_rate(broker.sasl_port, login, cfg.threads, 1.0)  # warm-up (Kafka's JIT too)
            before, started = cpu_seconds(broker.pid), time.monotonic()
            rate = login_rate(broker.sasl_port, login, cfg.threads, cfg.seconds)
            done = rate * (time.monotonic() - started)
            record(workload, rate)
            record(f"cpu-{workload}", 1000 * (cpu_seconds(broker.pid) - before) / done)
    finally:
        broker.stop()


def render(results: dict, meta: dict) -> str:
    out = [f"Run {meta['started']}, {meta['minutes']} min; {meta['rounds']} round(s); "
           f"{meta['threads']} client threads x {meta['seconds']} s; Apache Kafka "
           f"{meta['version']}.", "",
           "| workload | kbroker | Kafka | kbroker / Kafka | samples (kbroker; Kafka) |",
           "|---|---:|---:|---:|---|"]
    for workload, by in results.items():
        unit = "broker CPU-ms/login" if workload.startswith("cpu") else "logins/s"
        k, a = by.get("kbroker", []), by.get("kafka", [])
        mk = statistics.median(k) if k else float("nan")
        ma = statistics.median(a) if a else float("nan")
        out.append(f"| {workload} ({unit}) | {mk:.2f} | {ma:.2f} | {mk / ma:.2f} | "
                   f"{', '.join(map(str, k))}; {', '.join(map(str, a))} |")
    return "\n".join(out)


def main() -> int:
    from kbroker.testing.kdc import TestKdc
    from kbroker.testing.oauth_idp import IdentityProvider

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--only", default=".", help="regex over workload names")
    parser.add_argument("--version", default=run_kafka.DEFAULT_VERSION)
    parser.add_argument("--json", help="write raw samples here")
    cfg = parser.parse_args()
    run_kafka.fetch(cfg.version)
    idp = IdentityProvider(audience="kafka", issuer="https://idp.kbroker.test",
                           lifetime_s=3600).start()
    scratch = Path(tempfile.mkdtemp(prefix="bench-auth-"))
    kdc = TestKdc(scratch / "kdc").start()
    os.environ.update(kdc.env)  # the kbroker child and this process's GSS-API client
    kdc.broker_keytab = kdc.keytab("kafka/localhost")
    kdc.bench_keytab = kdc.keytab("bench")
    started = time.time()
    results: dict = {}
    try:
        for round_ in range(cfg.rounds):
            order = ("kbroker", "kafka") if round_ % 2 == 0 else ("kafka", "kbroker")
            for name in order:
                log(f"round {round_ + 1}/{cfg.rounds}: {name}")
                run_round(name, cfg, idp, kdc, results)
    finally:
        idp.stop()
        kdc.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    meta = {"started": time.strftime("%Y-%m-%d %H:%M", time.gmtime(started)),
            "minutes": round((time.time() - started) / 60, 1), "rounds": cfg.rounds,
            "threads": cfg.threads, "seconds": cfg.seconds, "version": cfg.version}
    if cfg.json:
        Path(cfg.json).write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    print(render(results, meta))
    return 0


if __name__ == "__main__":
    os.chdir(REPO)
    sys.exit(main())
