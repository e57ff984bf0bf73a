"""One channel of requests from this broker to the others, for a coordinator's job: the
transaction coordinator's WriteTxnMarkers and KIP-890 verifications (Kafka's
TransactionMarkerChannelManager, AddPartitionsToTxnManager), the share coordinator's and the
group coordinator's reads of other brokers. Each job keeps a channel of its own, as Kafka does, so
that a slow marker never delays a producer's verification.

One connection per destination broker, one request at a time on it (a lock). A broker that
cannot be reached raises BrokerClientError; the caller re-resolves the leader from the current
metadata image and retries after a back-off, as Kafka does on a disconnect.

Stopping: every request runs as its own task, tracked here; :meth:`close` refuses new requests
and cancels those in flight (including one still connecting to a broker that is gone), so a
stop never waits for another broker. The caller sees BrokerClientError, not a cancel.
"""

from __future__ import annotations

import asyncio

from kbroker.replica.broker_client import BrokerClient, BrokerClientError

_MAX_RESPONSE_BYTES = 16 << 20


class InterBrokerChannel:
    def __init__(self, node_id: int, timeout_s: float, purpose: str,
                 security=lambda: None):
        """``security``: returns the inter-broker TLS/SASL settings (an InterBrokerSecurity,
        None for PLAINTEXT) when a connection opens; the replica manager learns them only when
        replication starts."""
        self.node_id = node_id
        self.timeout_s = timeout_s
        self.purpose = purpose
        self._security = security
        self._clients: dict[int, tuple[BrokerClient, asyncio.Lock]] = {}
        self._in_flight: set[asyncio.Task] = set()
        self._closed = False

    async def request(self, broker_id: int, endpoint: tuple[str, int], api_name: str, request):
        """One request to ``broker_id`` on its connection (opened when needed); raises
        BrokerClientError (the connection is then closed), also when the channel is closed."""
        if self._closed:
            raise BrokerClientError(f"{self.purpose} channel closed (the broker is stopping)")
        task = asyncio.get_running_loop().create_task(
            self._request(broker_id, endpoint, api_name, request),
            name=f"{self.purpose} {api_name} to broker {broker_id}")
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)
        try:
            return await task  # our own cancel cancels the task too
        except asyncio.CancelledError:
            if task.cancelled() and asyncio.current_task().cancelling() == 0:
                # close() cancelled the request, not our caller's owner.
                raise BrokerClientError(f"{api_name} to broker {broker_id} abandoned: "
                                        f"the broker is stopping") from None
            raise

    async def _request(self, broker_id: int, endpoint: tuple[str, int], api_name: str, request):
        entry = self._clients.get(broker_id)
        if entry is None or (entry[0].host, entry[0].port) != tuple(endpoint):
            if entry is not None:
                entry[0].close()
            entry = self._clients[broker_id] = (
                BrokerClient(endpoint[0], endpoint[1],
                             client_id=f"broker-{self.node_id}-{self.purpose}",
                             timeout_s=self.timeout_s, max_response_bytes=_MAX_RESPONSE_BYTES,
                             security=self._security()),
                asyncio.Lock())
        client, lock = entry
        async with lock:
            try:
                if not client.connected:
                    await client.connect()
                return await client.request(api_name, request)
            except BrokerClientError:
                client.close()
                raise
            except asyncio.CancelledError:
                client.close()  # a request cut mid-frame leaves the stream unusable
                raise

    def close(self) -> None:
        """Refuse new requests, cancel those in flight, close every connection."""
        self._closed = True
        for task in list(self._in_flight):
            task.cancel()
        for client, _ in self._clients.values():
            client.close()
        self._clients.clear()
