#!/usr/bin/env python3
"""Schema registry throughput and latency (issue 37).

    .venv/bin/python tools/bench_schema_registry.py                  # ~30 s
    .venv/bin/python tools/bench_schema_registry.py --schemas 2000 --seconds 10 --json out.json

Starts one ``kbroker serve`` process with its registry on a free port, pinned to one core
(``taskset``, when the machine has it), then measures:

- ``register-ms`` (median and p99): ``--schemas`` distinct Avro schemas registered one after
  the other (POST /subjects/{s}/versions, each a new subject, id and version: a write of the
  _schemas topic committed before the answer), over one keep-alive connection;
- ``lookups-per-s``: GET /schemas/ids/{id} of random registered ids for ``--seconds``, by
  ``--connections`` keep-alive connections of an asyncio client in this process. No client
  cache: every lookup is a request, as a consumer with a cold SchemaRegistryClient cache makes
  one per new id. The broker's CPU per lookup (from /proc) shows what one core sustains;
- ``client-lookups-per-s``: confluent-kafka's SchemaRegistryClient fetching ids it has not seen
  (a cold cache per id), one thread: what a Python application sees.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kbroker.testing.procfs import cpu_seconds  # noqa: E402
from tests.broker_process import BrokerProcess  # noqa: E402


def log(msg: str) -> None:
    print(f"[bench-sr {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _schema(i: int) -> str:
    return json.dumps({"type": "record", "name": f"Bench{i}", "namespace": "bench",
                       "fields": [{"name": "id", "type": "long"},
                                  {"name": "payload", "type": "string"}]})


def register(port: int, count: int, first: int = 0) -> list[float]:
    conn = http.client.HTTPConnection("127.0.0.1", port)
    latencies = []
    for i in range(first, first + count):
        body = json.dumps({"schema": _schema(i)})
        started = time.perf_counter()
        conn.request("POST", f"/subjects/bench-{i}-value/versions", body,
                     {"Content-Type": "application/vnd.schemaregistry.v1+json"})
        reply = conn.getresponse()
        data = reply.read()
        latencies.append((time.perf_counter() - started) * 1000)
        if reply.status != 200:
            raise RuntimeError(f"register {i}: {reply.status} {data!r}")
    conn.close()
    return latencies


async def _lookup_loop(port: int, ids: list[int], deadline: float, counts: list[int]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    done = 0
    try:
        while time.monotonic() < deadline:
            schema_id = random.choice(ids)
            writer.write(f"GET /schemas/ids/{schema_id} HTTP/1.1\r\nHost: b\r\n"
                         "Accept: application/vnd.schemaregistry.v1+json\r\n\r\n".encode())
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length")))
            await reader.readexactly(length)
            if not head.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(head.decode())
            done += 1
    finally:
        writer.close()
        counts.append(done)


async def lookups(port: int, ids: list[int], seconds: float, connections: int) -> int:
    counts: list[int] = []
    deadline = time.monotonic() + seconds
    await asyncio.gather(*(_lookup_loop(port, ids, deadline, counts)
                           for _ in range(connections)))
    return sum(counts)


def client_lookups(url: str, ids: list[int], seconds: float) -> float:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    done, started = 0, time.monotonic()
    client = SchemaRegistryClient({"url": url})
    order = list(ids)
    random.shuffle(order)
    for schema_id in order:
        if done and done % len(ids) == 0:
            client = SchemaRegistryClient({"url": url})  # every id seen: a cold cache again
        client.get_schema(schema_id)
        done += 1
        if time.monotonic() - started > seconds:
            break
    return done / (time.monotonic() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--schemas", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args()

    data_dir = Path(tempfile.mkdtemp(prefix="kbroker-bench-sr-"))
    port = _free_port()
    broker = BrokerProcess(data_dir / "broker", {
        "schema.registry.listeners": f"http://127.0.0.1:{port}"})
    try:
        broker.start()
        pinned = shutil.which("taskset") is not None
        if pinned:
            os.system(f"taskset -a -cp 0 {broker.proc.pid} > /dev/null")
        log(f"broker pid {broker.proc.pid} on port {port}{' pinned to core 0' if pinned else ''}")
        register(port, 20, first=10**6)  # warm up: the topic's creation, imports
        latencies = register(port, args.schemas)
        latencies.sort()
        ids = list(range(1, args.schemas + 21))
        cpu_before = cpu_seconds(broker.proc.pid)
        count = asyncio.run(lookups(port, ids, args.seconds, args.connections))
        cpu = cpu_seconds(broker.proc.pid) - cpu_before
        client_rate = client_lookups(f"http://127.0.0.1:{port}", ids, args.seconds)
        results = {
            "register-ms-median": round(statistics.median(latencies), 3),
            "register-ms-p99": round(latencies[int(len(latencies) * 0.99) - 1], 3),
            "lookups-per-s": round(count / args.seconds),
            "broker-cpu-ms-per-lookup": round(cpu * 1000 / max(count, 1), 4),
            "lookups-per-cpu-s": round(count / cpu) if cpu else None,
            "client-lookups-per-s": round(client_rate),
            "schemas": args.schemas, "connections": args.connections,
            "pinned-to-one-core": pinned,
        }
    finally:
        broker.kill()
        shutil.rmtree(data_dir, ignore_errors=True)
    print(json.dumps(results, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
