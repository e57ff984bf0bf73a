"""Transactions v2, the broker's AddPartitions before a Produce (handlers/txn_verification): an
add the coordinator commits at once is answered synchronously; one still being committed (a
replicated ``__transaction_state``) makes the produce wait for it; while the previous
transaction's markers are written (CONCURRENT_TRANSACTIONS) the add waits for its Complete and
tries again. (That a later produce of the connection waits behind a waiting one is
tests/server/test_produce_order.py.)"""

import asyncio
from types import SimpleNamespace

from kbroker.handlers import txn_verification as tv
from kbroker.protocol.errors import Errors

TP = ("t", 0)


class Coordinator:
    """Answers add_partitions_now from a script of futures (or errors)."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.calls = 0
        self.completed = asyncio.get_running_loop().create_future()

    def add_partitions_now(self, transactional_id, producer_id, epoch, wanted):
        self.calls += 1
        answer = self.answers.pop(0)
        if isinstance(answer, asyncio.Future):
            return answer
        future = asyncio.get_running_loop().create_future()
        future.set_result(answer)
        return future

    def completion(self, transactional_id):
        return self.completed


def ctx(coordinator):
    return SimpleNamespace(txn=coordinator)


def test_committed_at_once_is_answered_without_waiting():
    async def go():
        c = Coordinator([Errors.NONE])
        assert tv.add_partitions(ctx(c), "tid", 1, 0, [TP]) == {TP: Errors.NONE}
    asyncio.run(go())


def test_an_add_still_committing_is_waited_for():
    async def go():
        slow = asyncio.get_running_loop().create_future()
        c = Coordinator([slow])
        pending = tv.add_partitions(ctx(c), "tid", 1, 0, [TP])
        assert asyncio.iscoroutine(pending)
        task = asyncio.get_running_loop().create_task(pending)
        await asyncio.sleep(0.01)
        assert not task.done() and c.calls == 1
        slow.set_result(Errors.NONE)
        assert await task == {TP: Errors.NONE} and c.calls == 1
    asyncio.run(go())


def test_concurrent_transactions_waits_for_the_previous_transaction():
    async def go():
        c = Coordinator([Errors.CONCURRENT_TRANSACTIONS, Errors.NONE])
        pending = tv.add_partitions(ctx(c), "tid", 1, 1, [TP])
        task = asyncio.get_running_loop().create_task(pending)
        await asyncio.sleep(0.005)
        assert not task.done()
        c.completed.set_result(None)  # the Complete record of the previous transaction
        assert await task == {TP: Errors.NONE} and c.calls == 2
    asyncio.run(go())


def test_concurrent_transactions_past_the_wait_is_retriable_for_the_client():
    async def go():
        c = Coordinator([Errors.CONCURRENT_TRANSACTIONS] * 100)
        errors = await tv.add_partitions(ctx(c), "tid", 1, 1, [TP])
        assert errors == {TP: Errors.CONCURRENT_TRANSACTIONS}
        assert tv.client_error(errors[TP], True) is Errors.NOT_ENOUGH_REPLICAS
    asyncio.run(go())
