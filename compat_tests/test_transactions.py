"""Transactions: one transactional producer per client aborts a transaction, then commits one;
a read_committed consumer of the same client sees only the committed records, a
read_uncommitted one sees both (in log order)."""

from __future__ import annotations

import pytest

from compat_tests import harness
from compat_tests.harness import Spec
from compat_tests.reference import ensure_topic


@pytest.mark.compat("transactions")
def test_commit_visible_abort_hidden(broker, driver, cell):
    cell.need(driver, "transactions")
    topic = harness.unique("txn", driver.name)
    ensure_topic(broker.bootstrap, topic)
    transactional_id = harness.unique("txn-id", driver.name)
    aborted = Spec(count=3, value_prefix="aborted-", headers=False, null_key_every=0)
    committed = Spec(count=3, value_prefix="committed-", headers=False, null_key_every=0)
    for spec, result in ((aborted, "abort"), (committed, "commit")):
        run = harness.produce(driver, broker.bootstrap, topic, spec,
                              transactional_id=transactional_id, transaction=result).ok()
        assert {"event": "transaction", "result": result} in run.events, run.describe()
    want_committed = [f"committed-{i}" for i in range(3)]
    got = harness.consume(driver, broker.bootstrap, topic, 3, isolation="read_committed").ok()
    assert [r["value"] for r in got.records] == want_committed
    got = harness.consume(driver, broker.bootstrap, topic, 6, isolation="read_uncommitted").ok()
    assert [r["value"] for r in got.records] == [f"aborted-{i}" for i in range(3)] + \
        want_committed
    cell.note("abort hidden from read_committed, commit visible")
