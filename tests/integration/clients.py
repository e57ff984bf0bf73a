"""Shared helpers for the integration tests: drive real clients and raw frames against a broker.

Three parts:

- **Raw wire**: :class:`Wire` sends requests built with the generated codecs
  (``kbroker.protocol.messages``) over a plain socket and decodes the answers with them, or sends
  arbitrary bytes and reports whether the broker closed the connection.
- **Record batches**: the test-side RecordBatch v2 codec of ``tests/recordbatch.py``
  (:func:`build_batch`, :func:`parse_batches`, :func:`segment_batches`), written independently
  of the broker so tests can build broken batches and read the broker's with a second reading.
- **Client adapters**: ``PRODUCERS[name](bootstrap, topic, records, ...)`` and
  ``CONSUMERS[name](bootstrap, topic, count, ...)`` for confluent-kafka, kafka-python, aiokafka and
  kcat: the shared adapters of ``compat_tests/clients`` (the compatibility drivers use them too)
  with the tests' settings, all speaking :class:`Rec` (what to produce), :class:`Ack` (a delivery
  acknowledgement) and :class:`Got` (a consumed record), so one test body covers every client.

Consumers never join a group (groups are not part of these tests): they assign partitions and
start from the beginning, and commit nothing.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import struct
from pathlib import Path

from compat_tests.clients import adapter, confluent
from compat_tests.clients.records import Ack, Failed, Got, Rec  # noqa: F401 - for the tests
from kbroker.protocol import messages
from kbroker.protocol.messages.headers import RequestHeader, ResponseHeader
from kbroker.testing.waiting import wait_for
from tests.broker_process import BrokerProcess
from tests.recordbatch import (  # noqa: F401 - the tests' record batch codec, re-exported
    BATCH_OVERHEAD, CODEC_IDS, Batch, build_batch, encode_record, now_ms, parse_batches,
    segment_batches)

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CLIENTS = ("confluent", "kafka-python", "aiokafka", "kcat")

# Api keys used by the tests.
PRODUCE, FETCH, LIST_OFFSETS, METADATA, FIND_COORDINATOR, API_VERSIONS, CREATE_TOPICS = (
    0, 1, 2, 3, 10, 18, 19)
INIT_PRODUCER_ID = 22

# ListOffsets special timestamps.
LATEST, EARLIEST = -1, -2


def wait_until(predicate, timeout: float = 10.0, interval: float = 0.05, message: str = ""):
    """Poll ``predicate`` until it returns something truthy; fail with ``message`` on timeout."""
    return wait_for(predicate, message or predicate, timeout, interval)


# --- brokers ------------------------------------------------------------------------------------

@contextlib.contextmanager
def running_broker(data_dir: Path, overrides: dict | None = None, stop_timeout: float = 10):
    """A broker for a whole module (the conftest fixtures are per test). On the way out it must
    stop cleanly (within ``stop_timeout`` seconds) and its log must hold no traceback or ERROR
    line."""
    process = BrokerProcess(Path(data_dir), overrides).start()
    try:
        yield process
    finally:
        code = process.stop(timeout=stop_timeout) if process.alive() else process.proc.returncode
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
    """The partition's dir in whichever of the broker's log dirs holds it."""
    log_dirs = broker.overrides.get("log.dirs")
    for log_dir in str(log_dirs).split(",") if log_dirs else ():
        candidate = Path(log_dir) / f"{topic}-{partition}"
        if candidate.is_dir():
            return candidate
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


def wait_for_leaders(bootstrap: str, topic: str, partitions: int, timeout: float = 10):
    """Until the single broker at ``bootstrap`` leads every partition of ``topic``: Metadata names
    a leader, and ListOffsets, which only a partition's leader answers, answers without error.
    Metadata alone is not enough after a restart: Kafka publishes the leader to its metadata
    cache before its replica manager has made the partition leader, and answers
    NOT_LEADER_OR_FOLLOWER in between."""
    with Wire(bootstrap) as wire:
        def ready():
            meta = wire.metadata([topic])
            t = meta.topics[0]
            return t.error_code == 0 and len(t.partitions) == partitions and all(
                p.error_code == 0 and p.leader_id >= 0 for p in t.partitions) and all(
                wire.list_offset(topic, p.partition_index, LATEST).error_code == 0
                for p in t.partitions)
        wait_until(ready, timeout, 0.1, f"leaders of {topic} on {bootstrap}")


# Describe APIs per group type: (api key, the field naming the group ids).
_DESCRIBE = {"classic": (15, "groups"), "consumer": (69, "group_ids"), "share": (77, "group_ids")}


def group_members(bootstrap: str, group: str, group_type: str = "share") -> list:
    """The members of ``group`` as its coordinator describes them (DescribeGroups,
    ConsumerGroupDescribe or ShareGroupDescribe; a single broker is its own coordinator)."""
    api_key, field = _DESCRIBE[group_type]
    with Wire(bootstrap) as wire:
        wire.api_versions()
        cls = messages.request_class(api_key)
        response = wire.call(api_key, None, cls(**{field: [group]}))
    described = response.groups[0]
    return list(described.members) if described.error_code == 0 else []


def wait_for_members(bootstrap: str, group: str, count: int, group_type: str = "share",
                     timeout: float = 30):
    """Until ``group`` has at least ``count`` members: a join waited for as a condition, not as
    a guess at how long clients (a JVM's start, say) take on a busy machine."""
    return wait_until(lambda: len(group_members(bootstrap, group, group_type)) >= count, timeout,
                      0.2, f"{count} members in {group_type} group {group}")


# --- client adapters (compat_tests/clients, shared with the compatibility drivers) ----------------
#
# The wrappers below fix what the integration tests want from every client: short timeouts, no
# group (assign and start at the beginning or at ``start_offset``), partitions looked up on the
# raw wire, and a ProduceFailed listing what the client said for each failed record.

class ProduceFailed(Exception):
    """A client reported a failed delivery; ``errors`` holds (index, what the client said)."""

    def __init__(self, errors: list):
        super().__init__(f"{len(errors)} record(s) failed: {errors[:3]}")
        self.errors = errors


def _acks(results: list) -> list[Ack]:
    errors = [(i, r.error) for i, r in enumerate(results) if isinstance(r, Failed)]
    if errors:
        raise ProduceFailed(errors)
    return results


def _partitions_of(bootstrap: str, topic: str) -> list[int]:
    with Wire(bootstrap) as wire:
        meta = wire.metadata([topic])
        return sorted(p.partition_index for p in meta.topics[0].partitions)


def _consumer(name: str, config: dict):
    def consume(bootstrap: str, topic: str, count: int, partitions=None,
                start_offset: int | None = None, timeout: float = 20.0) -> list[Got]:
        return adapter(name).consume(
            bootstrap, topic, count, timeout=timeout, config=config,
            partitions=partitions if partitions is not None else _partitions_of(bootstrap, topic),
            start="beginning" if start_offset is None else start_offset)
    return consume


def confluent_producer(bootstrap: str, codec: str = "none", acks="all", **extra):
    return confluent.producer(bootstrap, codec, acks, {
        "message.timeout.ms": 20000, "socket.timeout.ms": 10000,
        **{k.replace("_", "."): v for k, v in extra.items()}})


def produce_confluent(bootstrap: str, topic: str, records, codec: str = "none", acks="all",
                      **extra) -> list[Ack]:
    """``extra``: librdkafka properties with ``_`` for ``.`` (batch_size=800)."""
    return _acks(confluent.produce(bootstrap, topic, records, codec=codec, acks=acks, config={
        "message.timeout.ms": 20000, "socket.timeout.ms": 10000,
        **{k.replace("_", "."): v for k, v in extra.items()}}))


def confluent_consumer(bootstrap: str, **extra):
    return confluent.consumer(bootstrap, {"fetch.wait.max.ms": 100, "socket.timeout.ms": 10000,
                                          **extra})


consume_confluent = _consumer("confluent", {"fetch.wait.max.ms": 100,
                                            "socket.timeout.ms": 10000})


def produce_kafka_python(bootstrap: str, topic: str, records, codec: str = "none", acks="all",
                         **extra) -> list[Ack]:
    return _acks(adapter("kafka-python").produce(
        bootstrap, topic, records, codec=codec, acks=acks,
        config={"request_timeout_ms": 15000, **extra}))


consume_kafka_python = _consumer("kafka-python", {"fetch_max_wait_ms": 100,
                                                  "request_timeout_ms": 15000})


def produce_aiokafka(bootstrap: str, topic: str, records, codec: str = "none", acks="all",
                     **extra) -> list[Ack]:
    return _acks(adapter("aiokafka").produce(
        bootstrap, topic, records, codec=codec, acks=acks, timeout=60,
        config={"request_timeout_ms": 15000, **extra}))


consume_aiokafka = _consumer("aiokafka", {"fetch_max_wait_ms": 100, "request_timeout_ms": 15000})


def produce_kcat(bootstrap: str, topic: str, records, codec: str = "none", acks="all",
                 **extra) -> list[Ack]:
    """kcat cannot set timestamps; its acks carry no timestamp."""
    return _acks(adapter("kcat").produce(bootstrap, topic, records, codec=codec, acks=acks,
                                         config={k.replace("_", "."): v
                                                 for k, v in extra.items()}))


consume_kcat = _consumer("kcat", {"fetch.wait.max.ms": 100})

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
    if client == "kafka-python" and not adapter("kafka-python").has_codec(codec):
        return (f"kafka-python has no {codec} codec installed (needs the python-snappy / lz4 / "
                f"zstandard packages: kafka-python[snappy,lz4,zstd])")
    if client == "kcat" and shutil.which("kcat") is None:
        return "kcat is not installed"
    return None
