"""Topic auto-creation, on (Kafka's default) and off: what each client sees."""

from __future__ import annotations

import pytest

from compat_tests import harness, reference
from compat_tests.harness import Spec
from tests.broker_process import BrokerProcess


@pytest.fixture(scope="module")
def strict_broker(tmp_path_factory):
    """A broker that never creates topics on demand."""
    process = BrokerProcess(tmp_path_factory.mktemp("strict") / "data",
                            {"auto.create.topics.enable": "false"}).start()
    yield process
    reference.forget(process.bootstrap)
    process.stop(timeout=10)


@pytest.mark.compat("auto-create on")
def test_auto_create_on(broker, driver, cell):
    cell.need(driver)
    topic = harness.unique("auto-on", driver.name)
    spec = Spec(count=3, headers=False, null_key_every=0)
    started = harness.now_ms()
    produced = harness.produce(driver, broker.bootstrap, topic, spec, timeout=20).ok()
    window = (started, harness.now_ms())
    assert reference.partition_count(broker.bootstrap, topic) == 1, \
        "the topic was not created with num.partitions (1)"
    consumed = harness.consume(driver, broker.bootstrap, topic, spec.count).ok()
    problems = harness.compare(spec, driver, produced, consumed.records, window)
    assert not problems, "; ".join(problems[:5])


@pytest.mark.compat("auto-create off")
def test_auto_create_off(strict_broker, driver, cell):
    cell.need(driver)
    topic = harness.unique("auto-off", driver.name)
    spec = Spec(count=1, headers=False, null_key_every=0)
    produced = harness.produce(driver, strict_broker.bootstrap, topic, spec, timeout=5)
    cell.note(f"{driver.name} sees: {produced.error_text() if produced.rc else 'no error'}"
              f" (exit {produced.rc} after {produced.seconds:.1f} s)")
    assert produced.rc != 0 and not produced.of("produced"), \
        f"the produce to a missing topic succeeded\n{produced.describe()}"
    assert not produced.killed, f"the client did not give up by itself\n{produced.describe()}"
    assert reference.partition_count(strict_broker.bootstrap, topic) is None, \
        "the topic was created although auto.create.topics.enable=false"
