#!/usr/bin/env python3
"""Capture golden Kafka wire frames from real clients talking to a real Apache Kafka.

    python tools/capture_goldens.py --out tests/golden

Starts the reference Kafka (tools/kafka_ref/run_kafka.py) with ``advertised.listeners`` pointing
at a capturing TCP proxy on 127.0.0.1, then runs each client (confluent-kafka, kafka-python,
aiokafka, the Java driver in compat_tests/java) in its own subprocess through the proxy. Each
client creates a topic ``golden-<client>`` (1 partition), produces 3 records (key, null key, key;
two headers each) once per codec none/gzip/snappy/lz4/zstd (one batch per codec), then consumes
the 15 records from the beginning by partition assignment (no group).

Written under --out (see tests/golden/README.md):
  requests/<client>/<api_name>_v<ver>.bin    first request of each (api, version), no size prefix
  responses/<client>/<api_name>_v<ver>.bin   Kafka's response to that request, no size prefix
  batches/<client>-<codec>.bin (+ .json)     the `records` of the client's Produce for that codec
  manifest.json                              every file with client/version/api/direction

Needs: the project venv (clients + cramjam), java + mvn (Kafka jars and the driver jar are built
on demand). The proxy rewrites nothing.
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import shutil
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools" / "kafka_ref"))
sys.path.insert(0, str(ROOT))  # tests.recordbatch, kbroker

from kbroker.protocol import messages  # noqa: E402

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_IDS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
CLIENTS = ["confluent-kafka", "kafka-python", "aiokafka", "java"]
RECORDS_PER_CODEC = 3
JAVA_DIR = ROOT / "compat_tests" / "java"
JAVA_JAR = JAVA_DIR / "target" / "kbroker-java-driver.jar"


def log(msg: str) -> None:
    print(f"[capture] {msg}", file=sys.stderr, flush=True)


def expected_records(client: str, codec: str) -> list[dict]:
    """What every client produces for one codec (strings are UTF-8; None = null)."""
    out = []
    for i in range(RECORDS_PER_CODEC):
        out.append({
            "key": None if i % 2 == 1 else f"key-{i}",
            "value": f"{client}-{codec}-{i}",
            "headers": [{"key": "h-index", "value": str(i)}, {"key": "h-client", "value": client}],
        })
    return out


# =============================================================== API names / header versions

# Names and header versions from our generated registry (Apache Kafka's schemas, schemas/pin.json).
API_NAMES = {key: info.module for key, info in messages.API_BY_KEY.items()}


def header_versions(api_key: int, version: int) -> tuple[int | None, int | None]:
    """(request header version, response header version) per Kafka's rules."""
    if api_key not in messages.API_BY_KEY:
        return None, None
    return (messages.request_header_version(api_key, version),
            messages.response_header_version(api_key, version))


# =============================================================== wire parsing helpers

class Reader:
    def __init__(self, b: bytes, pos: int = 0):
        self.b, self.pos = b, pos

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.b):
            raise ValueError("short buffer")
        v = self.b[self.pos:self.pos + n]
        self.pos += n
        return v

    def i8(self): return struct.unpack(">b", self.take(1))[0]
    def i16(self): return struct.unpack(">h", self.take(2))[0]
    def i32(self): return struct.unpack(">i", self.take(4))[0]
    def u32(self): return struct.unpack(">I", self.take(4))[0]
    def i64(self): return struct.unpack(">q", self.take(8))[0]

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            byte = self.take(1)[0]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7

    def varint(self) -> int:
        v = self.uvarint()
        return (v >> 1) ^ -(v & 1)

    def string(self, flexible: bool) -> str | None:
        n = self.uvarint() - 1 if flexible else self.i16()
        return None if n < 0 else self.take(n).decode()

    def bytes_(self, flexible: bool) -> bytes | None:
        n = self.uvarint() - 1 if flexible else self.i32()
        return None if n < 0 else self.take(n)

    def array_len(self, flexible: bool) -> int:
        return self.uvarint() - 1 if flexible else self.i32()

    def tagged(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


def parse_request_header(frame: bytes) -> dict:
    api_key, version, corr = struct.unpack(">hhi", frame[:8])
    r = Reader(frame, 8)
    client_id = r.string(False)
    hv, _ = header_versions(api_key, version)
    if hv == 2:
        r.tagged()
    return {"api_key": api_key, "api_version": version, "correlation_id": corr,
            "client_id": client_id, "body_offset": r.pos}


def produce_partitions(frame: bytes) -> list[dict]:
    """Locate each partition's `records` in a Produce request (v3+)."""
    h = parse_request_header(frame)
    v = h["api_version"]
    flex = v >= 9
    r = Reader(frame, h["body_offset"])
    r.string(flex)  # transactional_id
    r.i16()         # acks
    r.i32()         # timeout_ms
    out = []
    for _ in range(r.array_len(flex)):
        if v >= 13:
            topic = "uuid:" + r.take(16).hex()
        else:
            topic = r.string(flex)
        for _ in range(r.array_len(flex)):
            part = r.i32()
            start = r.pos
            records = r.bytes_(flex)
            out.append({"topic": topic, "partition": part, "records": records, "offset": start})
            if flex:
                r.tagged()
        if flex:
            r.tagged()
    return out


def decode_batches(data: bytes) -> list[dict]:
    """RecordBatch v2 bytes (one or more batches) -> header fields + records, through the tests'
    independent batch decoder (tests/recordbatch.py)."""
    from tests.recordbatch import parse_batches

    def text(b: bytes | None) -> str | None:
        return None if b is None else b.decode()

    out = []
    for batch in parse_batches(data):
        if batch.magic != 2:
            raise ValueError(f"magic {batch.magic}")
        out.append({
            "baseOffset": batch.base_offset, "batchLength": batch.batch_length,
            "partitionLeaderEpoch": batch.partition_leader_epoch, "magic": batch.magic,
            "crc": batch.crc, "attributes": batch.attributes,
            "lastOffsetDelta": batch.last_offset_delta, "baseTimestamp": batch.base_timestamp,
            "maxTimestamp": batch.max_timestamp, "producerId": batch.producer_id,
            "producerEpoch": batch.producer_epoch, "baseSequence": batch.base_sequence,
            "recordCount": batch.record_count, "crcValid": batch.crc_ok,
            "compression": CODEC_IDS[batch.codec],
            "timestampType": "LogAppendTime" if batch.log_append_time else "CreateTime",
            "isTransactional": batch.transactional, "isControl": batch.control,
            "records": [{"attributes": r.attributes, "timestampDelta": r.timestamp_delta,
                         "offsetDelta": r.offset_delta, "key": text(r.key),
                         "value": text(r.value),
                         "headers": [{"key": k, "value": text(v)} for k, v in r.headers]}
                        for r in batch.raw_records()]})
    return out


# =============================================================== capturing proxy

class Capture:
    """Frames seen by the proxy, grouped by the client label active when the connection opened."""

    def __init__(self):
        self.lock = threading.Lock()
        self.label = "unlabelled"
        self.conn_seq = 0
        # label -> list of exchanges in arrival order: dict(conn, seq, request, response, key, ver, corr)
        self.exchanges: dict[str, list[dict]] = {}

    def new_conn(self) -> tuple[str, int]:
        with self.lock:
            self.conn_seq += 1
            return self.label, self.conn_seq

    def add_request(self, label, conn, frame) -> dict:
        h = parse_request_header(frame)
        ex = {"conn": conn, "request": frame, "response": None, "key": h["api_key"],
              "ver": h["api_version"], "corr": h["correlation_id"], "client_id": h["client_id"],
              "t": time.time()}
        with self.lock:
            self.exchanges.setdefault(label, []).append(ex)
        return ex


async def _read_frame(reader: asyncio.StreamReader) -> bytes | None:
    try:
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        return await reader.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None


async def _proxy_conn(cap: Capture, upstream_port: int, creader, cwriter):
    label, conn = cap.new_conn()
    try:
        ureader, uwriter = await asyncio.open_connection("127.0.0.1", upstream_port)
    except OSError:
        cwriter.close()
        return
    pending: dict[int, dict] = {}

    async def c2b():
        while (frame := await _read_frame(creader)) is not None:
            ex = cap.add_request(label, conn, frame)
            # acks=0 Produce gets no response; it is never matched, which is fine
            pending[ex["corr"]] = ex
            uwriter.write(struct.pack(">i", len(frame)) + frame)
            await uwriter.drain()
        uwriter.close()

    async def b2c():
        while (frame := await _read_frame(ureader)) is not None:
            corr = struct.unpack(">i", frame[:4])[0]
            ex = pending.pop(corr, None)
            if ex is not None:
                ex["response"] = frame
            cwriter.write(struct.pack(">i", len(frame)) + frame)
            await cwriter.drain()
        cwriter.close()

    await asyncio.gather(c2b(), b2c(), return_exceptions=True)
    for w in (uwriter, cwriter):
        w.close()


class Proxy:
    def __init__(self, cap: Capture, listen_port: int, upstream_port: int):
        self.cap, self.listen_port, self.upstream_port = cap, listen_port, upstream_port
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        asyncio.set_event_loop(self.loop)

        async def main():
            self.server = await asyncio.start_server(
                lambda r, w: _proxy_conn(self.cap, self.upstream_port, r, w),
                "127.0.0.1", self.listen_port)
            self.ready.set()
            async with self.server:
                await self.server.serve_forever()

        try:
            self.loop.run_until_complete(main())
        except asyncio.CancelledError:
            pass

    def start(self):
        self.thread.start()
        self.ready.wait(10)

    def stop(self):
        def _close():
            self.server.close()
            for t in asyncio.all_tasks(self.loop):
                t.cancel()
        self.loop.call_soon_threadsafe(_close)
        self.thread.join(5)


# =============================================================== client scenarios (subprocesses)

def _check_consumed(client: str, got: list[dict]) -> None:
    want = [r for c in CODECS for r in expected_records(client, c)]
    if got != want:
        raise SystemExit(f"{client}: consumed records differ:\n got={got}\nwant={want}")


def _hdrs_out(client, i):
    return [("h-index", str(i).encode()), ("h-client", client.encode())]


def _rec_dict(key, value, headers):
    return {"key": None if key is None else key.decode(), "value": value.decode(),
            "headers": [{"key": k, "value": None if v is None else v.decode()} for k, v in headers or []]}


def run_confluent(bootstrap: str, topic: str) -> dict:
    import confluent_kafka
    from confluent_kafka import Consumer, Producer, TopicPartition, OFFSET_BEGINNING
    from confluent_kafka.admin import AdminClient, NewTopic
    client = "confluent-kafka"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(30)
    for codec in CODECS:
        p = Producer({"bootstrap.servers": bootstrap, "compression.codec": codec,
                      "linger.ms": 1000, "enable.idempotence": True, "acks": "all"})
        for i, r in enumerate(expected_records(client, codec)):
            p.produce(topic, partition=0, key=None if r["key"] is None else r["key"].encode(),
                      value=r["value"].encode(), headers=_hdrs_out(client, i))
        if p.flush(30) != 0:
            raise SystemExit("confluent flush failed")
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "golden-confluent",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got, deadline = [], time.time() + 30
    while len(got) < 5 * RECORDS_PER_CODEC and time.time() < deadline:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        got.append(_rec_dict(m.key(), m.value(), m.headers()))
    c.close()
    _check_consumed(client, got)
    v = confluent_kafka.version()
    v = v[0] if isinstance(v, tuple) else v
    return {"client_version": f"{v} (librdkafka {confluent_kafka.libversion()[0]})",
            "consumed": len(got)}


def _install_cramjam_codec_shims() -> None:
    """kafka-python wants python-snappy / lz4 / zstandard; back them with cramjam (capture only).

    kafka.codec binds those modules at import time and kafka.record.default_records imports the
    lz4 functions by name, so patch the module globals in both places.
    """
    import io
    import types
    import cramjam
    import kafka.codec as codec
    import kafka.record.default_records as dr

    snappy = types.SimpleNamespace(
        compress=lambda b: bytes(cramjam.snappy.compress_raw(bytes(b))),
        decompress=lambda b: bytes(cramjam.snappy.decompress_raw(bytes(b))))

    class ZstdCompressor:
        def __init__(self, level=3, **kw): self.level = level
        def compress(self, b): return bytes(cramjam.zstd.compress(bytes(b), level=self.level))

    class ZstdDecompressor:
        def stream_reader(self, src, **kw):
            return io.BytesIO(bytes(cramjam.zstd.decompress(src.read())))

    def lz4_encode(b, **kw):
        # Kafka only accepts LZ4 frames with independent blocks
        c = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
        c.compress(bytes(b))
        return bytes(c.finish())

    def lz4_decode(b, **kw):
        return bytes(cramjam.lz4.decompress(bytes(b)))

    codec.snappy = snappy
    codec.zstd = types.SimpleNamespace(ZstdCompressor=ZstdCompressor, ZstdDecompressor=ZstdDecompressor)
    codec.lz4 = types.SimpleNamespace(compress=lz4_encode, decompress=lz4_decode)
    codec.lz4_encode, codec.lz4_decode = lz4_encode, lz4_decode
    dr.lz4_encode, dr.lz4_decode = lz4_encode, lz4_decode
    assert codec.has_snappy() and codec.has_lz4() and codec.has_zstd()


def run_kafka_python(bootstrap: str, topic: str) -> dict:
    _install_cramjam_codec_shims()
    import kafka
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic
    client = "kafka-python"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1)])
    admin.close()
    for codec in CODECS:
        p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=1000, acks="all",
                          compression_type=None if codec == "none" else codec)
        futs = [p.send(topic, partition=0, key=None if r["key"] is None else r["key"].encode(),
                       value=r["value"].encode(), headers=_hdrs_out(client, i))
                for i, r in enumerate(expected_records(client, codec))]
        p.flush(30)
        for f in futs:
            f.get(30)
        p.close()
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    got, deadline = [], time.time() + 30
    while len(got) < 5 * RECORDS_PER_CODEC and time.time() < deadline:
        for recs in c.poll(500).values():
            got += [_rec_dict(m.key, m.value, m.headers) for m in recs]
    c.close()
    _check_consumed(client, got)
    return {"client_version": kafka.__version__, "consumed": len(got),
            "note": "snappy/lz4/zstd via cramjam-backed module shims"}


def run_aiokafka(bootstrap: str, topic: str) -> dict:
    import aiokafka
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    client = "aiokafka"

    async def go():
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        await admin.create_topics([NewTopic(topic, 1, 1)])
        await admin.close()
        for codec in CODECS:
            p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=1000, acks="all",
                                 compression_type=None if codec == "none" else codec)
            await p.start()
            futs = []
            for i, r in enumerate(expected_records(client, codec)):
                futs.append(await p.send(topic, partition=0,
                                         key=None if r["key"] is None else r["key"].encode(),
                                         value=r["value"].encode(), headers=_hdrs_out(client, i)))
            await p.flush()
            await asyncio.gather(*futs)
            await p.stop()
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest")
        await c.start()
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        await c.seek_to_beginning(tp)
        got, deadline = [], time.time() + 30
        while len(got) < 5 * RECORDS_PER_CODEC and time.time() < deadline:
            for recs in (await c.getmany(timeout_ms=500)).values():
                got += [_rec_dict(m.key, m.value, m.headers) for m in recs]
        await c.stop()
        return got

    got = asyncio.run(go())
    _check_consumed(client, got)
    return {"client_version": aiokafka.__version__, "consumed": len(got)}


def _java(*args: str) -> list[dict]:
    res = subprocess.run(["java", "-jar", str(JAVA_JAR), *args], capture_output=True, text=True, timeout=120)
    lines = [json.loads(x) for x in res.stdout.splitlines() if x.startswith("{")]
    if res.returncode != 0:
        raise SystemExit(f"java driver {args[0]} failed ({res.returncode}): {res.stdout}\n{res.stderr}")
    return lines


def run_java(bootstrap: str, topic: str) -> dict:
    client = "java"
    ver = _java("version")[0]["kafkaClients"]
    _java("admin", "--bootstrap", bootstrap, "create-topic", "--topic", topic, "--partitions", "1")
    for codec in CODECS:
        _java("produce", "--bootstrap", bootstrap, "--topic", topic, "--partition", "0",
              "--count", str(RECORDS_PER_CODEC), "--compression", codec, "--acks", "all",
              "--idempotent", "true", "--key-prefix", "key-", "--value-prefix", f"{client}-{codec}-",
              "--null-key-every", "2", "--headers", "--linger-ms", "1000")
    lines = _java("consume", "--bootstrap", bootstrap, "--topic", topic,
                  "--count", str(5 * RECORDS_PER_CODEC), "--from-beginning", "--timeout-ms", "30000")
    got = [{"key": x["key"], "value": x["value"], "headers": x["headers"]}
           for x in lines if x["event"] == "record"]
    _check_consumed(client, got)
    return {"client_version": f"kafka-clients {ver}", "consumed": len(got)}


RUNNERS = {"confluent-kafka": run_confluent, "kafka-python": run_kafka_python,
           "aiokafka": run_aiokafka, "java": run_java}


# =============================================================== orchestration + output

def ensure_java_jar(rebuild: bool) -> None:
    if JAVA_JAR.exists() and not rebuild:
        return
    log("building the Java driver (mvn package)")
    subprocess.run(["mvn", "-q", "-B", "-Dstyle.color=never", "-f", str(JAVA_DIR / "pom.xml"), "package"],
                   check=True)


def write_outputs(cap: Capture, out: Path, versions: dict[str, str]) -> list[dict]:
    for sub in ("requests", "responses", "batches"):
        shutil.rmtree(out / sub, ignore_errors=True)
    manifest = []

    def add(path: Path, data: bytes, **meta):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        manifest.append({"path": str(path.relative_to(out)), **meta, "size": len(data),
                         "sha256": hashlib.sha256(data).hexdigest()})

    for client in CLIENTS:
        exs = cap.exchanges.get(client, [])
        seen_api: set[int] = set()
        seen: set[tuple[int, int]] = set()
        for ex in exs:
            k, v = ex["key"], ex["ver"]
            if (k, v) in seen:
                continue
            seen.add((k, v))
            first_of_api = k not in seen_api
            seen_api.add(k)
            name = f"{API_NAMES.get(k, f'api{k}')}_v{v}.bin"
            reqh, resph = header_versions(k, v)
            common = {"client": client, "client_version": versions[client], "api_key": k,
                      "api_name": API_NAMES.get(k, f"api{k}"), "api_version": v,
                      "first_of_api": first_of_api, "correlation_id": ex["corr"]}
            add(out / "requests" / client / name, ex["request"], direction="request",
                header_version=reqh, **common)
            if ex["response"] is not None:
                add(out / "responses" / client / name, ex["response"], direction="response",
                    header_version=resph, **common)

        # batches: first Produce batch per codec
        done: set[str] = set()
        for ex in exs:
            if ex["key"] != 0:
                continue
            for part in produce_partitions(ex["request"]):
                recs = part["records"]
                if not recs:
                    continue
                batches = decode_batches(recs)
                codec = batches[0]["compression"]
                if codec in done:
                    continue
                done.add(codec)
                want = expected_records(client, codec)
                got = [{"key": r["key"], "value": r["value"], "headers": r["headers"]}
                       for b in batches for r in b["records"]]
                if got != want:
                    raise SystemExit(f"{client}/{codec}: batch decode mismatch\n{got}\n{want}")
                if not all(b["crcValid"] for b in batches):
                    raise SystemExit(f"{client}/{codec}: bad CRC")
                stem = f"{client}-{codec}"
                meta = {"client": client, "client_version": versions[client], "api_key": 0,
                        "api_name": "produce", "api_version": ex["ver"], "codec": codec}
                add(out / "batches" / f"{stem}.bin", recs, direction="records", **meta)
                sidecar = {
                    "client": client, "client_version": versions[client], "codec": codec,
                    "produce_api_version": ex["ver"], "topic_field": part["topic"],
                    "partition": part["partition"], "size": len(recs),
                    "expected_records": want,
                    "batches": [{k2: v2 for k2, v2 in b.items() if k2 != "records"} | {
                        "records": [{kk: r[kk] for kk in ("attributes", "timestampDelta", "offsetDelta")}
                                    for r in b["records"]]} for b in batches],
                }
                add(out / "batches" / f"{stem}.json",
                    (json.dumps(sidecar, indent=2) + "\n").encode(), direction="records-expected", **meta)
        missing = set(CODECS) - done
        if missing:
            log(f"WARNING: {client}: no produce batch captured for {sorted(missing)}")
    manifest.sort(key=lambda m: m["path"])
    return manifest


def summarize(cap: Capture) -> dict:
    out = {}
    for client, exs in cap.exchanges.items():
        by_api: dict[str, set[int]] = {}
        for ex in exs:
            by_api.setdefault(API_NAMES.get(ex["key"], str(ex["key"])), set()).add(ex["ver"])
        out[client] = {k: sorted(v) for k, v in sorted(by_api.items())}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "tests" / "golden"))
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--proxy-port", type=int, default=0, help="default: a free port")
    ap.add_argument("--kafka-port", type=int, default=0, help="default: a free port")
    ap.add_argument("--kafka-version", default=None)
    ap.add_argument("--rebuild-java", action="store_true")
    ap.add_argument("--run-client", help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", help=argparse.SUPPRESS)
    ap.add_argument("--topic", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)

    if a.run_client:  # child mode
        print(json.dumps(RUNNERS[a.run_client](a.bootstrap, a.topic)))
        return 0

    import run_kafka
    clients = [c for c in a.clients.split(",") if c]
    if "java" in clients:
        ensure_java_jar(a.rebuild_java)
    proxy_port = a.proxy_port or run_kafka.free_port()
    kafka_port = a.kafka_port or run_kafka.free_port()
    version = a.kafka_version or run_kafka.DEFAULT_VERSION
    log(f"starting Apache Kafka {version} on {kafka_port}, advertised via proxy {proxy_port}")
    kafka = run_kafka.start_kafka(port=kafka_port, version=version, advertised=f"127.0.0.1:{proxy_port}",
                                  temp=True, heap="512M")
    cap = Capture()
    proxy = Proxy(cap, proxy_port, kafka_port)
    proxy.start()
    versions = {}
    results = {}
    try:
        for client in clients:
            cap.label = client
            bootstrap = f"127.0.0.1:{proxy_port}"
            log(f"running {client}")
            res = subprocess.run([sys.executable, __file__, "--run-client", client, "--bootstrap", bootstrap,
                                  "--topic", f"golden-{client}"], capture_output=True, text=True, timeout=600)
            if res.returncode != 0:
                raise SystemExit(f"{client} failed:\n{res.stdout}\n{res.stderr[-4000:]}")
            results[client] = json.loads(res.stdout.strip().splitlines()[-1])
            versions[client] = results[client]["client_version"]
            time.sleep(0.5)  # let closing connections drain
            cap.label = "after-" + client
    finally:
        proxy.stop()
        kafka.stop()

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    manifest = write_outputs(cap, out, {c: versions[c] for c in clients})
    doc = {
        "generated_by": "python tools/capture_goldens.py --out tests/golden",
        "kafka_version": version,
        "clients": {c: versions[c] for c in clients},
        "api_versions_used": summarize(cap),
        "files": manifest,
    }
    (out / "manifest.json").write_text(json.dumps(doc, indent=2) + "\n")
    total = sum(m["size"] for m in manifest)
    log(f"wrote {len(manifest)} files ({total} bytes) under {out}")
    print(json.dumps(doc["api_versions_used"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
