"""Produce (key 0), v3-13; v0-2 are advertised but rejected (KAFKA-18659, see api_versions).

Each partition's records go to its log as bytes: the log validates batches from their headers
(CRC, magic 2, sizes, counts, timestamps, idempotent sequences) and assigns offsets in place.
Per-partition errors carry Kafka's code and, from v8, a message. Behaviour by acks:
- acks=1: answered once the append lands.
- acks=-1: answered when the high watermark passes every appended batch (each partition's
  committed future); a partition not committed within ``timeout_ms`` gets REQUEST_TIMED_OUT (its
  records stay on the log, as in Kafka). A single node is its own ISR, so the futures are done
  when the appends return and the answer is immediate; a closed connection stops the wait.
- acks=0: no answer; if any partition failed, the connection is closed so the client notices,
  as Kafka does.
- any other acks: INVALID_REQUIRED_ACKS for every partition.
v3-6 may not carry ZStandard batches (UNSUPPORTED_COMPRESSION_TYPE, KIP-110).
v13 names topics by id (UNKNOWN_TOPIC_ID when unknown). In a cluster, a partition this broker
does not lead answers NOT_LEADER_OR_FOLLOWER with ``current_leader`` and the leader's
``node_endpoints`` (v10+, KIP-951); an acks=-1 produce whose ISR shrank below
``min.insync.replicas`` while it waited gets NOT_ENOUGH_REPLICAS_AFTER_APPEND. Transactional batches are appended like
idempotent ones; the log's producer state opens the producer's transaction (the LSO stops there).
Before a transactional batch opens a transaction on a partition, the coordinator confirms the
partition is in it (KIP-890 part 1, v0-11) or, from v12 (transactions v2, KIP-890 part 2), adds
it; the request then waits for that add before its appends
(:mod:`kbroker.handlers.txn_verification`).

Order: the produces of one connection append in the order they arrived, as on Kafka, which reads
a connection's next request only after answering the previous one. A produce that must wait
before appending (the add above) takes a turn in its connection's
:class:`~kbroker.handlers.session.ProduceOrder`, and every later produce of that connection waits
for it; otherwise a later batch of the same producer would reach the log first and be refused
OUT_OF_ORDER_SEQUENCE_NUMBER (issue 21).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time

from kbroker.security.authorizer import Op, ResourceType, allowed, check
from kbroker.handlers import handles
from kbroker.handlers.context import CloseConnection
from kbroker.handlers.leader_hint import current_leader, missing_partition_error, node_endpoints
from kbroker.handlers.topic_ids import resolve_topic
from kbroker.handlers import txn_verification as txn_check
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.protocol.records import zstd_batch

log = logging.getLogger("kbroker.produce")
DENIED = Errors.TOPIC_AUTHORIZATION_FAILED


@handles("Produce")
def handle_produce(ctx, request):
    order = ctx.session.produce_order if ctx.session is not None else None
    if order is not None and order.waiting():
        before, turn = order.take_turn()
        return _produce_in_turn(ctx, request, turn, before=before)
    confirmed = _confirm_transactional_batches(ctx, request)
    if inspect.isawaitable(confirmed):
        turn = order.take_turn()[1] if order is not None else None
        return _produce_in_turn(ctx, request, turn, confirmed=confirmed)
    return _produce(ctx, request, confirmed)


def _confirm_transactional_batches(ctx, request):
    """KIP-890 for the request's transactional batches that would open a transaction:
    {(topic, index): (client error, guard)}, or an awaitable of it
    (:func:`kbroker.handlers.txn_verification.confirm`)."""
    if (request.transactional_id is None or ctx.txn is None or request.acks not in (0, 1, -1)
            or not allowed(ctx, Op.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)):
        return {}  # refused below, partition by partition
    writable = []
    for topic_data in request.topic_data:
        name, _ = resolve_topic(ctx.metadata, ctx.api_version >= 13, topic_data.name,
                                topic_data.topic_id)
        if name is None or not allowed(ctx, Op.WRITE, ResourceType.TOPIC, name):
            continue
        for data in topic_data.partition_data:
            partition = ctx.partitions.get(name, data.index)
            if partition is not None:
                writable.append(((name, data.index), partition, data.records))
    return txn_check.confirm(ctx, request.transactional_id, writable)


async def _produce_in_turn(ctx, request, turn, *, before=None, confirmed=None):
    """A produce that appends later: after the earlier produce of its connection (``before``),
    then after the coordinator confirmed its transactional batches (``confirmed``). ``turn``
    ends once its appends are done, whatever happened; the acks=-1 wait that may follow is not
    part of it."""
    try:
        if before is not None:
            await asyncio.wait([before])
            confirmed = _confirm_transactional_batches(ctx, request)
        if inspect.isawaitable(confirmed):
            confirmed = await confirmed
        response = _produce(ctx, request, confirmed)
    finally:
        if turn is not None:
            turn.set_result(None)
    if inspect.isawaitable(response):
        response = await response
    return response


def _produce(ctx, request, confirmed: dict):
    from kbroker.protocol.messages.produce import ProduceResponse as R

    acks = request.acks
    unasked = txn_check.default_verification(ctx)
    now_ms = int(time.time() * 1000)
    by_id = ctx.api_version >= 13
    failed = False
    uncommitted = []  # acks=-1: (partition response, committed future) still waiting
    responses = []
    leaders: set[int] = set()  # KIP-951: leaders named in NOT_LEADER_OR_FOLLOWER answers
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
                check(ctx, Op.WRITE, ResourceType.TOPIC, name or topic_data.name or "")
                if request.transactional_id is not None:
                    check(ctx, Op.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
                if partition is None:
                    raise KafkaError(missing_partition_error(ctx, name, data.index, unknown),
                                     f"this broker has no partition {data.index} of "
                                     f"topic {name or topic_data.topic_id}")
                if data.records is None or len(data.records) == 0:
                    raise KafkaError(Errors.INVALID_RECORD, "no record batch in the request")
                if ctx.api_version < 7 and zstd_batch(data.records):  # KIP-110
                    raise KafkaError(Errors.UNSUPPORTED_COMPRESSION_TYPE,
                                     f"Produce requests with version {ctx.api_version} are not "
                                     f"allowed to use ZStandard compression")
                if acks == -1:
                    partition.check_min_insync_replicas()
                confirmation = confirmed.get((name, data.index))
                if confirmation is None:
                    verification = unasked
                elif confirmation.error is Errors.NONE:
                    verification = confirmation.guard
                else:
                    raise KafkaError(confirmation.error, confirmation.message)
                result, committed = partition.append(data.records, now_ms,
                                                     verification=verification)
                out.base_offset = result.first_offset
                out.log_append_time_ms = result.log_append_time
                out.log_start_offset = result.log_start_offset
                if acks == -1 and not (committed.done() and committed.exception() is None):
                    uncommitted.append((out, committed))
            except KafkaError as exc:
                failed = True
                out.error_code = exc.error.code
                out.error_message = exc.message
                # KIP-467: which records of the batch were at fault (v8+; ignorable before).
                out.record_errors = [
                    R.BatchIndexAndErrorMessage(batch_index=index, batch_index_error_message=text)
                    for index, text in getattr(exc, "record_errors", ())]
                if exc.error == Errors.NOT_LEADER_OR_FOLLOWER and ctx.api_version >= 10:
                    leader = current_leader(ctx, name, data.index)
                    if leader is not None:
                        out.current_leader = R.LeaderIdAndEpoch(leader_id=leader[0],
                                                                leader_epoch=leader[1])
                        leaders.add(leader[0])
                if exc.error not in (Errors.UNKNOWN_TOPIC_OR_PARTITION, DENIED, Errors.UNKNOWN_TOPIC_ID,
                                     Errors.NOT_LEADER_OR_FOLLOWER):
                    # The error is in the template, so the log's repeat limit (kbroker.cli.
                    # log_limits) counts what it leaves out per error, not for all refusals.
                    log.info("produce to %s-%d from %s rejected: " + exc.error.name + ": %s",
                             name, data.index, ctx.client_id, exc.message)
            partition_responses.append(out)
        responses.append(R.TopicProduceResponse(name=topic_data.name, topic_id=topic_data.topic_id,
                                                partition_responses=partition_responses))
    if acks == 0:
        if failed:
            raise CloseConnection()
        return None
    response = R(responses=responses, throttle_time_ms=0)
    if leaders:
        response.node_endpoints = node_endpoints(ctx, leaders, R.NodeEndpoint)
    if uncommitted:
        return _await_commit(response, uncommitted, request.timeout_ms)
    return response


async def _await_commit(response, uncommitted, timeout_ms: int):
    """acks=-1: wait (up to ``timeout_ms``) for the high watermark to pass each partition's
    append. Cancelled when the connection closes; the committed futures belong to the
    partitions and complete anyway."""
    futures = [committed for _, committed in uncommitted]
    await asyncio.wait(futures, timeout=max(timeout_ms, 0) / 1000)
    for out, committed in uncommitted:
        if not committed.done():
            error, message = Errors.REQUEST_TIMED_OUT, (
                f"not replicated to the in-sync replicas within {timeout_ms} ms")
        elif committed.exception() is not None:
            exc = committed.exception()
            error = exc.error if isinstance(exc, KafkaError) else Errors.UNKNOWN_SERVER_ERROR
            message = str(exc)
        else:
            continue
        out.error_code = error.code
        out.error_message = message
    return response
