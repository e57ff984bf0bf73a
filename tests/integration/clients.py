"""Shared helpers for the integration tests: drive real clients and raw frames against a broker.

Three parts:

- **Raw wire**: :class:`Wire` sends requests built with the generated codecs
  (``kbroker.protocol.messages``) over a plain socket and decodes the answers with them, or sends
  arbitrary bytes and reports whether the broker closed the connection.
- **Record batches**: :func:`build_batch` is a RecordBatch v2 encoder written independently of
  the broker (so tests can build a batch with a wrong CRC, a lying record count, magic 1, ...), and
  :func:`parse_batches` decodes batches from a fetch response or a segment file.
- **Client adapters**: ``PRODUCERS[name](bootstrap, topic, records, ...)`` and
  ``CONSUMERS[name](bootstrap, topic, count, ...)`` for confluent-kafka, kafka-python, aiokafka and
  kcat, all speaking :class:`Rec` (what to produce), :class:`Ack` (a delivery acknowledgement) and
  :class:`Got` (a consumed record), so one test body covers every client.

Consumers never join a group (groups are not part of these tests): they assign partitions and
start from the beginning, and commit nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import shutil
import socket
import struct
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import crc32c

from kbroker.protocol import messages
from kbroker.protocol.messages.headers import RequestHeader, ResponseHeader
from tests.broker_process import BrokerProcess

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
CLIENTS = ("confluent", "kafka-python", "aiokafka", "kcat")

# Api keys used by the tests.
PRODUCE, FETCH, LIST_OFFSETS, METADATA, FIND_COORDINATOR, API_VERSIONS, CREATE_TOPICS = (
    0, 1, 2, 3, 10, 18, 19)
INIT_PRODUCER_ID = 22

# ListOffsets special timestamps.
LATEST, EARLIEST = -1, -2


def now_ms() -> int:
    return int(time.time() * 1000)


def wait_until(predicate, timeout: float = 10.0, interval: float = 0.05, message: str = ""):
    """Poll ``predicate`` until it returns something truthy; fail with ``message`` on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {message or predicate}")
        time.sleep(interval)


# --- brokers ------------------------------------------------------------------------------------

@contextlib.contextmanager
def running_broker(data_dir: Path, overrides: dict | None = None):
    """A broker for a whole module (the conftest fixtures are per test). On the way out it must
    stop cleanly and its log must hold no traceback or ERROR line."""
    process = BrokerProcess(Path(data_dir), overrides).start()
    try:
        yield process
    finally:
        code = process.stop(timeout=10) if process.alive() else process.proc.returncode
    problems = broker_tracebacks(process)
    assert not problems, f"broker log {process.log_path} has errors:\n" + "\n".join(problems[:5])
    assert code == 0, f"broker exited with {code} on SIGTERM"


def broker_tracebacks(broker: BrokerProcess) -> list[str]:
    """Tracebacks and ERROR lines in the broker's log (with the next lines for context): a bad
    request must get a Kafka error or a closed connection, never an exception."""
    lines = broker.log().splitlines()
    return ["\n".join(lines[i:i + 12]) for i, line in enumerate(lines)
            if " ERROR " in line or (line.startswith("Traceback") and
                                     (i == 0 or " ERROR " not in lines[i - 1]))]


def partition_dir(broker: BrokerProcess, topic: str, partition: int) -> Path:
    return broker.data_dir / f"{topic}-{partition}"


def segment_files(broker: BrokerProcess, topic: str, partition: int) -> list[Path]:
    return sorted(partition_dir(broker, topic, partition).glob("*.log"))


# --- raw wire -----------------------------------------------------------------------------------

class Wire:
    """One raw connection. ``call`` sends a generated request and decodes the matching response."""

    def __init__(self, bootstrap: str, timeout: float = 10.0, client_id: str = "kbroker-tests"):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_id = client_id
        self.correlation_id = 0
        self.versions: dict[int, tuple[int, int]] | None = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        with contextlib.suppress(OSError):
            self.sock.close()

    # framing

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def _read_exact(self, n: int) -> bytes | None:
        chunks, have = [], 0
        while have < n:
            try:
                chunk = self.sock.recv(n - have)
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            chunks.append(chunk)
            have += len(chunk)
        return b"".join(chunks)

    def recv_frame(self) -> bytes | None:
        """The next response frame (without its size), or None if the broker closed the socket."""
        head = self._read_exact(4)
        if head is None:
            return None
        (size,) = struct.unpack(">i", head)
        assert 0 <= size < 512 * 1024 * 1024, f"absurd response size {size}"
        body = self._read_exact(size)
        assert body is not None, "connection closed in the middle of a response"
        return body

    def closed_by_broker(self, timeout: float = 5.0) -> bool:
        """True if the broker closes the connection (EOF or reset) within ``timeout`` without
        sending anything; raises if it sends a response instead."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False
        if data:
            raise AssertionError(f"expected the connection to be closed, got {len(data)} bytes: "
                                 f"{data[:64]!r}")
        return True

    # requests

    def encode_request(self, api_key: int, version: int, request, correlation_id: int | None = None,
                       header_version: int | None = None) -> bytes:
        if correlation_id is None:
            self.correlation_id += 1
            correlation_id = self.correlation_id
        if header_version is None:
            header_version = messages.request_header_version(api_key, version)
        header = RequestHeader(request_api_key=api_key, request_api_version=version,
                               correlation_id=correlation_id, client_id=self.client_id)
        body = b"".join(bytes(part) for part in request.encode(version)) if request is not None \
            else b""
        return header.to_bytes(header_version) + body

    def send(self, api_key: int, version: int, request) -> int:
        payload = self.encode_request(api_key, version, request)
        self.send_frame(payload)
        return self.correlation_id

    def receive(self, api_key: int, version: int, frame: bytes | None = None):
        """Decode one response; returns (correlation id, response)."""
        if frame is None:
            frame = self.recv_frame()
        assert frame is not None, f"broker closed the connection instead of answering api " \
                                  f"{api_key} v{version}"
        header, pos = ResponseHeader.read(frame, 0, messages.response_header_version(api_key,
                                                                                      version))
        response, _ = messages.response_class(api_key).read(frame, pos, version)
        return header.correlation_id, response

    def call(self, api_key: int, version: int | None, request):
        if version is None:
            version = self.version(api_key)
        correlation_id = self.send(api_key, version, request)
        got, response = self.receive(api_key, version)
        assert got == correlation_id, f"correlation id {got}, expected {correlation_id}"
        return response

    # conveniences

    def api_versions(self, version: int = 3):
        cls = messages.request_class(API_VERSIONS)
        request = cls(client_software_name="kbroker-tests", client_software_version="1.0")
        response = self.call(API_VERSIONS, version, request)
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        return response

    def version(self, api_key: int, highest: int | None = None) -> int:
        """The highest version both we (the generated codecs) and the broker know."""
        if self.versions is None:
            self.api_versions()
        assert api_key in self.versions, f"broker does not advertise api key {api_key}"
        lo, hi = self.versions[api_key]
        valid_lo, valid_hi = messages.API_BY_KEY[api_key].valid_versions
        version = min(hi, valid_hi, highest if highest is not None else valid_hi)
        assert version >= max(lo, valid_lo), f"no common version for api key {api_key}"
        return version

    def metadata(self, topics: list[str] | None, auto_create: bool = False, version=None):
        cls = messages.request_class(METADATA)
        request = cls(topics=None if topics is None else
                      [cls.MetadataRequestTopic(name=t) for t in topics],
                      allow_auto_topic_creation=auto_create)
        return self.call(METADATA, self.version(METADATA, version), request)

    def produce(self, topic: str, partition: int, records, acks: int = -1,
                version: int | None = None, timeout_ms: int = 10000,
                transactional_id: str | None = None):
        """Produce raw ``records`` bytes; returns the one partition response (None for acks=0)."""
        cls = messages.request_class(PRODUCE)
        version = self.version(PRODUCE, version if version is not None else 12)
        request = cls(transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms,
                      topic_data=[cls.TopicProduceData(name=topic, partition_data=[
                          cls.PartitionProduceData(index=partition, records=records)])])
        if acks == 0:
            self.send(PRODUCE, version, request)
            return None
        response = self.call(PRODUCE, version, request)
        return response.responses[0].partition_responses[0]

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int = 1 << 20,
              max_wait_ms: int = 0, version: int | None = None):
        """Returns (partition data, list of Batch)."""
        cls = messages.request_class(FETCH)
        version = self.version(FETCH, version if version is not None else 12)
        request = cls(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes,
                      isolation_level=0, session_id=0, session_epoch=-1,
                      topics=[cls.FetchTopic(topic=topic, partitions=[cls.FetchPartition(
                          partition=partition, fetch_offset=offset, log_start_offset=-1,
                          partition_max_bytes=max_bytes, current_leader_epoch=-1)])])
        response = self.call(FETCH, version, request)
        data = response.responses[0].partitions[0]
        records = bytes(data.records) if data.records is not None else b""
        return data, parse_batches(records)

    def list_offset(self, topic: str, partition: int, timestamp: int, version: int | None = None):
        """ListOffsets for one partition: returns the partition response (offset, timestamp)."""
        cls = messages.request_class(LIST_OFFSETS)
        version = self.version(LIST_OFFSETS, version)
        request = cls(replica_id=-1, isolation_level=0, topics=[cls.ListOffsetsTopic(
            name=topic, partitions=[cls.ListOffsetsPartition(
                partition_index=partition, timestamp=timestamp, current_leader_epoch=-1)])],
            timeout_ms=10000)
        response = self.call(LIST_OFFSETS, version, request)
        return response.topics[0].partitions[0]

    def init_producer_id(self, version: int | None = None):
        cls = messages.request_class(INIT_PRODUCER_ID)
        response = self.call(INIT_PRODUCER_ID, self.version(INIT_PRODUCER_ID, version),
                             cls(transactional_id=None, transaction_timeout_ms=60000))
        return response


def api_versions_ok(bootstrap: str) -> bool:
    """A raw ApiVersions round trip on a fresh connection."""
    with Wire(bootstrap, timeout=5) as wire:
        response = wire.api_versions()
        return response.error_code == 0 and any(k.api_key == PRODUCE for k in response.api_keys)


def ensure_topic(bootstrap: str, topic: str, partitions: int = 1, config: dict | None = None):
    """Create ``topic`` through confluent's AdminClient when the broker serves CreateTopics;
    otherwise auto-create it through Metadata (the broker's num.partitions must then match)."""
    with Wire(bootstrap) as wire:
        wire.api_versions()
        has_create = CREATE_TOPICS in wire.versions
    if has_create:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": bootstrap})
        futures = admin.create_topics([NewTopic(topic, num_partitions=partitions,
                                                replication_factor=1, config=config or {})],
                                      operation_timeout=10, request_timeout=15)
        futures[topic].result(timeout=20)
    else:
        assert not config, "CreateTopics is not served: cannot create a topic with configs"
        with Wire(bootstrap) as wire:
            def created():
                meta = wire.metadata([topic], auto_create=True)
                return meta.topics[0].error_code == 0 and meta.topics[0].partitions
            got = wait_until(created, 10, 0.1, f"auto-creation of {topic}")
            assert len(got) == partitions, f"auto-created {topic} with {len(got)} partitions " \
                                           f"(num.partitions), wanted {partitions}"
    wait_for_leaders(bootstrap, topic, partitions)


def wait_for_leaders(bootstrap: str, topic: str, partitions: int):
    with Wire(bootstrap) as wire:
        def ready():
            meta = wire.metadata([topic])
            t = meta.topics[0]
            return t.error_code == 0 and len(t.partitions) == partitions and all(
                p.error_code == 0 and p.leader_id >= 0 for p in t.partitions)
        wait_until(ready, 10, 0.1, f"leaders of {topic}")


# --- record batches (independent RecordBatch v2 codec) ------------------------------------------

def _zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def _varint(n: int) -> bytes:
    z = _zigzag(n) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
    return (result >> 1) ^ -(result & 1), pos


def _bytes_field(value: bytes | None) -> bytes:
    if value is None:
        return _varint(-1)
    return _varint(len(value)) + value


def encode_record(offset_delta: int, timestamp_delta: int, key, value, headers=()) -> bytes:
    body = bytearray(b"\x00")  # record attributes (unused)
    body += _varint(timestamp_delta)
    body += _varint(offset_delta)
    body += _bytes_field(key)
    body += _bytes_field(value)
    body += _varint(len(headers))
    for name, header_value in headers:
        body += _bytes_field(name.encode())
        body += _bytes_field(header_value)
    return _varint(len(body)) + bytes(body)


_BATCH_HEAD = struct.Struct(">qiib")  # base offset, batch length, partition leader epoch, magic
_BATCH_BODY = struct.Struct(">hiqqqhii")  # attributes .. record count (after the CRC)
BATCH_OVERHEAD = 61  # bytes of a RecordBatch v2 header


def build_batch(records, *, base_timestamp: int | None = None, codec: str = "none",
                producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                transactional: bool = False, log_append_time: bool = False,
                base_offset: int = 0, partition_leader_epoch: int = -1, magic: int = 2,
                record_count: int | None = None, last_offset_delta: int | None = None,
                max_timestamp: int | None = None, attributes: int | None = None,
                payload: bytes | None = None, crc: int | None = None,
                length_delta: int = 0) -> bytes:
    """Encode a RecordBatch v2. ``records`` holds :class:`Rec` or (key, value) pairs or values.
    Every header field can be forced to a wrong value; ``payload`` replaces the (possibly
    compressed) records section; ``crc`` replaces the computed CRC; ``length_delta`` is added to
    the batchLength field."""
    recs = [_as_rec(r) for r in records]
    if base_timestamp is None:
        base_timestamp = next((r.timestamp for r in recs if r.timestamp is not None), now_ms())
    encoded = b"".join(
        encode_record(i, (r.timestamp if r.timestamp is not None else base_timestamp)
                      - base_timestamp, r.key, r.value, r.headers)
        for i, r in enumerate(recs))
    if payload is None:
        payload = _compress(codec, encoded)
    timestamps = [r.timestamp if r.timestamp is not None else base_timestamp for r in recs]
    if attributes is None:
        attributes = CODEC_IDS[codec] | (0x08 if log_append_time else 0) | \
            (0x10 if transactional else 0)
    body = _BATCH_BODY.pack(
        attributes,
        len(recs) - 1 if last_offset_delta is None else last_offset_delta,
        base_timestamp,
        max(timestamps, default=base_timestamp) if max_timestamp is None else max_timestamp,
        producer_id, producer_epoch, base_sequence,
        len(recs) if record_count is None else record_count,
    ) + payload
    checksum = crc32c.crc32c(body) if crc is None else crc
    after_length = struct.pack(">ibI", partition_leader_epoch, magic, checksum) + body
    return struct.pack(">qi", base_offset, len(after_length) + length_delta) + after_length


def _compress(codec: str, data: bytes) -> bytes:
    if codec == "none":
        return data
    if codec == "gzip":
        return gzip.compress(data)
    import cramjam

    if codec == "zstd":
        return bytes(cramjam.zstd.compress(data))
    if codec == "lz4":
        return bytes(cramjam.lz4.compress(data))
    if codec == "snappy":
        return bytes(cramjam.snappy.compress_raw(data))
    raise ValueError(codec)


@dataclass
class Batch:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    payload: bytes
    crc_ok: bool

    @property
    def codec(self) -> int:
        return self.attributes & 0x07

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & 0x08)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    def records(self) -> list["Got"]:
        data = self.payload
        if self.codec:
            from kbroker.protocol.compression import decompress

            data = bytes(decompress(self.codec, data, 64 << 20))
        out, pos = [], 0
        for _ in range(self.record_count):
            length, pos = _read_varint(data, pos)
            end = pos + length
            pos += 1  # attributes
            ts_delta, pos = _read_varint(data, pos)
            offset_delta, pos = _read_varint(data, pos)
            key, pos = _read_bytes(data, pos)
            value, pos = _read_bytes(data, pos)
            n_headers, pos = _read_varint(data, pos)
            headers = []
            for _ in range(n_headers):
                name, pos = _read_bytes(data, pos)
                header_value, pos = _read_bytes(data, pos)
                headers.append((name.decode(), header_value))
            assert pos == end, "record length does not match its fields"
            timestamp = self.max_timestamp if self.log_append_time else \
                self.base_timestamp + ts_delta
            out.append(Got(-1, self.base_offset + offset_delta, key, value, tuple(headers),
                           timestamp, "append" if self.log_append_time else "create"))
        return out


def _read_bytes(buf: bytes, pos: int):
    n, pos = _read_varint(buf, pos)
    if n < 0:
        return None, pos
    return bytes(buf[pos:pos + n]), pos + n


def parse_batches(data: bytes) -> list[Batch]:
    """The complete v2 batches in ``data`` (a trailing partial batch is ignored, as clients do)."""
    batches, pos = [], 0
    while pos + 17 <= len(data):
        base_offset, length, epoch, magic = _BATCH_HEAD.unpack_from(data, pos)
        end = pos + 12 + length
        if end > len(data):
            break
        (crc,) = struct.unpack_from(">I", data, pos + 17)
        fields = _BATCH_BODY.unpack_from(data, pos + 21)
        body_start = pos + 21
        payload = bytes(data[body_start + _BATCH_BODY.size:end])
        batches.append(Batch(base_offset, length, epoch, magic, crc, *fields, payload,
                             crc32c.crc32c(bytes(data[body_start:end])) == crc))
        pos = end
    return batches


def segment_batches(path: Path) -> list[Batch]:
    return parse_batches(path.read_bytes())


# --- the common record shapes ---------------------------------------------------------------------

@dataclass(frozen=True)
class Rec:
    """A record to produce. ``timestamp`` None lets the client pick (CreateTime = now)."""

    value: bytes | None
    key: bytes | None = None
    headers: tuple = ()
    partition: int | None = None
    timestamp: int | None = None


@dataclass(frozen=True)
class Ack:
    """A delivery acknowledgement the client received."""

    partition: int
    offset: int
    timestamp: int | None = None
    value: bytes | None = None


@dataclass(frozen=True)
class Got:
    """A consumed record; ``timestamp_type`` is "create" or "append"."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple
    timestamp: int
    timestamp_type: str


def _as_rec(item) -> Rec:
    if isinstance(item, Rec):
        return item
    if isinstance(item, tuple):
        return Rec(key=item[0], value=item[1])
    return Rec(value=item)


class ProduceFailed(Exception):
    """A client reported a failed delivery; ``errors`` holds what each client said."""

    def __init__(self, errors: list):
        super().__init__(f"{len(errors)} record(s) failed: {errors[:3]}")
        self.errors = errors


# --- confluent-kafka ------------------------------------------------------------------------------

def confluent_producer(bootstrap: str, codec: str = "none", acks="all", **extra):
    from confluent_kafka import Producer

    config = {"bootstrap.servers": bootstrap, "compression.type": codec, "acks": acks,
              "linger.ms": 5, "message.timeout.ms": 20000, "socket.timeout.ms": 10000}
    config.update({k.replace("_", "."): v for k, v in extra.items()})
    return Producer(config)


def produce_confluent(bootstrap: str, topic: str, records, codec: str = "none", acks="all",
                      **extra) -> list[Ack]:
    producer = confluent_producer(bootstrap, codec, acks, **extra)
    acks_out: list = [None] * len(records)
    errors = []

    def report(index):
        def on_delivery(err, msg):
            if err is not None:
                errors.append((index, err))
            else:
                ts_type, ts = msg.timestamp()
                acks_out[index] = Ack(msg.partition(), msg.offset(), ts, msg.value())
        return on_delivery

    for i, rec in enumerate(map(_as_rec, records)):
        kwargs = {"value": rec.value, "key": rec.key, "on_delivery": report(i)}
        if rec.partition is not None:
            kwargs["partition"] = rec.partition
        if rec.timestamp is not None:
            kwargs["timestamp"] = rec.timestamp
        if rec.headers:
            kwargs["headers"] = list(rec.headers)
        producer.produce(topic, **kwargs)
        producer.poll(0)
    remaining = producer.flush(30)
    assert remaining == 0, f"{remaining} records still queued after 30 s"
    if errors:
        raise ProduceFailed(errors)
    return acks_out


def confluent_consumer(bootstrap: str, **extra):
    from confluent_kafka import Consumer

    # group.id is mandatory for the client, but nothing here uses the group: we assign(), and
    # never commit.
    config = {"bootstrap.servers": bootstrap, "group.id": "kbroker-tests-unused",
              "enable.auto.commit": False, "enable.auto.offset.store": False,
              "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100,
              "enable.partition.eof": False, "socket.timeout.ms": 10000}
    config.update(extra)
    return Consumer(config)


def _partitions_of(bootstrap: str, topic: str) -> list[int]:
    with Wire(bootstrap) as wire:
        meta = wire.metadata([topic])
        return sorted(p.partition_index for p in meta.topics[0].partitions)


def consume_confluent(bootstrap: str, topic: str, count: int, partitions=None,
                      start_offset: int | None = None, timeout: float = 20.0) -> list[Got]:
    from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_LOG_APPEND_TIME, TopicPartition

    partitions = partitions if partitions is not None else _partitions_of(bootstrap, topic)
    consumer = confluent_consumer(bootstrap)
    got = []
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING if start_offset is None
                                        else start_offset) for p in partitions])
        deadline = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=1000, timeout=0.2):
                if msg.error() is not None:
                    raise AssertionError(f"confluent consumer error: {msg.error()}")
                ts_type, ts = msg.timestamp()
                got.append(Got(msg.partition(), msg.offset(), msg.key(), msg.value(),
                               tuple(msg.headers() or ()), ts,
                               "append" if ts_type == TIMESTAMP_LOG_APPEND_TIME else "create"))
    finally:
        consumer.close()
    return sorted(got, key=lambda g: (g.partition, g.offset))


# --- kafka-python ---------------------------------------------------------------------------------

def kafka_python_has_codec(codec: str) -> bool:
    if codec == "none":
        return True
    import kafka.codec

    return getattr(kafka.codec, f"has_{codec}")()


def produce_kafka_python(bootstrap: str, topic: str, records, codec: str = "none", acks="all",
                         **extra) -> list[Ack]:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=acks,
                             compression_type=None if codec == "none" else codec,
                             linger_ms=5, request_timeout_ms=15000, **extra)
    try:
        futures = []
        for rec in map(_as_rec, records):
            futures.append(producer.send(topic, value=rec.value, key=rec.key,
                                         partition=rec.partition, timestamp_ms=rec.timestamp,
                                         headers=list(rec.headers) or None))
        producer.flush(30)
        out, errors = [], []
        for i, future in enumerate(futures):
            try:
                meta = future.get(timeout=30)
            except Exception as exc:  # noqa: BLE001 - reported to the test
                errors.append((i, exc))
                continue
            out.append(Ack(meta.partition, meta.offset, meta.timestamp))
        if errors:
            raise ProduceFailed(errors)
        return out
    finally:
        producer.close(timeout=5)


def consume_kafka_python(bootstrap: str, topic: str, count: int, partitions=None,
                         start_offset: int | None = None, timeout: float = 20.0) -> list[Got]:
    from kafka import KafkaConsumer, TopicPartition

    partitions = partitions if partitions is not None else _partitions_of(bootstrap, topic)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             fetch_max_wait_ms=100, request_timeout_ms=15000)
    got = []
    try:
        assigned = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(assigned)
        if start_offset is None:
            consumer.seek_to_beginning(*assigned)
        else:
            for tp in assigned:
                consumer.seek(tp, start_offset)
        deadline = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            for tp, batch in consumer.poll(timeout_ms=200, max_records=1000).items():
                for r in batch:
                    got.append(Got(r.partition, r.offset, r.key, r.value,
                                   tuple((k, v) for k, v in (r.headers or ())), r.timestamp,
                                   "append" if r.timestamp_type == 1 else "create"))
    finally:
        consumer.close()
    return sorted(got, key=lambda g: (g.partition, g.offset))


# --- aiokafka -------------------------------------------------------------------------------------

def produce_aiokafka(bootstrap: str, topic: str, records, codec: str = "none", acks="all",
                     **extra) -> list[Ack]:
    from aiokafka import AIOKafkaProducer

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=acks,
                                    compression_type=None if codec == "none" else codec,
                                    linger_ms=5, request_timeout_ms=15000, **extra)
        await producer.start()
        try:
            futures = []
            for rec in map(_as_rec, records):
                futures.append(await producer.send(
                    topic, value=rec.value, key=rec.key, partition=rec.partition,
                    timestamp_ms=rec.timestamp, headers=list(rec.headers) or None))
            await producer.flush()
            results = await asyncio.gather(*futures, return_exceptions=True)
        finally:
            await producer.stop()
        errors = [(i, r) for i, r in enumerate(results) if isinstance(r, BaseException)]
        if errors:
            raise ProduceFailed(errors)
        return [Ack(r.partition, r.offset, r.timestamp) for r in results]

    return asyncio.run(asyncio.wait_for(run(), 60))


def consume_aiokafka(bootstrap: str, topic: str, count: int, partitions=None,
                     start_offset: int | None = None, timeout: float = 20.0) -> list[Got]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    partitions = partitions if partitions is not None else _partitions_of(bootstrap, topic)

    async def run():
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                    enable_auto_commit=False, auto_offset_reset="earliest",
                                    fetch_max_wait_ms=100, request_timeout_ms=15000)
        await consumer.start()
        got = []
        try:
            assigned = [TopicPartition(topic, p) for p in partitions]
            consumer.assign(assigned)
            if start_offset is None:
                await consumer.seek_to_beginning(*assigned)
            else:
                for tp in assigned:
                    consumer.seek(tp, start_offset)
            deadline = time.monotonic() + timeout
            while len(got) < count and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=200, max_records=1000)
                for tp, batch in batches.items():
                    for r in batch:
                        got.append(Got(r.partition, r.offset, r.key, r.value,
                                       tuple((k, v) for k, v in (r.headers or ())), r.timestamp,
                                       "append" if r.timestamp_type == 1 else "create"))
        finally:
            await consumer.stop()
        return got

    got = asyncio.run(asyncio.wait_for(run(), timeout + 30))
    return sorted(got, key=lambda g: (g.partition, g.offset))


# --- kcat -----------------------------------------------------------------------------------------

def kcat_path() -> str:
    path = shutil.which("kcat")
    assert path, "kcat is not installed (scripts/install-test-deps.sh installs it)"
    return path


def produce_kcat(bootstrap: str, topic: str, records, codec: str = "none", acks="all",
                 **extra) -> list[Ack]:
    """kcat sends one line per record: ``key:value`` (no ``:`` means a null key). It cannot set
    timestamps or per-record headers, so all records must share their headers and partition.
    kcat reports no offsets: the returned acks are empty (verify by consuming)."""
    recs = [_as_rec(r) for r in records]
    assert all(r.timestamp is None for r in recs), "kcat cannot set timestamps"
    assert len({r.headers for r in recs}) <= 1, "kcat sends the same headers with every record"
    assert len({r.partition for r in recs}) <= 1, "kcat sends to one partition (or any)"
    lines = []
    for r in recs:
        value = r.value.decode()
        assert "\n" not in value and r.value is not None
        if r.key is None:
            assert ":" not in value, "a null-key record's value must not contain ':'"
            lines.append(value)
        else:
            key = r.key.decode()
            assert ":" not in key
            lines.append(f"{key}:{value}")
    args = [kcat_path(), "-b", bootstrap, "-P", "-t", topic, "-z", codec, "-K:",
            "-X", f"acks={acks}", "-X", "linger.ms=5"]
    if recs and recs[0].partition is not None:
        args += ["-p", str(recs[0].partition)]
    for name, value in (recs[0].headers if recs else ()):
        args += ["-H", f"{name}={value.decode()}"]
    for key, value in extra.items():
        args += ["-X", f"{key.replace('_', '.')}={value}"]
    proc = subprocess.run(args, input=("\n".join(lines) + "\n").encode(), capture_output=True,
                          timeout=60)
    if proc.returncode != 0 or b"ERROR" in proc.stderr or b"failed" in proc.stderr:
        raise ProduceFailed([proc.stderr.decode(errors="replace")])
    return []


def consume_kcat(bootstrap: str, topic: str, count: int, partitions=None,
                 start_offset: int | None = None, timeout: float = 20.0) -> list[Got]:
    partitions = partitions if partitions is not None else _partitions_of(bootstrap, topic)
    got = []
    for partition in partitions:
        args = [kcat_path(), "-b", bootstrap, "-C", "-t", topic, "-p", str(partition),
                "-o", "beginning" if start_offset is None else str(start_offset), "-e", "-J",
                "-X", "fetch.wait.max.ms=100"]
        proc = subprocess.run(args, capture_output=True, timeout=timeout + 30)
        assert proc.returncode == 0, f"kcat failed: {proc.stderr.decode(errors='replace')}"
        for line in proc.stdout.decode().splitlines():
            if not line.startswith("{"):
                continue
            m = json.loads(line)
            flat = m.get("headers") or []
            headers = tuple((flat[i], None if flat[i + 1] is None else flat[i + 1].encode())
                            for i in range(0, len(flat), 2))
            got.append(Got(m["partition"], m["offset"],
                           None if m["key"] is None else m["key"].encode(),
                           None if m["payload"] is None else m["payload"].encode(),
                           headers, m["ts"], "append" if m["tstype"] == "logappend" else "create"))
    return sorted(got, key=lambda g: (g.partition, g.offset))


PRODUCERS = {
    "confluent": produce_confluent,
    "kafka-python": produce_kafka_python,
    "aiokafka": produce_aiokafka,
    "kcat": produce_kcat,
}

CONSUMERS = {
    "confluent": consume_confluent,
    "kafka-python": consume_kafka_python,
    "aiokafka": consume_aiokafka,
    "kcat": consume_kcat,
}


def skip_reason(client: str, codec: str = "none") -> str | None:
    """Why ``client`` cannot use ``codec`` in this environment (None if it can)."""
    if client == "kafka-python" and not kafka_python_has_codec(codec):
        return (f"kafka-python has no {codec} codec installed (needs the python-snappy / lz4 / "
                f"zstandard packages: kafka-python[snappy,lz4,zstd])")
    if client == "kcat" and shutil.which("kcat") is None:
        return "kcat is not installed"
    return None
