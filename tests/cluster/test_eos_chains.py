"""Issue 21's workload on three brokers over a real ZooKeeper: exactly-once chains whose groups
rebalance while transactions commit (tools/eos_chains.py), with the Java client and franz-go.
Topics have one replica each, spread over the brokers, so most partitions are led by a broker
that is not their producer's transaction coordinator: every transactional batch that opens a
transaction on a partition waits for a round trip to the coordinator's broker (KIP-890) before
it appends. A backlog makes transactions large, so the Java client pipelines its produces.
Before produce requests of one connection were kept in order, those overtook the waits and were
refused OUT_OF_ORDER_SEQUENCE_NUMBER (in the first run on the old code: 1 refusal logged by the
brokers, 4 produce errors and 1 aborted commit in the Java members); now the output holds every
record once and no produce is refused for its sequence."""

from __future__ import annotations

import logging
import re
from collections import Counter

from tests.cluster.conftest import start_brokers, stop_brokers
from tools.broker_refusals import refusal_key
from tools.eos_chains import run

_REFUSAL = re.compile(r"rejected: ([A-Z_]+):")


class Refusals(logging.Handler):
    """Counts the produces the in-process brokers refuse (kbroker.produce's log lines)."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.counts: Counter = Counter()

    def emit(self, record):
        message = record.getMessage()
        match = _REFUSAL.search(message)
        if match:
            self.counts[refusal_key(match.group(1), message)] += 1


def test_chains_copy_every_record_once_across_brokers(connect_string, tmp_path):
    brokers = start_brokers(connect_string, lambda broker_id: {
        "transaction.state.log.num.partitions": 3, "offsets.topic.num.partitions": 3,
        "group.initial.rebalance.delay.ms": 0})
    refusals = Refusals()
    logger = logging.getLogger("kbroker.produce")
    logger.addHandler(refusals)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        bootstrap = ",".join(b._inner.bootstrap_servers for b in brokers.values())
        result = run(bootstrap, tmp_path, ("java", "go"), seconds=30, members=3, rate=300,
                     backlog=20000, transactions=(3, 10),
                     refusals=lambda: Counter(refusals.counts), log=lambda _: None)
    finally:
        logger.removeHandler(refusals)
        logger.setLevel(level)
        stop_brokers(brokers)
    assert result.drained and result.exact, result.summary()
    assert result.committed > 20, result.summary()
    assert not result.false_sequence_errors(), result.summary()
