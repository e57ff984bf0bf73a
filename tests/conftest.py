import os
import shutil

import pytest

from tests.broker_process import BrokerProcess

# Scenarios too long for `make test` (about 40 minutes on 2 cores), run by `make test-long`:
# tests/long; issue 21's exactly-once chains on three brokers (2 min; the single-node chains in
# tests/integration stay); the PySpark example's restart (the Spark matrix stays).
LONG = ["long", "cluster/test_eos_chains.py", "test_pyspark_example.py"]
collect_ignore = [] if os.environ.get("KBROKER_LONG_TESTS") else LONG


@pytest.fixture
def broker_factory(tmp_path):
    """Start brokers with config overrides: ``broker_factory(**{"num.partitions": 3})``."""
    started = []

    def make(overrides=None, data_dir=None):
        process = BrokerProcess(data_dir or tmp_path / f"data{len(started)}", overrides)
        started.append(process)
        return process.start()

    yield make
    for process in started:
        process.kill()


@pytest.fixture
def broker(broker_factory):
    return broker_factory()


@pytest.fixture(scope="session")
def kcat():
    path = shutil.which("kcat")
    if path is None:
        pytest.fail("kcat is not installed: run `make test`, which installs it")
    return path
