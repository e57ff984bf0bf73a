"""WriteTxnMarkers to a remote partition leader (Kafka's TransactionMarkerChannelManager), on an
:class:`~kbroker.coordinator.interbroker.InterBrokerChannel` of its own: the markers of every
partition a transaction has on one broker go in one request; a broker that cannot be reached
answers every partition with NOT_LEADER_OR_FOLLOWER, so the caller re-resolves the leader and
retries after a back-off.
"""

from __future__ import annotations

import logging

from kbroker.coordinator.interbroker import InterBrokerChannel
from kbroker.protocol.errors import Errors
from kbroker.protocol.messages.write_txn_markers import WriteTxnMarkersRequest as Req
from kbroker.replica.broker_client import BrokerClientError

log = logging.getLogger("kbroker.coordinator.txn")


class MarkerChannel(InterBrokerChannel):
    async def send(self, broker_id: int, endpoint: tuple[str, int], producer_id: int,
                   producer_epoch: int, coordinator_epoch: int, commit: bool,
                   partitions: list, transaction_version: int = 0) -> dict:
        """Write one marker per (topic, index) of ``partitions`` on ``broker_id``; returns
        {(topic, index): Errors}. ``transaction_version`` goes in WriteTxnMarkers v2."""
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        request = Req(markers=[Req.WritableTxnMarker(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
            coordinator_epoch=coordinator_epoch, transaction_version=transaction_version,
            topics=[Req.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                    for t, ps in by_topic.items()])])
        try:
            response = await self.request(broker_id, endpoint, "WriteTxnMarkers", request)
        except BrokerClientError as exc:
            log.info("markers to broker %d: %s; retrying after re-resolving leaders",
                     broker_id, exc)
            return {tp: Errors.NOT_LEADER_OR_FOLLOWER for tp in partitions}
        results = {tp: Errors.UNKNOWN_SERVER_ERROR for tp in partitions}  # unanswered: retry
        for marker in response.markers:
            for topic in marker.topics:
                for p in topic.partitions:
                    if (topic.name, p.partition_index) in results:
                        results[(topic.name, p.partition_index)] = Errors.for_code(p.error_code)
        return results
