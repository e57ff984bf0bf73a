"""The load under faults: Apache Kafka's own VerifiableProducer / VerifiableConsumer (Kafka 4.x
tools jar of tools/kafka_ref) and an idempotent confluent-kafka producer, each recording what the
cluster acknowledged or delivered, for the checker.

VerifiableProducer prints one JSON line per send result (``producer_send_success`` with the
partition and offset the broker acknowledged); VerifiableConsumer with ``--verbose`` prints each
record it consumed (``record_data``) and each commit (``offsets_committed``).
"""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from kbroker.cluster.processes import stop_process

REPO = Path(__file__).resolve().parents[2]


def kafka_tools_classpath() -> str:
    sys.path.insert(0, str(REPO / "tools" / "kafka_ref"))
    import run_kafka
    return str(run_kafka.fetch()) + "/*"


@dataclass
class Acked:
    value: str
    partition: int
    offset: int


@dataclass
class ProducerResult:
    name: str
    acked: list[Acked] = field(default_factory=list)
    errors: int = 0
    sent: int = 0


class _JavaTool:
    """A Kafka tool subprocess whose stdout JSON lines are handed to ``on_event`` by a thread."""

    def __init__(self, main: str, args: list[str], log_path: Path):
        command = ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                   "-cp", kafka_tools_classpath(), main] + args
        self._stderr = open(log_path, "ab")
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=self._stderr,
                                        stdin=subprocess.DEVNULL, start_new_session=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            self.on_event(event)

    def on_event(self, event: dict) -> None:
        raise NotImplementedError

    def stop(self, timeout: float = 60) -> None:
        """SIGTERM: both tools flush/close cleanly and print their last events."""
        stop_process(self.process, timeout)
        self._reader.join(10)
        self._stderr.close()


def _props(path: Path, props: dict) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


class VerifiableProducer(_JavaTool):
    """Kafka's VerifiableProducer: acks=all, idempotence on, values ``<prefix>.<n>`` (its
    prefix must be an integer)."""

    def __init__(self, bootstrap: str, topic: str, workdir: Path, prefix: int = 1,
                 throughput: int = 500):
        self.result = ProducerResult("VerifiableProducer")
        config = _props(workdir / f"{prefix}-producer.properties",
                        {"enable.idempotence": "true", "acks": "all", "retries": 2147483647,
                         "max.in.flight.requests.per.connection": 5,
                         "delivery.timeout.ms": 300000, "linger.ms": 5})
        super().__init__("org.apache.kafka.tools.VerifiableProducer",
                         ["--bootstrap-server", bootstrap, "--topic", topic, "--acks", "-1",
                          "--throughput", str(throughput), "--max-messages", "-1",
                          "--value-prefix", str(prefix), "--command-config", str(config)],
                         workdir / f"{prefix}-producer.log")

    def on_event(self, event: dict) -> None:
        name = event.get("name")
        if name == "producer_send_success":
            self.result.acked.append(Acked(event["value"], event["partition"], event["offset"]))
        elif name == "producer_send_error":
            self.result.errors += 1


@dataclass
class ConsumerResult:
    consumed: list[tuple[int, int, str]] = field(default_factory=list)  # partition, offset, value
    commits: list[tuple[int, int]] = field(default_factory=list)  # partition, offset (successful)
    failed_commits: int = 0


class VerifiableConsumer(_JavaTool):
    """Kafka's VerifiableConsumer in a group, committing after each poll (autocommit off)."""

    def __init__(self, bootstrap: str, topic: str, group: str, workdir: Path,
                 group_protocol: str = "classic"):
        self.result = ConsumerResult()
        self._lock = threading.Lock()
        args = ["--bootstrap-server", bootstrap, "--topic", topic, "--group-id", group,
                "--verbose", "--reset-policy", "earliest"]
        if group_protocol == "consumer":
            # KIP-848: the broker sets the session timeout (group.consumer.session.timeout.ms);
            # the client may not.
            args += ["--group-protocol", "consumer"]
        else:
            args += ["--session-timeout", "10000"]
        super().__init__("org.apache.kafka.tools.VerifiableConsumer", args,
                         workdir / f"{group}-consumer.log")

    def on_event(self, event: dict) -> None:
        name = event.get("name")
        with self._lock:
            if name == "record_data":
                self.result.consumed.append((event["partition"], event["offset"], event["value"]))
            elif name == "offsets_committed":
                if event.get("success"):
                    for o in event.get("offsets") or []:
                        self.result.commits.append((o["partition"], o["offset"]))
                else:
                    self.result.failed_commits += 1

    def values(self) -> set[str]:
        with self._lock:
            return {v for _, _, v in self.result.consumed}


class PythonProducer:
    """confluent-kafka (librdkafka), idempotent, acks=all, values ``<prefix>.<n>``."""

    def __init__(self, bootstrap: str, topic: str, prefix: str = "py", rate: int = 300):
        from confluent_kafka import Producer
        self.result = ProducerResult("confluent-kafka")
        self._producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                   "acks": "all", "linger.ms": 5,
                                   "message.timeout.ms": 300000, "log_level": 0})
        self._topic, self._prefix, self._rate = topic, prefix, rate
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.result.acked.append(Acked(msg.value().decode(), msg.partition(), msg.offset()))
        else:
            self.result.errors += 1

    def _run(self) -> None:
        n = 0
        start = time.monotonic()
        while not self._stopping.is_set():
            due = int((time.monotonic() - start) * self._rate)
            while n < due:
                try:
                    self._producer.produce(self._topic, f"{self._prefix}.{n}".encode(),
                                           on_delivery=self._delivered)
                except BufferError:
                    break
                n += 1
            self.result.sent = n
            self._producer.poll(0.02)

    def stop(self, timeout: float = 120) -> None:
        self._stopping.set()
        self._thread.join(10)
        self._producer.flush(timeout)
