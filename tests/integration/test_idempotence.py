"""Idempotent producers: duplicates acknowledged without being written twice, gaps refused.

Raw-socket tests send batches built with the tests' own encoder (``tests/recordbatch.py``) with the
producer id and epoch from an InitProducerId request, and resend them as a retrying client would:
- a duplicate of any of the last 5 batches gets its original base offset and is stored once;
- an older duplicate, or a sequence gap, gets OUT_OF_ORDER_SEQUENCE_NUMBER (45);
- a bumped epoch starts again at sequence 0, and the old epoch is fenced (INVALID_PRODUCER_EPOCH);
- the producer state survives a clean restart and a kill -9.
Then real idempotent producers (confluent-kafka, kafka-python, aiokafka, and Java when the driver
jar and a JVM are present) write without duplicates or reordering.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from kbroker.protocol import messages
from tests.integration.clients import (
    CONSUMERS, LATEST, PRODUCERS, Rec, Wire, build_batch, ensure_topic, now_ms, running_broker,
)

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47

REPO = Path(__file__).resolve().parents[2]
JAVA_DRIVER = REPO / "compat_tests" / "java" / "target" / "kbroker-java-driver.jar"


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    with running_broker(tmp_path_factory.mktemp("idempotence") / "data",
                        {"num.partitions": 1}) as broker:
        yield broker


def idempotent_batch(producer_id: int, epoch: int, sequence: int, values: list[bytes]) -> bytes:
    return build_batch([Rec(value=value, key=b"key") for value in values], base_timestamp=now_ms(),
                       producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence)


def _values(wire: Wire, topic: str) -> list[bytes]:
    out, offset = [], 0
    end = wire.list_offset(topic, 0, LATEST).offset
    while offset < end:
        _, batches = wire.fetch(topic, 0, offset)
        assert batches, f"no batch at offset {offset} below the end {end}"
        for batch in batches:
            for record in batch.records():
                if record.offset >= offset:
                    out.append(record.value)
            offset = batch.last_offset + 1
    return out


def _producer(wire: Wire):
    r = wire.init_producer_id()
    assert r.error_code == 0 and r.producer_id >= 0 and r.producer_epoch >= 0, r
    return r.producer_id, r.producer_epoch


def test_duplicate_batch_gets_the_same_offset_and_is_stored_once(shared):
    topic = "idem-dup"
    ensure_topic(shared.bootstrap, topic, 1)
    with Wire(shared.bootstrap) as wire:
        pid, epoch = _producer(wire)
        first = idempotent_batch(pid, epoch, 0, [b"a0", b"a1", b"a2"])
        r = wire.produce(topic, 0, first)
        assert (r.error_code, r.base_offset) == (0, 0)
        again = wire.produce(topic, 0, first)
        assert (again.error_code, again.base_offset) == (0, 0), "a retry must get the same offset"
        assert wire.list_offset(topic, 0, LATEST).offset == 3
        second = idempotent_batch(pid, epoch, 3, [b"b3", b"b4"])
        assert wire.produce(topic, 0, second).base_offset == 3
        # A retry of the older batch (still among the last five) is also recognised.
        old_retry = wire.produce(topic, 0, first)
        assert (old_retry.error_code, old_retry.base_offset) == (0, 0)
        assert wire.list_offset(topic, 0, LATEST).offset == 5
        assert _values(wire, topic) == [b"a0", b"a1", b"a2", b"b3", b"b4"]
    got = CONSUMERS["confluent"](shared.bootstrap, topic, 5, partitions=[0])
    assert [g.value for g in got] == [b"a0", b"a1", b"a2", b"b3", b"b4"]


def test_any_of_the_last_five_batches_is_deduplicated(shared):
    topic = "idem-five"
    ensure_topic(shared.bootstrap, topic, 1)
    with Wire(shared.bootstrap) as wire:
        pid, epoch = _producer(wire)
        batches = [idempotent_batch(pid, epoch, 2 * i, [f"{i}a".encode(), f"{i}b".encode()])
                   for i in range(7)]
        for i, batch in enumerate(batches):
            r = wire.produce(topic, 0, batch)
            assert (r.error_code, r.base_offset) == (0, 2 * i)
        for i in range(2, 7):
            r = wire.produce(topic, 0, batches[i])
            assert (r.error_code, r.base_offset) == (0, 2 * i), f"retry of batch {i}"
        # Batch 0 is older than the last five: Kafka cannot tell it from a gap.
        r = wire.produce(topic, 0, batches[0])
        assert r.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER, r
        assert wire.list_offset(topic, 0, LATEST).offset == 14
        assert len(_values(wire, topic)) == 14


def test_sequence_gap_gets_out_of_order_sequence_number(shared):
    topic = "idem-gap"
    ensure_topic(shared.bootstrap, topic, 1)
    with Wire(shared.bootstrap) as wire:
        pid, epoch = _producer(wire)
        assert wire.produce(topic, 0, idempotent_batch(pid, epoch, 0, [b"x0", b"x1"])
                            ).error_code == 0
        gap = wire.produce(topic, 0, idempotent_batch(pid, epoch, 10, [b"gap"]))
        assert gap.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER, gap
        assert wire.list_offset(topic, 0, LATEST).offset == 2, "the gapped batch was stored"
        nxt = wire.produce(topic, 0, idempotent_batch(pid, epoch, 2, [b"x2"]))
        assert (nxt.error_code, nxt.base_offset) == (0, 2), "the right next sequence still works"
        assert _values(wire, topic) == [b"x0", b"x1", b"x2"]


def test_producers_are_tracked_separately(shared):
    topic = "idem-two-producers"
    ensure_topic(shared.bootstrap, topic, 1)
    with Wire(shared.bootstrap) as wire:
        p1, e1 = _producer(wire)
        p2, e2 = _producer(wire)
        assert p1 != p2
        b1 = idempotent_batch(p1, e1, 0, [b"p1"])
        b2 = idempotent_batch(p2, e2, 0, [b"p2"])
        assert wire.produce(topic, 0, b1).base_offset == 0
        assert wire.produce(topic, 0, b2).base_offset == 1
        assert wire.produce(topic, 0, b1).base_offset == 0
        assert wire.produce(topic, 0, b2).base_offset == 1
        assert wire.list_offset(topic, 0, LATEST).offset == 2


def test_epoch_bump_restarts_sequences_and_fences_the_old_epoch(shared):
    topic = "idem-epoch"
    ensure_topic(shared.bootstrap, topic, 1)
    with Wire(shared.bootstrap) as wire:
        pid, epoch = _producer(wire)
        assert wire.produce(topic, 0, idempotent_batch(pid, epoch, 0, [b"e0-0", b"e0-1"])
                            ).error_code == 0
        if wire.version(22) < 3:
            pytest.skip("InitProducerId v3 (KIP-360 epoch bump) is not served")
        cls = messages.request_class(22)
        bumped = wire.call(22, None, cls(transactional_id=None, transaction_timeout_ms=60000,
                                         producer_id=pid, producer_epoch=epoch))
        assert bumped.error_code == 0
        assert (bumped.producer_id, bumped.producer_epoch) == (pid, epoch + 1)
        # A new epoch must start at sequence 0.
        bad = wire.produce(topic, 0, idempotent_batch(pid, epoch + 1, 5, [b"bad"]))
        assert bad.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER, bad
        ok = wire.produce(topic, 0, idempotent_batch(pid, epoch + 1, 0, [b"e1-0"]))
        assert (ok.error_code, ok.base_offset) == (0, 2)
        # The old epoch is fenced, even with what would be its next sequence.
        stale = wire.produce(topic, 0, idempotent_batch(pid, epoch, 2, [b"stale"]))
        assert stale.error_code == INVALID_PRODUCER_EPOCH, stale
        assert _values(wire, topic) == [b"e0-0", b"e0-1", b"e1-0"]


@pytest.mark.parametrize("how", ["sigterm", "kill -9"])
def test_duplicate_detection_survives_a_restart(broker_factory, how):
    broker = broker_factory({"num.partitions": 1})
    topic = "idem-restart"
    ensure_topic(broker.bootstrap, topic, 1)
    with Wire(broker.bootstrap) as wire:
        pid, epoch = _producer(wire)
        batches = [idempotent_batch(pid, epoch, 2 * i, [f"r{i}a".encode(), f"r{i}b".encode()])
                   for i in range(3)]
        for i, batch in enumerate(batches):
            assert wire.produce(topic, 0, batch).base_offset == 2 * i
    if how == "sigterm":
        assert broker.stop() == 0
    else:
        broker.kill()
    broker.start()
    with Wire(broker.bootstrap) as wire:
        # Kafka's producer snapshot keeps only each producer's last batch, so after a clean
        # restart only that one is surely recognised; older retries may get
        # OUT_OF_ORDER_SEQUENCE_NUMBER. Either way nothing may be written twice.
        r = wire.produce(topic, 0, batches[-1])
        assert (r.error_code, r.base_offset) == (0, 4), f"retry of the last batch after {how}"
        for i, batch in enumerate(batches[:-1]):
            r = wire.produce(topic, 0, batch)
            assert (r.error_code, r.base_offset) in ((0, 2 * i),
                                                     (OUT_OF_ORDER_SEQUENCE_NUMBER, -1)), i
        assert wire.list_offset(topic, 0, LATEST).offset == 6, "a retry was written again"
        nxt = wire.produce(topic, 0, idempotent_batch(pid, epoch, 6, [b"next"]))
        assert (nxt.error_code, nxt.base_offset) == (0, 6)
        gap = wire.produce(topic, 0, idempotent_batch(pid, epoch, 9, [b"gap"]))
        assert gap.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert wire.list_offset(topic, 0, LATEST).offset == 7


# --- real idempotent producers ------------------------------------------------------------------

COUNT = 600


def _check_no_duplicates_in_order(bootstrap, topic, partitions: int, count: int):
    got = CONSUMERS["confluent"](bootstrap, topic, count, timeout=20)
    values = [g.value for g in got]
    assert len(values) == count, f"read {len(values)} records, produced {count}"
    assert len(set(values)) == count, "duplicates stored"
    for p in range(partitions):
        seqs = [int(g.value.split(b"-")[1]) for g in got if g.partition == p]
        assert seqs == sorted(seqs), f"partition {p} out of order"


@pytest.mark.parametrize("client,extra", [
    ("confluent", {"enable.idempotence": True, "max.in.flight.requests.per.connection": 5}),
    ("kafka-python", {"enable_idempotence": True}),
    ("aiokafka", {"enable_idempotence": True}),
])
def test_idempotent_client_writes_each_record_once(shared, client, extra):
    topic = f"idem-client-{client}"
    ensure_topic(shared.bootstrap, topic, 1)
    sent = [Rec(value=f"v-{i:05d}".encode(), key=f"k{i % 7}".encode()) for i in range(COUNT)]
    if client == "confluent":
        acks = PRODUCERS[client](shared.bootstrap, topic, sent, codec="lz4", **{
            k.replace(".", "_"): v for k, v in extra.items()})
    else:
        acks = PRODUCERS[client](shared.bootstrap, topic, sent, codec="gzip", **extra)
    assert sorted(a.offset for a in acks) == list(range(COUNT))
    _check_no_duplicates_in_order(shared.bootstrap, topic, 1, COUNT)
    # The producer really was idempotent: its batches carry a producer id and sequences.
    with Wire(shared.bootstrap) as wire:
        _, batches = wire.fetch(topic, 0, 0)
        assert batches and all(b.producer_id >= 0 and b.base_sequence >= 0 for b in batches)


def test_java_idempotent_producer(shared):
    assert JAVA_DRIVER.exists(), "build the Java driver: scripts/install-test-deps.sh"
    topic = "idem-java"
    ensure_topic(shared.bootstrap, topic, 1)
    proc = subprocess.run(
        ["java", "-jar", str(JAVA_DRIVER), "produce", "--bootstrap", shared.bootstrap,
         "--topic", topic, "--count", str(COUNT), "--compression", "zstd", "--acks", "all",
         "--idempotent", "true", "--value-prefix", "v-"],
        capture_output=True, timeout=120)
    events = [json.loads(line) for line in proc.stdout.decode().splitlines()
              if line.startswith("{")]
    errors = [e for e in events if e.get("event") == "error"]
    assert proc.returncode == 0 and not errors, (errors, proc.stderr.decode()[-2000:])
    offsets = sorted(e["offset"] for e in events if e.get("event") == "produced")
    assert offsets == list(range(COUNT))
    _check_no_duplicates_in_order(shared.bootstrap, topic, 1, COUNT)
