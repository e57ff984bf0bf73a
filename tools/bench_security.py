#!/usr/bin/env python3
"""Security benchmarks (issue 14): kbroker vs Apache Kafka over TLS and SASL, in one run.

    .venv/bin/python tools/bench_security.py                      # 2 rounds, ~6-10 min here
    .venv/bin/python tools/bench_security.py --rounds 1 --records 100000 --auth-seconds 3

Each round starts a fresh kbroker and a fresh single-node KRaft Kafka (tools/bench/brokers.py),
both with the same listeners and the same certificates (a CA made for the run with
``cryptography``; the brokers get a PEM key store): PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL,
SCRAM-SHA-512 enabled on the SASL ones (Kafka's JAAS entry for it on each). One SCRAM-SHA-512
user (4096 iterations) is created on each broker through AlterUserScramCredentials.

Workloads, against both brokers, alternating which goes first:

- ``produce-<mode>``: Kafka's ProducerPerformance, ``--records`` 1 KiB records into a fresh
  one-partition topic, client defaults (acks=all, batch.size 16 KiB, linger.ms 5), the security
  settings in a ``--command-config`` file (PEM trust store; SCRAM through sasl.jaas.config);
- ``consume-<mode>``: Kafka's ConsumerPerformance reads that topic back (client defaults, a
  group), the rate once the group is joined;
- ``cpu-produce-<mode>``, ``cpu-consume-<mode>``: the broker process's CPU seconds (user +
  system, /proc) per GB of record values during that cell; lower is better, and it moves far
  less than throughput when other work shares the machine;
- ``scram-auth-<listener>``: SCRAM-SHA-512 authentications per second: ``--auth-threads``
  threads each loop connect (+ TLS handshake on SASL_SSL), ApiVersions, SaslHandshake v1 and two
  SaslAuthenticate v1 round trips, close. The client caches the salted password (as a client
  re-authenticating would not, but the PBKDF2 cost is the client's, not the broker's), so the
  figure is the broker's cost plus this machine's TLS and Python client overhead, the same for
  both brokers; ``cpu-scram-auth-<listener>`` is the broker's CPU milliseconds per
  authentication (TLS handshake included on SASL_SSL).

Modes: PLAINTEXT (the baseline), SSL and SASL_SSL (SCRAM-SHA-512). Throughput in MB/s of record
values (10^6 bytes); the report gives medians and kbroker/Kafka ratios (> 1 favours kbroker for
throughput and authentications, < 1 for CPU per GB).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import os
import re
import secrets
import socket
import ssl
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
import topics  # noqa: E402
from kafka_perf import (CONSUMER_PERF, PRODUCER_PERF, consumed_fields, java_tool,  # noqa: E402
                        produced_per_s)
from topics import admin, create_topic  # noqa: E402

from compat_tests.security import make_ca  # noqa: E402
from kbroker.testing.procfs import cpu_seconds  # noqa: E402

USER, PASSWORD = "bench", "bench-secret"
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
LISTENERS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
THROUGHPUT_MODES = ("PLAINTEXT", "SSL", "SASL_SSL")


def log(msg: str) -> None:
    print(f"[bench-security {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- brokers

def broker_settings(ports: dict[str, int], ca) -> dict[str, str]:
    """The same settings for both brokers (Kafka adds its controller listener)."""
    return {
        "listeners": ",".join(f"{n}://127.0.0.1:{ports[n]}" for n in LISTENERS),
        "listener.security.protocol.map": ",".join(f"{n}:{n}" for n in LISTENERS),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(ca.server.keystore_pem),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        **{f"listener.name.{n.lower()}.scram-sha-512.sasl.jaas.config": SCRAM_JAAS
           for n in ("SASL_PLAINTEXT", "SASL_SSL")},
    }


def start(name: str, ca, version: str):
    ports = {n: run_kafka.free_port() for n in LISTENERS}
    settings = broker_settings(ports, ca)
    if name == "kbroker":
        broker = brokers.KBroker(port=ports["PLAINTEXT"],
                                 extra=[f"{k}={v}" for k, v in settings.items()])
    else:
        kafka = dict(settings)
        kafka["listeners"] += ",CONTROLLER://127.0.0.1:{controller_port}"
        kafka["listener.security.protocol.map"] += ",CONTROLLER:PLAINTEXT"
        kafka["advertised.listeners"] = ",".join(f"{n}://127.0.0.1:{ports[n]}"
                                                 for n in LISTENERS)
        broker = brokers.Kafka(version=version, port=ports["PLAINTEXT"], extra_props=kafka)
    broker.ports = ports
    create_scram_user(broker.bootstrap)
    return broker


def create_scram_user(bootstrap: str) -> None:
    from confluent_kafka.admin import (ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialUpsertion)
    client = admin(bootstrap)
    futures = client.alter_user_scram_credentials([UserScramCredentialUpsertion(
        USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), PASSWORD.encode())])
    for future in futures.values():
        future.result(30)


def delete_topic(bootstrap: str, topic: str) -> None:
    topics.delete_topic(bootstrap, topic, log)


# ---------------------------------------------------------------- Kafka's tools

def client_config(broker, mode: str, ca, directory: Path) -> Path:
    """A --command-config file: bootstrap on the mode's listener and its security settings."""
    props = {"bootstrap.servers": f"127.0.0.1:{broker.ports[mode]}", "security.protocol": mode}
    if mode.endswith("SSL"):
        props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca.ca_pem)})
    if mode.startswith("SASL_"):
        props.update({"sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config":
                      "org.apache.kafka.common.security.scram.ScramLoginModule required "
                      f'username="{USER}" password="{PASSWORD}";'})
    path = directory / f"{broker.name}-{mode}.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def produce_perf(config: Path, topic: str, records: int, version: str) -> float:
    out = java_tool(PRODUCER_PERF, ["--topic", topic, "--num-records", str(records),
                                    "--record-size", "1024", "--throughput", "-1",
                                    "--command-config", str(config)], version)
    return produced_per_s(out) * 1024 / 1e6


def consume_perf(broker, mode: str, config: Path, topic: str, records: int,
                 version: str) -> float:
    out = java_tool(CONSUMER_PERF, [
        "--bootstrap-server", f"127.0.0.1:{broker.ports[mode]}", "--topic", topic,
        "--num-records", str(records), "--group", f"g-{topic}", "--timeout", "60000",
        "--command-config", str(config)], version)
    # fetch.nMsg.sec: the rate after the group is joined
    return float(consumed_fields(out, records)[9]) * 1024 / 1e6


# ---------------------------------------------------------------- SCRAM authentications

def _exchange(sock, api_key: int, version: int, correlation: int, body: bytes) -> bytes:
    return run_kafka.request(sock, api_key, version, correlation, body, client=b"bench")


_salted: dict[tuple[bytes, int], bytes] = {}


def scram_authenticate(sock) -> None:
    """ApiVersions v0, SaslHandshake v1 (SCRAM-SHA-512), SaslAuthenticate v1 twice."""
    _exchange(sock, 18, 0, 1, b"")
    mech = b"SCRAM-SHA-512"
    reply = _exchange(sock, 17, 1, 2, struct.pack(">h", len(mech)) + mech)
    assert struct.unpack_from(">h", reply)[0] == 0, "SaslHandshake failed"
    nonce = secrets.token_urlsafe(18)
    bare = f"n={USER},r={nonce}"

    def authenticate(correlation: int, token: bytes) -> bytes:
        reply = _exchange(sock, 36, 1, correlation, struct.pack(">i", len(token)) + token)
        error, msg_len = struct.unpack_from(">hh", reply)
        if error:
            raise RuntimeError(f"SaslAuthenticate error {error}: "
                               f"{reply[4:4 + max(msg_len, 0)].decode()}")
        at = 4 + max(msg_len, 0)
        (size,) = struct.unpack_from(">i", reply, at)
        return reply[at + 4:at + 4 + size]

    server_first = authenticate(3, f"n,,{bare}".encode()).decode()
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    salt, iterations = base64.b64decode(fields["s"]), int(fields["i"])
    key = (salt, iterations)
    if key not in _salted:
        _salted[key] = hashlib.pbkdf2_hmac("sha512", PASSWORD.encode(), salt, iterations)
    client_key = hmac.digest(_salted[key], b"Client Key", "sha512")
    stored_key = hashlib.sha512(client_key).digest()
    without_proof = f"c=biws,r={fields['r']}"
    auth_message = f"{bare},{server_first},{without_proof}".encode()
    signature = hmac.digest(stored_key, auth_message, "sha512")
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    final = authenticate(4, f"{without_proof},p={base64.b64encode(proof).decode()}".encode())
    assert final.startswith(b"v="), final


def auth_rate(port: int, tls: ssl.SSLContext | None, threads: int, seconds: float) -> float:
    counts = [0] * threads
    errors: list[str] = []
    stop = time.monotonic() + seconds

    def loop(i: int) -> None:
        while time.monotonic() < stop:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
                    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    sock = tls.wrap_socket(raw, server_hostname="localhost") if tls else raw
                    scram_authenticate(sock)
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
        raise RuntimeError(f"authentications failed: {errors}")
    return sum(counts) / (time.monotonic() - started)


# ---------------------------------------------------------------- the run

def run_round(name: str, ca, cfg, round_: int, results: dict, scratch: Path) -> None:
    def record(workload: str, value: float) -> None:
        results.setdefault(workload, {}).setdefault(name, []).append(round(value, 2))
        log(f"  {name} {workload}: {value:.1f}")

    broker = start(name, ca, cfg.version)
    try:
        for mode in THROUGHPUT_MODES:
            if not re.search(cfg.only, f"produce-{mode}|consume-{mode}"):
                continue
            topic = f"sec-{mode.lower()}-{round_}"
            create_topic(broker.bootstrap, topic)
            config = client_config(broker, mode, ca, scratch)
            gigabytes = cfg.records * 1024 / 1e9
            before = cpu_seconds(broker.pid)
            record(f"produce-{mode}", produce_perf(config, topic, cfg.records, cfg.version))
            record(f"cpu-produce-{mode}", (cpu_seconds(broker.pid) - before) / gigabytes)
            before = cpu_seconds(broker.pid)
            record(f"consume-{mode}", consume_perf(broker, mode, config, topic, cfg.records,
                                                   cfg.version))
            record(f"cpu-consume-{mode}", (cpu_seconds(broker.pid) - before) / gigabytes)
            delete_topic(broker.bootstrap, topic)
        tls = ssl.create_default_context(cafile=str(ca.ca_pem))
        for listener, context in (("SASL_PLAINTEXT", None), ("SASL_SSL", tls)):
            if re.search(cfg.only, f"scram-auth-{listener}"):
                before, started = cpu_seconds(broker.pid), time.monotonic()
                rate = auth_rate(broker.ports[listener], context, cfg.auth_threads,
                                 cfg.auth_seconds)
                done = rate * (time.monotonic() - started)
                record(f"scram-auth-{listener}", rate)
                record(f"cpu-scram-auth-{listener}",
                       1000 * (cpu_seconds(broker.pid) - before) / done)
    finally:
        broker.stop()


def fmt(value: float) -> str:
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def render(results: dict, meta: dict) -> str:
    out = [f"Run {meta['started']}, {meta['minutes']} min; {meta['rounds']} round(s); "
           f"{meta['records']:,} x 1 KiB records per throughput cell; SCRAM: "
           f"{meta['auth_threads']} client threads x {meta['auth_seconds']} s; Apache Kafka "
           f"{meta['version']}.", "",
           "| workload | kbroker | Kafka | kbroker / Kafka | samples (kbroker; Kafka) |",
           "|---|---:|---:|---:|---|"]
    for workload, by in results.items():
        unit = "auth/s" if workload.startswith("scram") else \
            "broker CPU-ms/auth" if workload.startswith("cpu-scram") else \
            "broker CPU-s/GB" if workload.startswith("cpu") else "MB/s"
        k, a = by.get("kbroker", []), by.get("kafka", [])
        mk = statistics.median(k) if k else float("nan")
        ma = statistics.median(a) if a else float("nan")
        out.append(f"| {workload} ({unit}) | {fmt(mk)} | {fmt(ma)} | {mk / ma:.2f} | "
                   f"{', '.join(map(str, k))}; {', '.join(map(str, a))} |")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--auth-threads", type=int, default=4)
    parser.add_argument("--auth-seconds", type=float, default=5.0)
    parser.add_argument("--only", default=".", help="regex over workload names")
    parser.add_argument("--version", default=run_kafka.DEFAULT_VERSION)
    parser.add_argument("--json", help="write raw samples here")
    cfg = parser.parse_args()
    run_kafka.fetch(cfg.version)
    started = time.time()
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="bench-security-") as scratch:
        ca = make_ca(Path(scratch) / "certs")
        for round_ in range(cfg.rounds):
            order = ("kbroker", "kafka") if round_ % 2 == 0 else ("kafka", "kbroker")
            for name in order:
                log(f"round {round_ + 1}/{cfg.rounds}: {name}")
                run_round(name, ca, cfg, round_, results, Path(scratch))
    meta = {"started": time.strftime("%Y-%m-%d %H:%M", time.gmtime(started)),
            "minutes": round((time.time() - started) / 60, 1), "rounds": cfg.rounds,
            "records": cfg.records, "auth_threads": cfg.auth_threads,
            "auth_seconds": cfg.auth_seconds, "version": cfg.version}
    if cfg.json:
        Path(cfg.json).write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    print(render(results, meta))
    return 0


if __name__ == "__main__":
    os.chdir(REPO)
    sys.exit(main())
