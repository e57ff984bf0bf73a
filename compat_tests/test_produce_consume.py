"""Produce then consume with one client, every producer x every consumer per codec, and each
client reading back a topic whose ``compression.type`` makes the broker recompress (per codec).

Records follow the driver contract (key ``key-i``, a null key every 3rd, headers ``h-index`` and
``h-client``, timestamps ``base + i`` where the producer can set them) and are checked exactly on
the consumer's side (``harness.compare``). Cross-client cells share one production per
(producer, codec) topic: the consumers only read it.
"""

from __future__ import annotations

import pytest

from compat_tests import harness
from compat_tests.harness import Spec
from tests.integration.clients import CODEC_IDS, ensure_topic, segment_batches, segment_files

# Clients send a batch uncompressed when compressing does not shrink it (librdkafka does), and
# kcat writes one record per batch: values must compress on their own.
COMPRESSIBLE = "kbroker-compat-" * 12


def explicit_timestamps(driver) -> int | None:
    """A CreateTime a minute ago (inside Kafka's default 1 h future/past bounds), for producers
    that can set one."""
    return None if driver.why_not("timestamps") else int(harness.now_ms()) - 60_000


@pytest.mark.compat("produce-consume")
def test_produce_then_consume(broker, driver, cell):
    cell.need(driver)
    topic = harness.unique("pc", driver.name)
    ensure_topic(broker.bootstrap, topic, partitions=3)
    spec = Spec(count=12, timestamp=explicit_timestamps(driver))
    if spec.timestamp is None:
        cell.note("timestamps set by the producer (no explicit-timestamp support)")
    started = harness.now_ms()
    produced = harness.produce(driver, broker.bootstrap, topic, spec).ok()
    window = (started, harness.now_ms())
    consumed = harness.consume(driver, broker.bootstrap, topic, spec.count).ok()
    problems = harness.compare(spec, driver, produced, consumed.records, window)
    assert not problems, "; ".join(problems[:5])
    spread = {r["partition"] for r in consumed.records}
    assert len(spread) > 1, f"12 keyed records all landed in partitions {spread} of 3"


_productions: dict[tuple[str, str], tuple] = {}


def production(broker, producer, codec):
    """Produce once per (producer, codec); every consumer cell of that row reads the topic."""
    key = (producer.name, codec)
    if key not in _productions:
        topic = harness.unique("x", producer.name, codec)
        ensure_topic(broker.bootstrap, topic, partitions=1)
        spec = Spec(count=6, compression=codec, value_prefix=COMPRESSIBLE,
                    timestamp=explicit_timestamps(producer))
        started = harness.now_ms()
        run = harness.produce(producer, broker.bootstrap, topic, spec)
        _productions[key] = (topic, spec, run, (started, harness.now_ms()))
    return _productions[key]


@pytest.mark.compat("cross-client ({codec})")
def test_cross_client(broker, producer, consumer, codec, cell):
    cell.need(producer)
    cell.need(consumer)
    topic, spec, produced, window = production(broker, producer, codec)
    assert produced.rc == 0, f"{producer.name} could not produce: {produced.error_text()}"
    consumed = harness.consume(consumer, broker.bootstrap, topic, spec.count).ok()
    problems = harness.compare(spec, producer, produced, consumed.records, window)
    assert not problems, "; ".join(problems[:5])

    codecs = {b.attributes & 0x07 for path in segment_files(broker, topic, 0)
              for b in segment_batches(path)}
    if codecs != {CODEC_IDS[codec]}:
        names = sorted(n for n, i in CODEC_IDS.items() if i in codecs)
        pytest.fail(f"{producer.name} asked for {codec} but the batches on disk are {names}")


# A topic's compression.type for each codec cell; "none" is the topic type "uncompressed".
TOPIC_TYPES = {"none": "uncompressed", "gzip": "gzip", "snappy": "snappy", "lz4": "lz4",
               "zstd": "zstd"}


@pytest.mark.compat("topic-level ({codec})")
def test_topic_level_compression(broker, driver, codec, cell):
    """The broker recompresses every batch (Kafka's LogValidator): the client produces
    uncompressed into a topic of ``codec`` (gzip into an ``uncompressed`` one) and reads back what
    the broker stored, which is ``codec`` on disk."""
    cell.need(driver)
    topic = harness.unique("tl", driver.name, codec)
    ensure_topic(broker.bootstrap, topic, partitions=1,
                 config={"compression.type": TOPIC_TYPES[codec]})
    sent_as = "gzip" if codec == "none" else "none"
    spec = Spec(count=6, compression=sent_as, value_prefix=COMPRESSIBLE,
                timestamp=explicit_timestamps(driver))
    started = harness.now_ms()
    produced = harness.produce(driver, broker.bootstrap, topic, spec).ok()
    window = (started, harness.now_ms())
    consumed = harness.consume(driver, broker.bootstrap, topic, spec.count).ok()
    problems = harness.compare(spec, driver, produced, consumed.records, window)
    assert not problems, "; ".join(problems[:5])
    codecs = {b.attributes & 0x07 for path in segment_files(broker, topic, 0)
              for b in segment_batches(path)}
    assert codecs == {CODEC_IDS[codec]}, f"the batches on disk are {sorted(codecs)}"
