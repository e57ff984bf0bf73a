"""What handlers keep per client connection: the order of its produce requests.

Kafka reads one request from a connection at a time: the next is read only once the previous
one's response is sent (its network processor mutes the channel). kbroker reads on while
earlier requests wait (acks=all, long-poll fetches), so a client's pipelined requests are served
concurrently. For most requests that is invisible. It is not for writes that wait *before* they
append: a transactional produce whose partitions the transaction coordinator must first add or
verify (KIP-890). Without an order, a later produce of the same connection that needs no such
wait appends at once, ahead of the earlier one, and the producer's sequence numbers reach the log
out of order: the later batch is refused OUT_OF_ORDER_SEQUENCE_NUMBER although the client did
nothing wrong (issue 21: franz-go, Java and librdkafka send up to five produce requests in
flight per connection).

:class:`ProduceOrder` restores Kafka's guarantee for exactly those requests: a produce that must
wait takes a *turn*, and every later produce of the same connection waits for the turns before
it, then runs as it would have. A produce with nothing ahead of it runs at once, as before (the
common case: no task, no future). A producer's batches for one partition travel on one
connection, so this is the order its sequence numbers need; across connections (a reconnect),
Kafka gives no order either and the sequence checks decide.
"""

from __future__ import annotations

import asyncio


class ProduceOrder:
    """Arrival order of one connection's produce requests."""

    __slots__ = ("_last",)

    def __init__(self):
        self._last: asyncio.Future | None = None  # done when the newest turn has written

    def waiting(self) -> bool:
        """Whether an earlier produce of this connection has not appended yet."""
        return self._last is not None and not self._last.done()

    def take_turn(self) -> tuple[asyncio.Future | None, asyncio.Future]:
        """(the turn to wait for or None, this request's turn). The caller must finish its
        turn (``set_result(None)``) once its appends are done or refused, on every path."""
        before = self._last if self.waiting() else None
        mine = asyncio.get_running_loop().create_future()
        self._last = mine
        return before, mine


class ClientSession:
    """Per-connection state a handler may use; one per client connection (None for requests
    that come from no connection, such as the in-process ``handle(bytes)`` seam)."""

    __slots__ = ("produce_order",)

    def __init__(self):
        self.produce_order = ProduceOrder()
