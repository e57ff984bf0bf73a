import os
import shutil

import pytest

from tests.broker_process import BrokerProcess

# tests/long: scenarios too long for `make test`, run by `make test-long`.
collect_ignore = [] if os.environ.get("KBROKER_LONG_TESTS") else ["long"]


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
