"""Which dead-letter records a DLQ partition holds already (kbroker's addition to KIP-1191).

A share partition that loads records persisted in ARCHIVING writes them to the DLQ again
(:mod:`kbroker.share.dlq`): the broker that had them may have stopped before their DLQ write, or
after it but before their ARCHIVED write. Kafka 4.4 resends them all, so the second case writes
a record twice. Before resending, the writer asks :func:`already_written` which of them the DLQ
partition has: it reads the partition from the first record of the last :data:`WINDOW_MS` (24 h)
to its high watermark, at most :data:`MAX_SCAN_BYTES` (64 MiB), and matches the context headers,
which name the group, the source topic, partition and offset, and the delivery count exactly.

The partition is read where it is led: the local replica, or its leader through ListOffsets and
Fetch over the inter-broker listener (``channel``). Anything that goes wrong (leadership moving,
a leader out of reach, a batch that does not decode) gives up the scan: the records are then
resent, Kafka's at-least-once, never lost.
"""

from __future__ import annotations

import time

from kbroker.protocol.records import decode_records, iter_batches

WINDOW_MS = 24 * 3600 * 1000
MAX_SCAN_BYTES = 64 << 20
READ_BYTES = 1 << 20
FETCH_WAIT_MS = 0
CONSUMER = -1


class ScanFailed(Exception):
    """The partition could not be read; its records are resent."""


async def already_written(identity: tuple[str, str, int], wanted: set[tuple[int, int]],
                          chunks) -> set[tuple[int, int]]:
    """The (offset, delivery count) pairs of ``wanted`` whose record is in the chunks (an async
    iterator of raw record batches), for ``identity`` = (group, source topic, source partition).
    """
    group, topic, partition = identity
    expected = (group.encode(), topic.encode(), str(partition).encode())
    texts = {(str(o).encode(), str(c).encode()): (o, c) for o, c in wanted}
    found: set[tuple[int, int]] = set()
    async for chunk in chunks:
        for header in iter_batches(memoryview(chunk), allow_partial_tail=True):
            if header.is_control:
                continue
            for record in decode_records(header, MAX_SCAN_BYTES):
                named = dict(record.headers)
                if (named.get("__dlq.errors.group"), named.get("__dlq.errors.topic"),
                        named.get("__dlq.errors.partition")) != expected:
                    continue
                hit = texts.get((named.get("__dlq.errors.offset"),
                                 named.get("__dlq.errors.delivery.count")))
                if hit is not None:
                    found.add(hit)
        if len(found) == len(wanted):
            break
    return found


async def local_chunks(partition):
    """The local replica's batches from the window's start to its high watermark."""
    found = partition.offset_for_timestamp(int(time.time() * 1000) - WINDOW_MS)
    offset = max(found[0] if found is not None else partition.high_watermark,
                 partition.log_start_offset)
    scanned = 0
    while offset < partition.high_watermark and scanned < MAX_SCAN_BYTES:
        result = partition.read(offset, READ_BYTES)
        if not result.regions:
            return
        data = b"".join(region.read() for region in result.regions)
        scanned += len(data)
        following = _next_offset(data)
        if following is None or following <= offset:
            return
        yield data
        offset = following


async def remote_chunks(channel, leader: int, endpoint, topic, index: int):
    """The leader's batches of ``topic``-``index`` (TopicMetadata) from the window's start to
    its high watermark, through ListOffsets and Fetch. Raises ScanFailed."""
    from kbroker.protocol.messages.fetch import FetchRequest as F
    from kbroker.protocol.messages.list_offsets import ListOffsetsRequest as L
    from kbroker.replica.broker_client import BrokerClientError

    try:
        listed = await channel.request(leader, endpoint, "ListOffsets", L(
            replica_id=CONSUMER, isolation_level=0, topics=[L.ListOffsetsTopic(
                name=topic.name, partitions=[L.ListOffsetsPartition(
                    partition_index=index, current_leader_epoch=-1,
                    timestamp=int(time.time() * 1000) - WINDOW_MS)])]))
        answer = listed.topics[0].partitions[0]
        if answer.error_code != 0:
            raise ScanFailed(f"ListOffsets error {answer.error_code}")
        offset = answer.offset
        if offset < 0:  # nothing that recent
            return
        scanned = 0
        while scanned < MAX_SCAN_BYTES:
            fetched = await channel.request(leader, endpoint, "Fetch", F(
                replica_id=CONSUMER, max_wait_ms=FETCH_WAIT_MS, min_bytes=0,
                max_bytes=READ_BYTES, isolation_level=0, session_id=0, session_epoch=-1,
                topics=[F.FetchTopic(topic=topic.name, topic_id=topic.topic_id, partitions=[
                    F.FetchPartition(partition=index, current_leader_epoch=-1,
                                     fetch_offset=offset, log_start_offset=-1,
                                     partition_max_bytes=READ_BYTES)])]))
            data = fetched.responses[0].partitions[0]
            if data.error_code != 0:
                raise ScanFailed(f"Fetch error {data.error_code}")
            records = bytes(data.records or b"")
            following = _next_offset(records)
            if following is None or following <= offset:
                return
            scanned += len(records)
            yield records
            offset = following
            if offset >= data.high_watermark:
                return
    except BrokerClientError as exc:
        raise ScanFailed(str(exc)) from None


def _next_offset(data: bytes) -> int | None:
    """The offset after the last whole batch of ``data``; None when there is none."""
    following = None
    for header in iter_batches(memoryview(data), allow_partial_tail=True):
        following = header.next_offset
    return following
