"""Issue 21's workload in the suite, on one broker: transactional consume-transform-produce
chains (``in -> mid -> out``, 7 partitions) whose groups rebalance while transactions commit
(members leave after a few transactions and others join with the same transactional ids), with
real clients of two families (librdkafka and franz-go here, the Java client and franz-go on the
cluster), transactions v2 (Produce v12+, EndTxn v5) as each sends them, and a backlog so that
transactions are large and clients pipeline their produces. The read_committed output holds every input record exactly once, and no produce was
refused OUT_OF_ORDER_SEQUENCE_NUMBER, by what either the broker or a client saw
(tools/eos_chains.py is the long version and the side-by-side soak).

The false sequence errors of the issue came from a pipelined produce that overtook an earlier
one waiting for the transaction coordinator (tests/server/test_produce_order.py drives that
window deterministically; tests/cluster/test_eos_chains.py, where every such wait is a round
trip to another broker, failed at once before the fix)."""

from __future__ import annotations

from tests.broker_process import BrokerProcess
from tools.broker_refusals import BrokerLogs
from tools.eos_chains import run


def test_chains_copy_every_record_once_through_rebalances(tmp_path):
    clients = ("confluent", "go")  # librdkafka copies the first stage, franz-go the second
    broker = BrokerProcess(tmp_path / "data", {"group.initial.rebalance.delay.ms": 0}).start()
    try:
        result = run(broker.bootstrap, tmp_path, clients, seconds=20, members=3, rate=400,
                     backlog=20000, transactions=(2, 8),
                     refusals=BrokerLogs([broker.log_path]).refusals, log=lambda _: None)
    finally:
        broker.stop()
    assert result.drained and result.exact, result.summary()
    assert result.members_started > 6 and result.committed > 20, result.summary()
    assert not result.false_sequence_errors(), result.summary()
