"""Operator-grade start-up: a failure is one line naming the file, key or port and the fix, with a
documented exit code and no traceback; a damaged partition is recovered (and logged) or taken
offline alone while the rest of the broker serves. Real processes, real files, real clients."""

from __future__ import annotations

import socket
import subprocess
import sys

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from kbroker.startup import EXIT_LISTENER, EXIT_LOG_DIR, EXIT_METADATA


def _serve(data_dir, port=0, *extra):
    """Run ``kbroker serve`` expecting it to fail at start-up; returns (exit code, stderr)."""
    args = [sys.executable, "-m", "kbroker.cli.main", "serve",
            "--set", f"listeners=PLAINTEXT://127.0.0.1:{port}", "--set", f"log.dirs={data_dir}",
            *extra]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    return done.returncode, done.stderr


def _last_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    return lines[-1]


def _assert_one_clear_line(code, stderr, expected_code, *words):
    assert code == expected_code, stderr
    assert "Traceback" not in stderr
    line = _last_line(stderr)
    assert line.startswith("kbroker: "), line
    for word in words:
        assert word in line, line


def test_port_in_use(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, stderr = _serve(tmp_path / "data", port)
    _assert_one_clear_line(code, stderr, EXIT_LISTENER, str(port), "listeners")


def test_port_in_use_with_debug_shows_the_traceback(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        code, stderr = _serve(tmp_path / "data", taken.getsockname()[1], "--debug")
    assert code == EXIT_LISTENER
    assert "Traceback" in stderr


def test_log_dir_is_a_file(tmp_path):
    path = tmp_path / "not-a-dir"
    path.write_text("x")
    code, stderr = _serve(path)
    _assert_one_clear_line(code, stderr, EXIT_LOG_DIR, str(path), "log.dirs")


def test_corrupt_meta_properties(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "meta.properties").write_bytes(b"\xff\xfe\x00garbage\x81")
    code, stderr = _serve(data)
    _assert_one_clear_line(code, stderr, EXIT_LOG_DIR, "meta.properties", "restore")


def test_meta_properties_of_another_node(broker_factory, tmp_path):
    broker = broker_factory()
    broker.stop()
    code, stderr = _serve(broker.data_dir, 0, "--set", "node.id=7")
    _assert_one_clear_line(code, stderr, EXIT_LOG_DIR, "meta.properties", "node.id")


def test_corrupt_metadata_file(broker_factory):
    broker = broker_factory()
    broker.stop()
    (broker.data_dir / "kbroker-metadata.json").write_text('{"cluster_id": "abc", "topi')
    code, stderr = _serve(broker.data_dir)
    _assert_one_clear_line(code, stderr, EXIT_METADATA, "kbroker-metadata.json", "restore")


# --- damaged partitions: recovered, or offline alone -----------------------------------------

def _produce(bootstrap, topic, count, partition=0, one_batch_each=False):
    acked, errors = [], []

    def report(err, msg):
        (errors.append(err.code()) if err else acked.append(msg.offset()))

    producer = Producer({"bootstrap.servers": bootstrap, "retries": 0,
                         "message.timeout.ms": 10000})
    for i in range(count):
        producer.produce(topic, b"value-%d" % i, partition=partition, callback=report)
        if one_batch_each:
            producer.flush(15)
    producer.flush(15)
    return acked, errors


def _consume(bootstrap, topic, count, partition=0):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "startup-tests",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, partition, 0)])
    values, misses = [], 0
    while len(values) < count and misses < 15:
        msg = consumer.poll(1.0)
        if msg is None:
            misses += 1
        elif msg.error() is None:
            values.append(msg.value())
    consumer.close()
    return values


def _log(broker):
    return broker.log_path.read_text(errors="replace")


def test_bad_leader_epoch_checkpoint_is_rebuilt_from_the_log(broker_factory):
    broker = broker_factory({"num.partitions": 1})
    assert len(_produce(broker.bootstrap, "epochs", 20)[0]) == 20
    broker.stop()
    epoch_file = broker.data_dir / "epochs-0" / "leader-epoch-checkpoint"
    epoch_file.write_bytes(b"0\n5\nnot numbers\n\x00\xff")
    broker.start()
    assert _consume(broker.bootstrap, "epochs", 20) == [b"value-%d" % i for i in range(20)]
    text = _log(broker)
    assert "epochs-0" in text and "rebuilding the leader epoch cache" in text
    assert "Traceback" not in text
    assert epoch_file.read_text().splitlines()[0] == "0"  # rewritten in Kafka's format


def test_non_text_log_start_offset_checkpoint_is_ignored_with_a_warning(broker_factory):
    broker = broker_factory({"num.partitions": 1})
    assert len(_produce(broker.bootstrap, "starts", 10)[0]) == 10
    broker.stop()
    (broker.data_dir / "log-start-offset-checkpoint").write_bytes(b"\x00\x01\xfe\xff" * 50)
    broker.start()
    assert _consume(broker.bootstrap, "starts", 10) == [b"value-%d" % i for i in range(10)]
    text = _log(broker)
    assert "ignoring unreadable checkpoint" in text and "log-start-offset-checkpoint" in text
    assert "Traceback" not in text


def test_log_start_past_the_log_end_deletes_with_a_warning(broker_factory):
    broker = broker_factory({"num.partitions": 1})
    assert len(_produce(broker.bootstrap, "ahead", 10)[0]) == 10
    broker.stop()
    (broker.data_dir / "log-start-offset-checkpoint").write_text("0\n1\nahead 0 500\n")
    broker.start()
    text = _log(broker)
    assert "ahead-0: deleting all segments (offsets 0..9) because the log end offset 10 is " \
           "below the checkpointed log start offset 500" in text
    # Kafka's behaviour: the log restarts at the checkpointed start offset.
    acked, errors = _produce(broker.bootstrap, "ahead", 1)
    assert acked == [500] and not errors


def test_corrupt_tail_after_a_crash_is_truncated_and_logged(broker_factory):
    broker = broker_factory({"num.partitions": 1})
    assert len(_produce(broker.bootstrap, "torn", 30, one_batch_each=True)[0]) == 30
    broker.kill()  # no clean shutdown: the segment past the recovery point is scanned
    segment = broker.data_dir / "torn-0" / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    data[-10:] = b"\xee" * 10  # the last batch's records no longer match its CRC
    segment.write_bytes(bytes(data))
    broker.start()
    text = _log(broker)
    assert "torn-0: corruption found in segment 0, truncated" in text
    assert "torn-0: recovered 1 segment(s)" in text
    assert "loaded " in text and "segment(s) recovered" in text  # the summary line
    assert "the log now ends at offset 29" in text  # only the torn batch is gone
    assert _consume(broker.bootstrap, "torn", 29) == [b"value-%d" % i for i in range(29)]


def test_an_unopenable_partition_is_offline_alone(broker_factory):
    broker = broker_factory({"num.partitions": 2})
    assert len(_produce(broker.bootstrap, "half", 5, partition=0)[0]) == 5
    assert len(_produce(broker.bootstrap, "half", 5, partition=1)[0]) == 5
    broker.stop()
    (broker.data_dir / "half-1" / "partition.metadata").write_bytes(b"\x00garbage\xff")
    broker.start()
    text = _log(broker)
    assert "partition half-1 is offline" in text and "Traceback" not in text
    acked, errors = _produce(broker.bootstrap, "half", 1, partition=1)
    assert not acked and errors == [KafkaError.KAFKA_STORAGE_ERROR]
    assert _consume(broker.bootstrap, "half", 5, partition=0) == [b"value-%d" % i
                                                                 for i in range(5)]
    acked, errors = _produce(broker.bootstrap, "half", 1, partition=0)
    assert acked == [5] and not errors


def test_repeated_bad_requests_do_not_flood_the_log(broker):
    from tests.server.test_limits import _frame, _read_frame
    from kbroker.protocol import messages

    metadata = messages.request_class(3)
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        for i in range(300):
            sock.sendall(_frame(3, 4, i, metadata(
                topics=[metadata.MetadataRequestTopic(name=f"bad name {i}!")],
                allow_auto_topic_creation=True)))
            _read_frame(sock)
    lines = [line for line in _log(broker).splitlines() if "illegal topic name" in line]
    assert 1 <= len(lines) <= 10, len(lines)
