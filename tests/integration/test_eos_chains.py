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


def test_fresh_kbroker_gets_the_reference_kafkas_group_settings(tmp_path, monkeypatch):
    """The side-by-side soak compares kbroker with tools/kafka_ref's Kafka, which runs without an
    initial rebalance delay. Its franz-go members live a second or two, so a stage's group often
    empties; with Kafka's default delay (3 s, extended while members arrive) on kbroker's side
    only, each empty group stalled kbroker's stage for 3-7 s, and the soak counted 5x fewer
    franz-go transactions on kbroker than on Kafka. Both sides must run with the same settings."""
    import tests.broker_process
    from tools.eos_chains import with_fresh_broker
    from tools.kafka_ref.run_kafka import COMPARABLE_SETTINGS, server_properties

    started = {}

    class Recorded:
        def __init__(self, data_dir, overrides=None):
            started.update(overrides or {})
            self.bootstrap, self.log_path = "127.0.0.1:1", tmp_path / "log"

        def start(self):
            return self

        def stop(self):
            return 0

    monkeypatch.setattr(tests.broker_process, "BrokerProcess", Recorded)
    assert with_fresh_broker("kbroker", tmp_path, lambda bootstrap, logs: "ran") == "ran"
    assert started["group.initial.rebalance.delay.ms"] == "0"
    reference = dict(line.split("=", 1) for line in server_properties(
        1, 2, tmp_path, "127.0.0.1:1", {}).splitlines())
    assert {k: reference[k] for k in COMPARABLE_SETTINGS} == started
