"""The transaction coordinator's read side (DescribeTransactions, ListTransactions filters) over
shards filled by hand: Kafka's filter semantics and errors."""

from types import SimpleNamespace

import pytest

from kbroker.coordinator.txn import describe as reads
from kbroker.coordinator.txn.state import TxnMetadata, TxnState
from kbroker.protocol.errors import Errors, KafkaError

S = TxnState
NOW = 1_000_000


def shard(*txns, loading=False):
    return SimpleNamespace(loading=loading, txns={m.transactional_id: m for m in txns})


def coordinator(*shards, unmarked=None):
    by_index = dict(enumerate(shards))
    return SimpleNamespace(runtime=SimpleNamespace(shards=by_index), unmarked=unmarked or {},
                           shard_for=lambda tid: by_index[hash(tid) % len(by_index)])


OPEN = TxnMetadata("app-1", 10, 0, 60_000, S.ONGOING, frozenset({("t", 0)}), NOW - 5_000)
DONE = TxnMetadata("app-2", 11, 3, 60_000, S.COMPLETE_COMMIT, txn_start_timestamp=NOW - 90_000)
DEAD = TxnMetadata("gone", 12, 1, 60_000, S.DEAD)


def listed(c, states=(), pids=(), duration=-1, pattern=None):
    result = reads.list_transactions(c, list(states), list(pids), duration, pattern, NOW)
    return result.error, sorted(m.transactional_id for m in result.transactions), \
        result.unknown_state_filters


def test_filters_combine_and_dead_ids_are_never_listed():
    c = coordinator(shard(OPEN, DEAD), shard(DONE))
    assert listed(c) == (Errors.NONE, ["app-1", "app-2"], [])
    assert listed(c, states=["Ongoing", "Bogus"]) == (Errors.NONE, ["app-1"], ["Bogus"])
    assert listed(c, pids=[11, 99]) == (Errors.NONE, ["app-2"], [])
    # Only transactions running *longer* than the duration (Kafka: now - start > duration).
    assert listed(c, duration=5_000) == (Errors.NONE, ["app-2"], [])
    assert listed(c, duration=4_999) == (Errors.NONE, ["app-1", "app-2"], [])
    # The pattern matches the whole id (Java Matcher.matches); empty means no filter.
    assert listed(c, pattern="app-") == (Errors.NONE, [], [])
    assert listed(c, pattern="app-[12]") == (Errors.NONE, ["app-1", "app-2"], [])
    assert listed(c, pattern="") == (Errors.NONE, ["app-1", "app-2"], [])


def test_list_errors():
    assert listed(coordinator(shard(OPEN)), pattern="(")[0] is Errors.INVALID_REGULAR_EXPRESSION
    assert listed(coordinator(shard(OPEN), shard(loading=True)))[0] is \
        Errors.COORDINATOR_LOAD_IN_PROGRESS


def test_describe():
    c = coordinator(shard(OPEN, DEAD))
    assert reads.describe(c, "app-1") is OPEN
    for tid, error in (("", Errors.INVALID_REQUEST), ("gone", Errors.TRANSACTIONAL_ID_NOT_FOUND),
                       ("never", Errors.TRANSACTIONAL_ID_NOT_FOUND)):
        with pytest.raises(KafkaError) as raised:
            reads.describe(c, tid)
        assert raised.value.error is error


def test_describe_lists_only_partitions_still_without_a_marker():
    prepared = TxnMetadata("app-3", 13, 2, 60_000, S.PREPARE_COMMIT,
                           frozenset({("t", 0), ("t", 1), ("u", 0)}), NOW - 1_000)
    # Markers written to t-0 so far (Kafka removes a partition once its marker is written).
    c = coordinator(shard(prepared), unmarked={"app-3": {("t", 1), ("u", 0)}})
    assert reads.describe(c, "app-3").partitions == frozenset({("t", 1), ("u", 0)})
    # Before the marker writer started (or after a load): every partition.
    assert reads.describe(coordinator(shard(prepared)), "app-3").partitions == \
        prepared.partitions
    # An open transaction lists all of its partitions whatever the marker writer holds.
    c = coordinator(shard(OPEN), unmarked={"app-1": set()})
    assert reads.describe(c, "app-1").partitions == OPEN.partitions
