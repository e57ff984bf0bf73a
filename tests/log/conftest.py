import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest

from kbroker.log import LogConfig, PartitionLog
from kbroker.protocol.records import RecordBatchBuilder

NOW = 1_700_000_000_000


def make_batch(count=3, ts=NOW, key=b"k", value=b"v" * 40, producer_id=-1, producer_epoch=-1,
               base_sequence=-1, compression=0, ts_step=0):
    builder = RecordBatchBuilder(compression=compression, producer_id=producer_id,
                                 producer_epoch=producer_epoch, base_sequence=base_sequence)
    for i in range(count):
        builder.append(ts + i * ts_step, key, value)
    return builder.build()


@pytest.fixture
def log_dir(tmp_path):
    return str(tmp_path / "topic-0")


@pytest.fixture
def open_log(log_dir):
    opened = []

    def _open(config=None, **kwargs):
        kwargs.setdefault("now_ms", NOW)
        log = PartitionLog.open(log_dir, "topic", 0, config or LogConfig(), **kwargs)
        opened.append(log)
        return log

    yield _open


def append(log, batch, epoch=0, now=NOW):
    result = log.append_as_leader(batch, epoch, now)
    log.high_watermark = log.log_end_offset
    return result


def read_all(log, offset=0, max_bytes=1 << 30, bound=None):
    result = log.read(offset, max_bytes, bound)
    return b"".join(region.read() for region in result.regions)


def files(log_dir):
    return sorted(os.listdir(log_dir))


def _run_kafka():
    """tools/kafka_ref/run_kafka.py (stdlib only), which owns where Kafka's jars are cached."""
    if "run_kafka" not in sys.modules:
        path = Path(__file__).resolve().parents[2] / "tools" / "kafka_ref" / "run_kafka.py"
        spec = importlib.util.spec_from_file_location("run_kafka", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["run_kafka"] = module  # its dataclasses look their module up there
        spec.loader.exec_module(module)
    return sys.modules["run_kafka"]


def kafka_classpath() -> str:
    """Apache Kafka's jars (for its DumpLogSegments tool). They are a test dependency like any
    other: missing jars fail the test with the command that installs them, never skip it."""
    run_kafka = _run_kafka()
    version = os.environ.get("KBROKER_KAFKA_VERSION", run_kafka.DEFAULT_VERSION)
    libs = run_kafka.cache_dir(version) / "libs"
    if shutil.which("java") is None or not (libs / ".complete").exists():
        pytest.fail(f"Apache Kafka {version}'s jars are not installed in {libs} (or java is not "
                    f"on PATH): run scripts/install-test-deps.sh, or "
                    f"python tools/kafka_ref/run_kafka.py fetch", pytrace=False)
    return run_kafka.classpath(version)


def kafka_java(main: str) -> list[str]:
    """The command line of Kafka's tool ``main`` (arguments follow), started as run_kafka starts
    tools (in the suite: a quick JVM, see tools/kafka_ref/README.md)."""
    kafka_classpath()  # fails the test, with the fix, if the jars are missing
    run_kafka = _run_kafka()
    return run_kafka.java_cmd(main, [], os.environ.get("KBROKER_KAFKA_VERSION",
                                                     run_kafka.DEFAULT_VERSION), None)
