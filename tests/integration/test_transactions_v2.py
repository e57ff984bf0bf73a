"""Transactions v2 (KIP-890 part 2) over a real socket, request by request, then with the Java
producer.

- Produce v12 with a transactional batch for a partition the producer never added: the broker
  adds it (no AddPartitionsToTxn) and appends; Produce v11 for another partition is refused as
  part 1 does.
- EndTxn v5 bumps the epoch and answers it; the COMMIT marker in the log carries the bumped
  epoch; the next transaction starts at sequence 0 with that epoch; a late batch with the old
  epoch is INVALID_PRODUCER_EPOCH; a retried EndTxn (old epoch) answers NONE with the new epoch.
- TxnOffsetCommit v5 without AddOffsetsToTxn adds the group's partition; v3 and v4 without it are
  refused (INVALID_TXN_STATE, TRANSACTION_ABORTABLE) and nothing is committed.
- DescribeTransactions lists exactly the partitions of the open transaction.
- The Java 4.x producer picks transactions v2 when ``transaction.version`` is finalized at 2 (each
  EndTxn bumps the epoch: two one-transaction producers end at epoch 3) and v1 after the level is
  set to 1 through UpdateFeatures (epoch 1). Kafka's DumpLogSegments decodes the
  ``__transaction_state`` records written for it (TransactionLogValue v1, client version 2).
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from kbroker.protocol import messages
from kbroker.coordinator.txn.records import partition_for
from tests.integration.clients import (Wire, ensure_topic, partition_dir, running_broker,
                                       wait_until)
from tests.log.conftest import kafka_java
from tests.recordbatch import build_batch

INIT_PRODUCER_ID, END_TXN, TXN_OFFSET_COMMIT, DESCRIBE_TRANSACTIONS = 22, 26, 28, 65
UPDATE_FEATURES, FIND_COORDINATOR, OFFSET_FETCH = 57, 10, 9
INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, TRANSACTION_ABORTABLE = 47, 48, 120
CONTROL = 0x20
ROOT = Path(__file__).resolve().parents[2]
JAVA_JAR = ROOT / "compat_tests" / "java" / "target" / "kbroker-java-driver.jar"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with running_broker(tmp_path_factory.mktemp("txn-v2") / "data",
                        {"num.partitions": 2,
                         "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200}) as b:
        yield b


def init(wire: Wire, transactional_id: str, timeout_ms: int = 60000) -> tuple[int, int]:
    cls = messages.request_class(INIT_PRODUCER_ID)
    box = {}

    def ready():
        box["r"] = wire.call(INIT_PRODUCER_ID, 5, cls(
            transactional_id=transactional_id, transaction_timeout_ms=timeout_ms,
            producer_id=-1, producer_epoch=-1))
        return box["r"].error_code == 0
    wait_until(ready, timeout=30, message="InitProducerId")
    return box["r"].producer_id, box["r"].producer_epoch


def end_txn(wire: Wire, transactional_id: str, pid: int, epoch: int, commit: bool):
    cls = messages.request_class(END_TXN)
    return wire.call(END_TXN, 5, cls(transactional_id=transactional_id, producer_id=pid,
                                     producer_epoch=epoch, committed=commit))


def describe(wire: Wire, transactional_id: str):
    cls = messages.request_class(DESCRIBE_TRANSACTIONS)
    state = wire.call(DESCRIBE_TRANSACTIONS, 0, cls(
        transactional_ids=[transactional_id])).transaction_states[0]
    assert state.error_code == 0
    return state


def described_partitions(state) -> set:
    return {(t.topic, p) for t in state.topics for p in t.partitions}


def txn_batch(values, pid, epoch, sequence):
    return build_batch([v.encode() for v in values], producer_id=pid, producer_epoch=epoch,
                       base_sequence=sequence, transactional=True)


def test_produce_v12_adds_the_partition_and_end_txn_v5_bumps_the_epoch(broker):
    topic = "v2-" + uuid.uuid4().hex[:8]
    ensure_topic(broker.bootstrap, topic, partitions=2)
    tid = "tv2-" + uuid.uuid4().hex[:8]
    with Wire(broker.bootstrap) as wire:
        pid, epoch = init(wire, tid)
        added = wire.produce(topic, 0, txn_batch(["a0", "a1"], pid, epoch, 0), version=12,
                             transactional_id=tid)
        assert (added.error_code, added.base_offset) == (0, 0)
        # Part 1 rules for a v1 request: partition 1 was never added.
        refused = wire.produce(topic, 1, txn_batch(["b0"], pid, epoch, 0), version=11,
                               transactional_id=tid)
        assert refused.error_code == TRANSACTION_ABORTABLE
        state = describe(wire, tid)
        assert state.transaction_state == "Ongoing"
        assert described_partitions(state) == {(topic, 0)}

        ended = end_txn(wire, tid, pid, epoch, True)
        assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (0, pid, epoch + 1)
        wait_until(lambda: describe(wire, tid).transaction_state == "CompleteCommit", 10, 0.05,
                   "CompleteCommit")
        assert describe(wire, tid).topics == []
        _, batches = wire.fetch(topic, 0, 0)
        marker = batches[-1]
        assert marker.attributes & CONTROL and marker.producer_epoch == epoch + 1

        # A retry of that EndTxn (old epoch) is answered with the new epoch.
        retried = end_txn(wire, tid, pid, epoch, True)
        assert (retried.error_code, retried.producer_epoch) == (0, epoch + 1)
        # A late batch of the finished transaction is fenced by the marker's epoch.
        late = wire.produce(topic, 0, txn_batch(["late"], pid, epoch, 2), version=12,
                            transactional_id=tid)
        assert late.error_code in (INVALID_PRODUCER_EPOCH, 90)  # 90: PRODUCER_FENCED
        # The next transaction starts over at sequence 0 with the bumped epoch.
        nxt = wire.produce(topic, 0, txn_batch(["c0"], pid, epoch + 1, 0), version=12,
                           transactional_id=tid)
        assert nxt.error_code == 0
        aborted = end_txn(wire, tid, pid, epoch + 1, False)
        assert (aborted.error_code, aborted.producer_epoch) == (0, epoch + 2)


def test_a_timed_out_v2_transaction_is_aborted_with_one_bump_and_the_producer_recovers(broker):
    topic = "v2t-" + uuid.uuid4().hex[:8]
    ensure_topic(broker.bootstrap, topic, partitions=1)
    tid = "tv2t-" + uuid.uuid4().hex[:8]
    with Wire(broker.bootstrap) as wire:
        pid, epoch = init(wire, tid, timeout_ms=500)
        assert wire.produce(topic, 0, txn_batch(["x"], pid, epoch, 0), version=12,
                            transactional_id=tid).error_code == 0
        wait_until(lambda: describe(wire, tid).transaction_state == "CompleteAbort", 30, 0.1,
                   "the coordinator's timeout abort")
        assert describe(wire, tid).producer_epoch == epoch + 1
        # The abandoned producer's next batch meets the ABORT marker's epoch ...
        late = wire.produce(topic, 0, txn_batch(["y"], pid, epoch, 1), version=12,
                            transactional_id=tid)
        assert late.error_code == INVALID_PRODUCER_EPOCH
        # ... its abort is taken as a retry of the coordinator's and it goes on, one epoch up.
        aborted = end_txn(wire, tid, pid, epoch, False)
        assert (aborted.error_code, aborted.producer_epoch) == (0, epoch + 1)
        assert end_txn(wire, tid, pid, epoch, True).error_code == INVALID_TXN_STATE
        again = wire.produce(topic, 0, txn_batch(["z"], pid, epoch + 1, 0), version=12,
                             transactional_id=tid)
        assert again.error_code == 0
        assert end_txn(wire, tid, pid, epoch + 1, True).error_code == 0


def txn_offset_commit(wire: Wire, version: int, tid, pid, epoch, group, topic):
    cls = messages.request_class(TXN_OFFSET_COMMIT)
    r = wire.call(TXN_OFFSET_COMMIT, version, cls(
        transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch,
        generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=[cls.TxnOffsetCommitRequestTopic(name=topic, partitions=[
            cls.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=5,
                                                committed_leader_epoch=-1,
                                                committed_metadata="")])]))
    return r.topics[0].partitions[0].error_code


def test_txn_offset_commit_needs_add_offsets_before_v5(broker):
    topic = "v2o-" + uuid.uuid4().hex[:8]
    ensure_topic(broker.bootstrap, topic, partitions=1)
    tid, group = "tv2o-" + uuid.uuid4().hex[:8], "g-" + uuid.uuid4().hex[:8]
    with Wire(broker.bootstrap) as wire:
        found = wire.call(FIND_COORDINATOR, 3, messages.request_class(FIND_COORDINATOR)(
            key=group, key_type=0))
        assert found.error_code == 0
        pid, epoch = init(wire, tid)
        assert txn_offset_commit(wire, 3, tid, pid, epoch, group, topic) == INVALID_TXN_STATE
        assert txn_offset_commit(wire, 4, tid, pid, epoch, group, topic) == TRANSACTION_ABORTABLE
        assert describe(wire, tid).transaction_state == "Empty"
        assert txn_offset_commit(wire, 5, tid, pid, epoch, group, topic) == 0
        state = describe(wire, tid)
        assert state.transaction_state == "Ongoing"
        assert [t.topic for t in state.topics] == ["__consumer_offsets"]
        # Now in the transaction: a v1 commit of the same group is accepted too.
        assert txn_offset_commit(wire, 3, tid, pid, epoch, group, topic) == 0
        assert end_txn(wire, tid, pid, epoch, True).error_code == 0

        cls = messages.request_class(OFFSET_FETCH)

        def committed():
            r = wire.call(OFFSET_FETCH, 7, cls(group_id=group, require_stable=True, topics=[
                cls.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])]))
            return r.topics[0].partitions[0].committed_offset == 5
        wait_until(committed, 10, 0.05, "the transaction's offset committed")


def java_transaction(bootstrap: str, topic: str, tid: str, result: str) -> None:
    out = subprocess.run(["java", "-jar", str(JAVA_JAR), "produce", "--bootstrap", bootstrap,
                          "--topic", topic, "--count", "3", "--transactional-id", tid,
                          "--transaction", result], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    events = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert {"event": "transaction", "result": result} in events


def set_transaction_version(bootstrap: str, level: int) -> None:
    cls = messages.request_class(UPDATE_FEATURES)
    with Wire(bootstrap) as wire:
        r = wire.call(UPDATE_FEATURES, 2, cls(timeout_ms=5000, validate_only=False,
                                              feature_updates=[cls.FeatureUpdateKey(
                                                  feature="transaction.version",
                                                  max_version_level=level, upgrade_type=2)]))
    assert r.error_code == 0, r.error_message


@pytest.mark.parametrize("level, final_epoch", [(2, 3), (1, 1)])
def test_java_producer_follows_the_finalized_transaction_version(broker, level, final_epoch):
    assert JAVA_JAR.exists(), "build compat_tests/java (scripts/install-test-deps.sh)"
    topic = "v2j-" + uuid.uuid4().hex[:8]
    ensure_topic(broker.bootstrap, topic, partitions=1)
    tid = "tv2j-" + uuid.uuid4().hex[:8]
    set_transaction_version(broker.bootstrap, level)
    try:
        java_transaction(broker.bootstrap, topic, tid, "commit")
        java_transaction(broker.bootstrap, topic, tid, "abort")
    finally:
        set_transaction_version(broker.bootstrap, 2)
    with Wire(broker.bootstrap) as wire:
        state = describe(wire, tid)
    # v2: init 0, commit bumps to 1, the second init 2, its abort 3. v1: init 0, then 1.
    assert (state.transaction_state, state.producer_epoch) == ("CompleteAbort", final_epoch)
    if level == 2:
        dump_shows_transactions_v2(broker, tid)


def dump_shows_transactions_v2(broker, tid: str) -> None:
    directory = partition_dir(broker, "__transaction_state", partition_for(tid, 50))
    segments = sorted(str(p) for p in Path(directory).glob("*.log"))
    out = subprocess.run([*kafka_java("org.apache.kafka.tools.DumpLogSegments"),
                          "--transaction-log-decoder", "--files", ",".join(segments)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    values = [json.loads(line.split(" payload: ", 1)[1]) for line in out.stdout.splitlines()
              if f'"transactionalId":"{tid}"' in line]
    assert {v["version"] for v in values} == {"1"}
    # (status, epoch): Empty, Ongoing, PrepareCommit and CompleteCommit with the bumped epoch,
    # then the second producer: Empty at 2, Ongoing, PrepareAbort and CompleteAbort at 3.
    # (Kafka 4.4's DumpLogSegments prints the status by name; the record holds its code.)
    assert [(v["data"]["transactionStatus"], v["data"]["producerEpoch"]) for v in values] == [
        ("Empty", 0), ("Ongoing", 0), ("PrepareCommit", 1), ("CompleteCommit", 1), ("Empty", 2),
        ("Ongoing", 2), ("PrepareAbort", 3), ("CompleteAbort", 3)], out.stdout
    assert all(v["data"].get("clientTransactionVersion") == 2 for v in values[1:])
