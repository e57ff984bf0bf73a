"""KIP-890 part 1 over a real socket: a transactional batch for a partition that the producer
never added to its transaction is refused (INVALID_TXN_STATE for Produce v0-10,
TRANSACTION_ABORTABLE from v11) and nothing is written; once AddPartitionsToTxn added the
partition the same batch is appended; with ``transaction.partition.verification.enable=false``
the unverified batch is appended as before KIP-890."""

from __future__ import annotations

import uuid

import pytest

from kbroker.protocol import messages
from tests.integration.clients import Wire, ensure_topic, running_broker, wait_until
from tests.recordbatch import build_batch

INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN = 22, 24
INVALID_TXN_STATE, TRANSACTION_ABORTABLE = 48, 120


def _init(wire: Wire, transactional_id: str):
    cls = messages.request_class(INIT_PRODUCER_ID)
    box = {}

    def ready():
        box["r"] = wire.call(INIT_PRODUCER_ID, 4, cls(
            transactional_id=transactional_id, transaction_timeout_ms=60000,
            producer_id=-1, producer_epoch=-1))
        return box["r"].error_code == 0
    wait_until(ready, timeout=30, message="InitProducerId")
    return box["r"].producer_id, box["r"].producer_epoch


def _add(wire: Wire, transactional_id: str, pid: int, epoch: int, topic: str) -> int:
    cls = messages.request_class(ADD_PARTITIONS_TO_TXN)
    response = wire.call(ADD_PARTITIONS_TO_TXN, 3, cls(
        v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch, v3_and_below_topics=[
            cls.AddPartitionsToTxnTopic(name=topic, partitions=[0])]))
    return response.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code


def _scenario(bootstrap: str):
    topic = "verify-" + uuid.uuid4().hex[:8]
    ensure_topic(bootstrap, topic)
    transactional_id = "tid-" + uuid.uuid4().hex[:8]
    with Wire(bootstrap) as wire:
        pid, epoch = _init(wire, transactional_id)
        batch = build_batch([b"late"], producer_id=pid, producer_epoch=epoch, base_sequence=0,
                            transactional=True)
        old = wire.produce(topic, 0, batch, version=10, transactional_id=transactional_id)
        new = wire.produce(topic, 0, batch, version=11, transactional_id=transactional_id)
        log_end = wire.list_offset(topic, 0, -1).offset
        added = _add(wire, transactional_id, pid, epoch, topic)
        after = wire.produce(topic, 0, batch, version=11, transactional_id=transactional_id)
    return old, new, log_end, added, after


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with running_broker(tmp_path_factory.mktemp("verify") / "data",
                        {"num.partitions": 1}) as b:
        yield b


def test_unadded_partition_is_refused_then_accepted_once_added(broker):
    old, new, log_end, added, after = _scenario(broker.bootstrap)
    assert old.error_code == INVALID_TXN_STATE
    assert new.error_code == TRANSACTION_ABORTABLE
    assert "not in the open transaction" in new.error_message
    assert log_end == 0
    assert added == 0
    assert after.error_code == 0 and after.base_offset == 0


def test_verification_disabled_appends_unverified(tmp_path):
    with running_broker(tmp_path / "data", {"num.partitions": 1,
                        "transaction.partition.verification.enable": False}) as b:
        old, _new, log_end, _added, _after = _scenario(b.bootstrap)
    assert old.error_code == 0
    assert log_end == 1
