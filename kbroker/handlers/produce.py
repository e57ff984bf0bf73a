"""Produce (key 0), v3-13; v0-2 are advertised but rejected (KAFKA-18659, see api_versions).

Each partition's records go to its log as bytes: the log validates batches from their headers
(CRC, magic 2, sizes, counts, timestamps, idempotent sequences) and assigns offsets in place.
Per-partition errors carry Kafka's code and, from v8, a message. Behaviour by acks:
- acks=1 and acks=-1: answered once the append lands (a single node is its own ISR, so the
  high watermark has already moved); multi-broker acks=-1 will wait for the ISR here.
- acks=0: no answer; if any partition failed, the connection is closed so the client notices,
  as Kafka does.
- any other acks: INVALID_REQUIRED_ACKS for every partition.
v13 names topics by id (UNKNOWN_TOPIC_ID when unknown). Not supported yet: transactional produce
(a transactional id gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED; clients do not get that far, since
FindCoordinator for transactions is not served).
"""

from __future__ import annotations

import logging
import time

from kbroker.handlers import handles
from kbroker.handlers.context import CloseConnection
from kbroker.handlers.topic_ids import resolve_topic
from kbroker.protocol.errors import Errors, KafkaError

log = logging.getLogger("kbroker.produce")


@handles("Produce")
def handle_produce(ctx, request):
    from kbroker.protocol.messages.produce import ProduceResponse as R

    acks = request.acks
    now_ms = int(time.time() * 1000)
    by_id = ctx.api_version >= 13
    failed = False
    responses = []
    for topic_data in request.topic_data:
        name, unknown = resolve_topic(ctx.metadata, by_id, topic_data.name, topic_data.topic_id)
        partition_responses = []
        for data in topic_data.partition_data:
            out = R.PartitionProduceResponse(index=data.index, base_offset=-1,
                                             log_append_time_ms=-1, log_start_offset=-1)
            partition = ctx.partitions.get(name, data.index) if name is not None else None
            try:
                if acks not in (0, 1, -1):
                    raise KafkaError(Errors.INVALID_REQUIRED_ACKS, f"acks={acks} is not 0, 1 or -1")
                if partition is None:
                    raise KafkaError(unknown, f"this broker has no partition {data.index} of "
                                              f"topic {name or topic_data.topic_id}")
                if request.transactional_id is not None:
                    raise KafkaError(Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                     "transactions are not supported by this broker yet")
                if data.records is None or len(data.records) == 0:
                    raise KafkaError(Errors.INVALID_RECORD, "no record batch in the request")
                if acks == -1:
                    check_min_insync_replicas(partition)
                result, _committed = partition.append(data.records, now_ms)
                out.base_offset = result.first_offset
                out.log_append_time_ms = result.log_append_time
                out.log_start_offset = result.log_start_offset
            except KafkaError as exc:
                failed = True
                out.error_code = exc.error.code
                out.error_message = exc.message
                # KIP-467: which records of the batch were at fault (v8+; ignorable before).
                out.record_errors = [
                    R.BatchIndexAndErrorMessage(batch_index=index, batch_index_error_message=text)
                    for index, text in getattr(exc, "record_errors", ())]
                if exc.error not in (Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.UNKNOWN_TOPIC_ID,
                                     Errors.NOT_LEADER_OR_FOLLOWER):
                    log.info("produce to %s-%d from %s rejected: %s: %s", name, data.index,
                             ctx.client_id, exc.error.name, exc.message)
            partition_responses.append(out)
        responses.append(R.TopicProduceResponse(name=topic_data.name, topic_id=topic_data.topic_id,
                                                partition_responses=partition_responses))
    if acks == 0:
        if failed:
            raise CloseConnection()
        return None
    return R(responses=responses, throttle_time_ms=0)


def check_min_insync_replicas(partition) -> None:
    """acks=all needs min.insync.replicas in-sync replicas; on a single node the ISR is this broker
    alone, so a topic asking for more is refused as Kafka refuses it (Partition.appendRecordsToLeader)."""
    required = partition.log.config.min_insync_replicas
    if required > 1:
        raise KafkaError(Errors.NOT_ENOUGH_REPLICAS,
                         f"The size of the current ISR : 1 is insufficient to satisfy the min.isr "
                         f"requirement of {required} for partition {partition.topic}-{partition.index}")
