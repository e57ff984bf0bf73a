"""The latest offset of a partition wherever it is led (Kafka's NetworkPartitionMetadataClient),
for the lag DescribeShareGroupOffsets answers.

The share group's coordinator need not lead, or even host, the partitions of its group, so it
asks each partition's leader with ListOffsets (latest timestamp, read_uncommitted) over the
inter-broker listener, as Kafka does. A partition this broker leads is answered from its own log.
Errors are per partition, as Kafka's: LEADER_NOT_AVAILABLE without a leader,
UNKNOWN_TOPIC_OR_PARTITION for a partition the image does not have, the leader's own error code,
NETWORK_EXCEPTION when the leader cannot be reached.
"""

from __future__ import annotations

from kbroker.coordinator.interbroker import InterBrokerChannel
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.protocol.messages.list_offsets import ListOffsetsRequest
from kbroker.replica.broker_client import BrokerClientError

LATEST_TIMESTAMP = -1
READ_UNCOMMITTED = 0
CONSUMER_REPLICA_ID = -1


class PartitionEndOffsets:
    def __init__(self, node_id: int, replicas, image, inter_broker_listener: str,
                 timeout_s: float, security=lambda: None):
        """``replicas``: the ReplicaManager; ``image()``: the current metadata image;
        ``security()``: the inter-broker TLS/SASL settings when a connection opens."""
        self.node_id = node_id
        self.replicas = replicas
        self.image = image
        self.listener = inter_broker_listener
        self.channel = InterBrokerChannel(node_id, timeout_s, "end-offsets", security)

    def close(self) -> None:
        self.channel.close()

    async def latest(self, topic: str, index: int) -> tuple[Errors, int]:
        """(error, the offset the next record appended to ``topic``-``index`` gets)."""
        partition = self.replicas.get(topic, index)
        if partition is not None:
            try:
                found = partition.offset_for_timestamp(LATEST_TIMESTAMP, False, -1)
                return Errors.NONE, found[0] if found is not None else 0
            except KafkaError as exc:
                if exc.error is not Errors.NOT_LEADER_OR_FOLLOWER:
                    return exc.error, -1
        image = self.image()
        metadata = image.topic(topic)
        if metadata is None or index >= metadata.num_partitions:
            return Errors.UNKNOWN_TOPIC_OR_PARTITION, -1
        leader = metadata.state(index).leader
        endpoint = self._endpoint(image, leader) if leader != self.node_id else None
        if endpoint is None:  # no leader, or this broker by the image but not yet by its log
            return Errors.LEADER_NOT_AVAILABLE, -1
        R = ListOffsetsRequest
        request = R(replica_id=CONSUMER_REPLICA_ID, isolation_level=READ_UNCOMMITTED, topics=[
            R.ListOffsetsTopic(name=topic, partitions=[R.ListOffsetsPartition(
                partition_index=index, current_leader_epoch=-1, timestamp=LATEST_TIMESTAMP)])])
        try:
            response = await self.channel.request(leader, endpoint, "ListOffsets", request)
        except BrokerClientError:
            return Errors.NETWORK_EXCEPTION, -1
        for answered in response.topics:
            for p in answered.partitions:
                if answered.name == topic and p.partition_index == index:
                    return Errors.for_code(p.error_code), p.offset
        return Errors.UNKNOWN_TOPIC_OR_PARTITION, -1

    def _endpoint(self, image, broker_id: int):
        broker = image.brokers.get(broker_id)
        if broker is None or not broker.endpoints:
            return None
        endpoint = broker.endpoints.get(self.listener)
        return endpoint if endpoint is not None else next(iter(broker.endpoints.values()))
