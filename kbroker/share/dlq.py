"""The share groups' dead-letter-queue writer (KIP-1191, as Kafka 4.4.0 has it).

A share partition whose group has ``errors.deadletterqueue.topic.name`` set (and the cluster's
``share.version`` at 2 or more) moves a record rejected by a consumer, or out of delivery
attempts, to ARCHIVING, persists that, and hands it here (:mod:`kbroker.share.manager`). This
module writes one record per source offset to the DLQ topic, and the share partition then
archives the offsets whatever came of it.

The record, as Kafka's ``ShareGroupDLQStateManager`` writes it: to partition
``source partition % DLQ partitions``, timestamped now (CreateTime), key and value copied from
the source record only with ``errors.deadletterqueue.copy.record.enable`` (null otherwise, and
when the source record is gone or larger than the DLQ topic's ``max.message.bytes``), the
source's headers never, and six UTF-8 headers in this order: ``__dlq.errors.topic``,
``.partition``, ``.offset``, ``.group``, ``.delivery.count``, ``.message``. Uncompressed
batches without a producer id, at most ``max.message.bytes`` each, acks=all.

The topic is checked at each write, in Kafka's order (the first failure wins, and no record is
written): no name; a name starting with ``__``; an existing topic without
``errors.deadletterqueue.group.enable=true``; a missing topic while the broker's
``errors.deadletterqueue.auto.create.topics.enable`` is false; a name without the broker's
``errors.deadletterqueue.topic.name.prefix`` (``dlq.`` by default; empty: any name). With
auto-creation the topic is created with the broker's default partitions and replication factor
and ``errors.deadletterqueue.group.enable=true``, ``message.timestamp.type=CreateTime``.

Where the DLQ partition is led: on this broker the batch is appended to the local replica; on
another, it goes there as a Produce request over the inter-broker listener (``channel``).
NOT_LEADER_OR_FOLLOWER, an unreachable leader and a timeout are retried (5 attempts, back-off
from 1 s doubling up to 30 s, 20% jitter, as Kafka), and so are an unknown topic (the leader's
metadata lagging) and too few in-sync replicas; any other error ends the write.

Duplicates after a fault (kbroker's addition; Kafka's design is at-least-once): a share
partition that loads records persisted in ARCHIVING resends them, because the broker that
wrote them may have stopped between the DLQ write and the ARCHIVED write. Before resending,
:meth:`DeadLetterWriter.write` with ``resumed=True`` reads the DLQ partition (here or at its
leader) for records it has already and leaves those out (:mod:`kbroker.share.dlq_scan`).

Imports protocol, metadata types and the replica layer's client; the server hands in the image,
the replica manager, the controller and the channel.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import defaultdict
from dataclasses import dataclass

from kbroker.metadata.topic_policy import NewTopic
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.protocol.records import (CREATE_TIME, RecordBatchBuilder, decode_records,
                                      iter_batches)

log = logging.getLogger("kbroker.share.dlq")

HEADER_TOPIC = "__dlq.errors.topic"
HEADER_PARTITION = "__dlq.errors.partition"
HEADER_OFFSET = "__dlq.errors.offset"
HEADER_GROUP = "__dlq.errors.group"
HEADER_DELIVERY_COUNT = "__dlq.errors.delivery.count"
HEADER_MESSAGE = "__dlq.errors.message"

TOPIC_ENABLE = "errors.deadletterqueue.group.enable"
AUTO_CREATE = "errors.deadletterqueue.auto.create.topics.enable"
PREFIX = "errors.deadletterqueue.topic.name.prefix"

MAX_ATTEMPTS = 5
BACKOFF_MS, BACKOFF_MAX_MS, JITTER = 1000, 30000, 0.2
PRODUCE_TIMEOUT_MS = 30000
BATCH_OVERHEAD = 61  # a v2 batch's header
RECORD_OVERHEAD = 21  # a record's attributes, deltas and length varints, at most
READ_BYTES = 1 << 20
# Kafka retries NOT_LEADER_OR_FOLLOWER, disconnects and timeouts; kbroker also waits out a
# leader whose metadata lags (a topic just auto-created is unknown there for a moment) and too
# few in-sync replicas, rather than lose the record.
_RETRIABLE = (Errors.NOT_LEADER_OR_FOLLOWER, Errors.LEADER_NOT_AVAILABLE,
              Errors.REQUEST_TIMED_OUT, Errors.NETWORK_EXCEPTION,
              Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.UNKNOWN_TOPIC_ID,
              Errors.NOT_ENOUGH_REPLICAS, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND)


class DeadLetterError(Exception):
    """The write did not happen (the reason is the message, Kafka's wording where it has one);
    the records are archived anyway."""


@dataclass(frozen=True)
class DeadLetter:
    """One source record on its way to the queue."""
    offset: int
    delivery_count: int
    cause: str  # the __dlq.errors.message header


@dataclass
class GroupMeters:
    """Kafka's ShareGroupMetrics DLQ meters of one group (as counters)."""
    records: int = 0          # DeadLetterQueueRecordCount
    produces: int = 0         # DeadLetterQueueTotalProduceRequestsPerSec
    failed_produces: int = 0  # DeadLetterQueueFailedProduceRequestsPerSec


class DeadLetterWriter:
    def __init__(self, node_id: int, config, image, replicas, controller, channel=None,
                 listener: str | None = None, sleep=asyncio.sleep):
        """``image()``: the current metadata image; ``replicas``: the ReplicaManager;
        ``controller``: creates topics; ``channel``: an InterBrokerChannel for a DLQ partition
        led elsewhere (None on a single node); ``listener``: the inter-broker listener."""
        self.node_id = node_id
        self.config = config
        self.image = image
        self.replicas = replicas
        self.controller = controller
        self.channel = channel
        self.listener = listener
        self._sleep = sleep
        self.meters: dict[str, GroupMeters] = defaultdict(GroupMeters)

    def enabled(self) -> bool:
        """Kafka's gate: the finalized ``share.version`` supports DLQs (level 2 and up; a
        cluster without a finalized level has Kafka 4.4's default, 2)."""
        return self.image().finalized_features.get("share.version", 2) >= 2

    # --- the topic -------------------------------------------------------------------------------

    def check_topic(self, group_id: str, name: str):
        """The DLQ topic's metadata, None when it is missing and may be created; raises
        DeadLetterError with Kafka's message for a topic it refuses."""
        if not name:
            raise DeadLetterError(f"Configured DLQ topic name in share group: {group_id} "
                                  f"is empty.")
        if name.startswith("__"):
            raise DeadLetterError(f"Configured DLQ topic name in share group: {group_id} cannot "
                                  f"start with __, topic: {name}.")
        topic = self.image().topic(name)
        if topic is not None and str(topic.configs.get(TOPIC_ENABLE, "false")).strip().lower() \
                != "true":
            raise DeadLetterError(f"DLQ is not enabled on configured DLQ topic for share group: "
                                  f"{group_id}, topic: {name}.")
        if topic is None and not self.config.get(AUTO_CREATE):
            raise DeadLetterError(f"DLQ topic does not exist and auto create is disabled on "
                                  f"cluster for share group: {group_id}, topic: {name}.")
        prefix = self.config.get(PREFIX) or ""
        if prefix and not name.startswith(prefix):
            raise DeadLetterError(f"Configured DLQ topic name does not comply with the DLQ topic "
                                  f"prefix in share group: {group_id}, topic: {name}, "
                                  f"prefix: {prefix}.")
        return topic

    async def _topic(self, group_id: str, name: str):
        topic = self.check_topic(group_id, name)
        if topic is not None:
            return topic
        wanted = NewTopic(name, configs={TOPIC_ENABLE: "true",
                                         "message.timestamp.type": "CreateTime"})
        for attempt in range(MAX_ATTEMPTS):
            try:
                created = await self.controller.create_topic(wanted)
                log.info("created DLQ topic %s for share group %s", name, group_id)
            except KafkaError as exc:
                if exc.error not in (Errors.TOPIC_ALREADY_EXISTS,
                                     Errors.THROTTLING_QUOTA_EXCEEDED):
                    raise DeadLetterError(f"Unable to create DLQ topic for {group_id} using DLQ "
                                          f"topic {name}: {exc.error.name}.") from None
                created = None
            topic = self.image().topic(name)
            if topic is not None:
                return self.check_topic(group_id, name)
            if created is not None and attempt == MAX_ATTEMPTS - 1:
                return created
            await self._backoff(attempt)
        raise DeadLetterError(f"DLQ topic {name} of share group {group_id} did not appear")

    # --- writing ---------------------------------------------------------------------------------

    async def write(self, group_id: str, settings, source, letters: list[DeadLetter],
                    resumed: bool = False) -> int:
        """Write ``letters`` of the source partition (its replica, ``source``) to the group's
        DLQ; the number of records written (fewer than asked when a resumed write found some
        there already). Raises DeadLetterError when nothing more can be written."""
        if not letters:
            return 0
        name = settings.dlq_topic_name
        topic = await self._topic(group_id, name)
        index = source.index % topic.num_partitions
        if resumed:
            letters = await self._not_yet_written(group_id, source, topic, index, letters)
            if not letters:
                return 0
        max_bytes = self._max_message_bytes(topic)
        originals = self._originals(source, letters, max_bytes) if settings.dlq_copy_record \
            else {}
        now_ms = int(time.time() * 1000)
        written = 0
        for batch, count in self._batches(group_id, source, letters, originals, max_bytes, now_ms):
            await self._produce(group_id, name, index, batch)
            self.meters[group_id].records += count
            written += count
        return written

    def _max_message_bytes(self, topic) -> int:
        value = topic.configs.get("max.message.bytes")
        try:
            return int(value) if value is not None else self.config.get("message.max.bytes")
        except ValueError:
            return self.config.get("message.max.bytes")

    def _originals(self, source, letters: list[DeadLetter], max_bytes: int) -> dict:
        """offset -> (key, value) of the source records still in the log (below the high
        watermark) and small enough for the DLQ topic; a failed read gives none (headers-only
        records, as Kafka)."""
        wanted = {letter.offset for letter in letters}
        first, last = min(wanted), max(wanted)
        found = {}
        offset = first
        try:
            while offset <= last:
                result = source.read(offset, READ_BYTES)
                if not result.regions:
                    break
                progressed = offset
                for region in result.regions:
                    for header in iter_batches(memoryview(region.read())):
                        progressed = max(progressed, header.next_offset)
                        if header.is_control or header.last_offset < first:
                            continue
                        for record in decode_records(header, max_bytes):
                            at = record.offset(header)
                            if at in wanted and _size(record.key, record.value, ()) \
                                    + BATCH_OVERHEAD <= max_bytes:
                                found[at] = (record.key, record.value)
                if progressed <= offset:
                    break
                offset = progressed
        except Exception as exc:  # noqa: BLE001 - any read failure means headers only
            log.warning("Unable to fetch original record data of %s-%d: %s; DLQ records will "
                        "be produced with headers only for this round.", source.topic,
                        source.index, exc)
            return {}
        return found

    def _batches(self, group_id, source, letters, originals, max_bytes, now_ms):
        """(batch bytes, record count): records in offset order, a batch holding as many as
        fit ``max_bytes`` (always one)."""
        builder, size = None, BATCH_OVERHEAD
        for letter in letters:
            key, value = originals.get(letter.offset, (None, None))
            headers = dead_letter_headers(group_id, source.topic, source.index, letter)
            record_size = _size(key, value, headers)
            if builder is not None and size + record_size > max_bytes:
                yield bytearray(builder.build()), len(builder)
                builder, size = None, BATCH_OVERHEAD
            if builder is None:
                builder = RecordBatchBuilder(timestamp_type=CREATE_TIME)
            builder.append(now_ms, key, value, headers)
            size += record_size
        if builder is not None:
            yield bytearray(builder.build()), len(builder)

    async def _produce(self, group_id: str, name: str, index: int, batch: bytearray) -> None:
        meters = self.meters[group_id]
        meters.produces += 1
        for attempt in range(MAX_ATTEMPTS):
            error, message = await self._produce_once(name, index, bytearray(batch))
            if error == Errors.NONE:
                return
            if error not in _RETRIABLE:
                meters.failed_produces += 1
                raise DeadLetterError(f"Unable to produce to DLQ topic {name}-{index}: "
                                      f"{error.name} {message or ''}".rstrip())
            log.info("DLQ produce to %s-%d failed (%s), retrying", name, index, error.name)
            if attempt < MAX_ATTEMPTS - 1:
                await self._backoff(attempt)
        meters.failed_produces += 1
        raise DeadLetterError("Exhausted max retries to produce to DLQ topic without success.")

    async def _produce_once(self, name: str, index: int, batch: bytearray):
        """(error, message) of one produce, acks=all, to wherever the partition is led."""
        local = self.replicas.get(name, index)
        topic = self.image().topic(name)
        if topic is None or index >= topic.num_partitions:
            return Errors.UNKNOWN_TOPIC_OR_PARTITION, None
        leader = topic.state(index).leader
        if leader == self.node_id:
            if local is None:
                return Errors.NOT_LEADER_OR_FOLLOWER, None  # the image is ahead of the replica
            return await _append_locally(local, batch)
        return await self._produce_remotely(topic, index, leader, batch)

    async def _produce_remotely(self, topic, index: int, leader: int, batch: bytearray):
        from kbroker.protocol.messages.produce import ProduceRequest as P
        from kbroker.replica.broker_client import BrokerClientError

        endpoint = self._endpoint(leader)
        if endpoint is None:
            return Errors.LEADER_NOT_AVAILABLE, None
        request = P(transactional_id=None, acks=-1, timeout_ms=PRODUCE_TIMEOUT_MS, topic_data=[
            P.TopicProduceData(name=topic.name, topic_id=topic.topic_id, partition_data=[
                P.PartitionProduceData(index=index, records=bytes(batch))])])
        try:
            response = await self.channel.request(leader, endpoint, "Produce", request)
        except BrokerClientError:
            return Errors.NETWORK_EXCEPTION, None
        for answered in response.responses:
            for p in answered.partition_responses:
                if p.index == index:
                    return Errors.for_code(p.error_code), p.error_message
        return Errors.UNKNOWN_SERVER_ERROR, "no answer for the partition"

    async def _backoff(self, attempt: int) -> None:
        delay = min(BACKOFF_MS * (2 ** attempt), BACKOFF_MAX_MS)
        delay *= 1 + random.uniform(-JITTER, JITTER)
        await self._sleep(delay / 1000)

    # --- duplicates after a fault ----------------------------------------------------------------

    async def _not_yet_written(self, group_id, source, topic, index, letters):
        """``letters`` less those whose record the DLQ partition has already
        (:mod:`kbroker.share.dlq_scan`); all of them when it cannot be read."""
        from kbroker.share import dlq_scan

        name = topic.name
        partition = self.replicas.get(name, index)
        leader = topic.state(index).leader
        if leader == self.node_id and partition is not None:
            chunks = dlq_scan.local_chunks(partition)
        else:
            endpoint = self._endpoint(leader)
            if endpoint is None:
                return letters
            chunks = dlq_scan.remote_chunks(self.channel, leader, endpoint, topic, index)
        wanted = {(letter.offset, letter.delivery_count) for letter in letters}
        try:
            found = await dlq_scan.already_written((group_id, source.topic, source.index),
                                                   wanted, chunks)
        except Exception as exc:  # noqa: BLE001 - not the leader any more, a bad batch...:
            # resend them all, as Kafka would (a duplicate rather than a loss)
            log.info("could not read DLQ partition %s-%d for records already written: %s",
                     name, index, exc)
            return letters
        kept = [letter for letter in letters
                if (letter.offset, letter.delivery_count) not in found]
        if len(kept) < len(letters):
            log.info("share group %s: %d record(s) of %s-%d were in DLQ %s-%d already; not "
                     "written again", group_id, len(letters) - len(kept), source.topic,
                     source.index, name, index)
        return kept

    def _endpoint(self, broker_id):
        """(host, port) of a live broker on the inter-broker listener; None when unknown or
        without a channel (a single node)."""
        broker = self.image().brokers.get(broker_id) if broker_id is not None else None
        if broker is None or not broker.endpoints or self.channel is None:
            return None
        return broker.endpoints.get(self.listener) or next(iter(broker.endpoints.values()))


def dead_letter_headers(group_id: str, topic: str, partition: int, letter: DeadLetter):
    """The six context headers, in Kafka's order, as UTF-8."""
    return [(HEADER_TOPIC, topic.encode()),
            (HEADER_PARTITION, str(partition).encode()),
            (HEADER_OFFSET, str(letter.offset).encode()),
            (HEADER_GROUP, group_id.encode()),
            (HEADER_DELIVERY_COUNT, str(letter.delivery_count).encode()),
            (HEADER_MESSAGE, letter.cause.encode())]


async def _append_locally(partition, batch: bytearray):
    try:
        partition.check_min_insync_replicas()
        _, committed = partition.append(batch, int(time.time() * 1000))
    except KafkaError as exc:
        return exc.error, exc.message
    try:
        await asyncio.wait_for(asyncio.shield(committed), PRODUCE_TIMEOUT_MS / 1000)
    except asyncio.TimeoutError:
        return Errors.REQUEST_TIMED_OUT, None
    except KafkaError as exc:
        return exc.error, exc.message
    return Errors.NONE, None


def _size(key, value, headers) -> int:
    return (RECORD_OVERHEAD + len(key or b"") + len(value or b"")
            + sum(len(k) + len(v or b"") + 10 for k, v in headers))
