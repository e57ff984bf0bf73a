"""Producer features: idempotence (checked on disk) and a record near the size limit."""

from __future__ import annotations

import pytest

from compat_tests import harness
from compat_tests.harness import Spec
from compat_tests.reference import ensure_topic
from tests.integration.clients import segment_batches, segment_files


@pytest.mark.compat("idempotent producer")
def test_idempotent_producer(broker, driver, cell):
    cell.need(driver)
    topic = harness.unique("idem", driver.name)
    ensure_topic(broker.bootstrap, topic)
    # No per-record headers: one producer session writes everything (kcat runs once).
    spec = Spec(count=20, headers=False, null_key_every=0)
    harness.produce(driver, broker.bootstrap, topic, spec, idempotent="true", acks="all").ok()
    batches = [b for path in segment_files(broker, topic, 0) for b in segment_batches(path)]
    assert sum(b.record_count for b in batches) == 20, \
        f"{sum(b.record_count for b in batches)} records on disk, want 20"
    producers = {(b.producer_id, b.producer_epoch) for b in batches}
    assert len(producers) == 1 and next(iter(producers))[0] >= 0, \
        f"batches carry producer ids {producers}: not one idempotent producer"
    sequence = 0
    for b in batches:
        assert b.base_sequence == sequence, f"sequence {b.base_sequence}, want {sequence}"
        sequence += b.record_count
    cell.note(f"{len(batches)} batches, producer id {next(iter(producers))[0]}")


@pytest.mark.compat("large message")
def test_large_message(broker, driver, cell):
    cell.need(driver, "value-size")
    topic = harness.unique("large", driver.name)
    ensure_topic(broker.bootstrap, topic)
    spec = Spec(count=2, headers=False, null_key_every=0, value_size=900 * 1024)
    started = harness.now_ms()
    produced = harness.produce(driver, broker.bootstrap, topic, spec, timeout=60).ok()
    window = (started, harness.now_ms())
    consumed = harness.consume(driver, broker.bootstrap, topic, spec.count, timeout=40).ok()
    problems = harness.compare(spec, driver, produced, consumed.records, window)
    assert not problems, "; ".join(problems[:5])
