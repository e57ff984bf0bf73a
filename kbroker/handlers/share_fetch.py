"""ShareFetch (key 78), v1-2: share consumers fetch records (KIP-932).

Checks as :mod:`kbroker.handlers.share_common`; then the share session
(:mod:`kbroker.share.sessions`: epoch 0 opens, -1 closes, SHARE_SESSION_NOT_FOUND,
INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_LIMIT_REACHED and, for acknowledgements in an
opening request, INVALID_REQUEST, all for the whole request). Behaviour:
- Piggybacked acknowledgements are applied first and answered in each partition's
  ``acknowledge_error_code`` (INVALID_RECORD_STATE for offsets not acquired or held by another
  member, INVALID_REQUEST for malformed batches).
- Records are acquired for the member from the session's partitions (a full request: the
  request's own; from epoch 1 on rotated by the epoch, so each partition takes its turn at going
  first, as Kafka's round robin) up to ``max_records`` (whole batches unless ``share_acquire_mode`` is 1,
  KIP-1206) and ``max_bytes``; each partition answers whole batches and the ``acquired_records``
  ranges with their delivery counts; ``acquisition_lock_timeout_ms`` is the group's record lock
  duration. Long poll: the request waits up to ``max_wait_ms`` for new records or released ones
  while less than ``min_bytes`` could be acquired (estimated from the log, as Kafka's
  DelayedShareFetch does) or, with ``min_bytes`` 1, until something is acquired. Partitions
  whose share state is still loading take no part, and a full answer leaves them out (their
  records come with a later fetch): a new group's first answer carries the partitions that
  loaded first, as Kafka's. ``max_bytes`` is split evenly among the partitions able to
  acquire.
- v2 (KIP-1222): ``is_renew_ack`` requests carry only acknowledgements (RENEW extends locks);
  their max_bytes, min_bytes, max_records and max_wait_ms must be 0 (INVALID_REQUEST) and
  nothing is fetched.
- An incremental (epoch > 0) answer lists only partitions with records, an error, an
  acknowledgement result or an error to clear, as Kafka's ShareSessionContext.
- Epoch -1 fetches nothing, applies its acknowledgements, then releases what the member holds.
- Kafka's broker does not ask the group coordinator here: membership is not checked.
- SHARE_SESSION_LIMIT_REACHED is answered after ``max_wait_ms``, as Kafka does.
- NOT_LEADER_OR_FOLLOWER (a partition led by another broker) carries the ``current_leader`` and
  its ``node_endpoints`` (KIP-951), as Fetch does.
Records go to the socket as file regions with sendfile, as Fetch's do: only each batch's header
is read (it decides which offsets are acquired).
"""

from __future__ import annotations

import asyncio
import logging

from kbroker.coordinator.share.persister import SharePartitionKey
from kbroker.handlers import handles
from kbroker.handlers.leader_hint import current_leader, node_endpoints
from kbroker.handlers.share_common import (acknowledgements, check_request, partition_error,
                                           topic_name)
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.share.manager import FetchParams
from kbroker.share.sessions import FINAL_EPOCH

log = logging.getLogger("kbroker.share_fetch")


def _error_response(R, error: Errors):
    # Kafka's getErrorResponse carries the code alone; the reason goes to the log.
    return R(throttle_time_ms=0, error_code=error.code, responses=[])


@handles("ShareFetch")
def handle_share_fetch(ctx, request):
    from kbroker.protocol.messages.share_fetch import ShareFetchResponse as R

    manager = ctx.share
    if manager is None:
        return _error_response(R, Errors.UNSUPPORTED_VERSION)
    error = check_request(ctx, request.group_id, request.member_id)
    if error is None and ctx.api_version >= 2 and request.is_renew_ack and any(
            (request.max_bytes, request.min_bytes, request.max_records, request.max_wait_ms)):
        error = KafkaError(Errors.INVALID_REQUEST, "a renew-ack request fetches nothing: its "
                           "max_bytes, min_bytes, max_records and max_wait_ms must be 0")
    if error is not None:
        log.info("ShareFetch from %s (%s) refused: %s %s", ctx.client_host, ctx.client_id,
                 error.error.name, error.message or "")
        return _error_response(R, error.error)
    wanted = [(t.topic_id, p.partition_index) for t in request.topics for p in t.partitions]
    forgotten = [(t.topic_id, p) for t in request.forgotten_topics_data for p in t.partitions]
    acknowledging = any(p.acknowledgement_batches for t in request.topics for p in t.partitions)
    try:
        session, full = manager.sessions.for_fetch(
            request.group_id, request.member_id, request.share_session_epoch, wanted, forgotten,
            acknowledging, ctx.connection)
    except KafkaError as exc:
        log.info("ShareFetch of group %s member %s epoch %d: %s", request.group_id,
                 request.member_id, request.share_session_epoch, exc.error.name)
        if exc.error == Errors.SHARE_SESSION_LIMIT_REACHED:
            return _after(request.max_wait_ms, _error_response(R, exc.error))
        return _error_response(R, exc.error)
    return _serve(ctx, request, manager, session, full, R)


async def _after(wait_ms: int, response):
    """Kafka answers SHARE_SESSION_LIMIT_REACHED only after the request's max wait, so that a
    consumer retrying at once does not spin."""
    await asyncio.sleep(max(wait_ms, 0) / 1000)
    return response


async def _serve(ctx, request, manager, session, full, R):
    group_id, member_id = request.group_id, request.member_id
    renew = ctx.api_version >= 2 and request.is_renew_ack
    ack_errors, acks = acknowledgements(ctx, group_id, request.topics, ctx.api_version, renew)
    ack_results = {key: (error, None) for key, error in ack_errors.items()}
    if acks:
        for key, result in (await manager.acknowledge(group_id, member_id, acks)).items():
            ack_results[(key.topic_id, key.partition)] = result

    final = request.share_session_epoch == FINAL_EPOCH
    order = list(dict.fromkeys(
        [(t.topic_id, p.partition_index) for t in request.topics for p in t.partitions]
        if full else session.partitions))
    fetched = {}
    if not final and not renew:
        fetched = await _fetch(ctx, request, manager, _rotated(order,
                                                               request.share_session_epoch))

    topics: dict = {}
    leaders: set[int] = set()  # KIP-951: the leaders named in NOT_LEADER_OR_FOLLOWER answers
    keys = order + [key for key in ack_results if key not in fetched and key not in order]
    for key in keys:
        if final and key not in ack_results:
            continue
        if full and key not in fetched and key not in ack_results:
            continue  # still loading its state: left out, as Kafka's full answers leave it
        topic_id, index = key
        out = R.PartitionData(partition_index=index, records=b"", acquired_records=[])
        result = fetched.get(key)
        if result is not None:
            out.error_code = result.error.code
            out.records = result.records or b""  # file regions, sent with sendfile
            out.acquired_records = [
                R.AcquiredRecords(first_offset=a.first_offset, last_offset=a.last_offset,
                                  delivery_count=a.delivery_count) for a in result.acquired]
            if result.error in (Errors.NOT_LEADER_OR_FOLLOWER, Errors.FENCED_LEADER_EPOCH):
                leader = current_leader(ctx, topic_name(ctx, topic_id), index)
                if leader is not None:
                    out.current_leader = R.LeaderIdAndEpoch(leader_id=leader[0],
                                                            leader_epoch=leader[1])
                    leaders.add(leader[0])
        if key in ack_results:
            error, message = ack_results[key]
            out.acknowledge_error_code = error.code
            out.acknowledge_error_message = message if error != Errors.NONE else None
        if not full and not _must_answer(session, key, out, key in ack_results):
            continue
        entry = topics.get(topic_id)
        if entry is None:
            entry = topics[topic_id] = R.ShareFetchableTopicResponse(topic_id=topic_id,
                                                                     partitions=[])
        entry.partitions.append(out)
    if final:
        await manager.release_session(group_id, member_id)
    lock_ms = manager.settings(group_id).record_lock_duration_ms
    return R(throttle_time_ms=0, error_code=0, acquisition_lock_timeout_ms=lock_ms,
             responses=list(topics.values()),
             node_endpoints=node_endpoints(ctx, leaders, R.NodeEndpoint) if leaders else [])


def _rotated(order: list, epoch: int) -> list:
    """The fetch order: from epoch 1 on the partitions take turns at going first (Kafka's
    PartitionRotateStrategy round robin), so that ``max_records`` does not always go to the
    same ones. The answer keeps the session's order."""
    if epoch < 1 or len(order) < 2:
        return order
    k = epoch % len(order)
    return order[k:] + order[:k]


def _must_answer(session, key, out, acknowledged: bool) -> bool:
    """Kafka's CachedSharePartition.maybeUpdateResponseData for incremental answers."""
    must = bool(out.records) or acknowledged
    if session.partitions.get(key):
        must = True
        session.partitions[key] = False
    if out.error_code:
        session.partitions[key] = True  # answer it again once the error is gone
        must = True
    return must


async def _fetch(ctx, request, manager, order):
    group_id = request.group_id
    settings = manager.settings(group_id)
    results, wanted = {}, []
    from kbroker.share.manager import FetchedPartition
    for topic_id, index in order:
        name = topic_name(ctx, topic_id)
        error = partition_error(ctx, name, index)
        if error is not None:
            results[(topic_id, index)] = FetchedPartition(error)
            continue
        wanted.append((SharePartitionKey(group_id, topic_id, index),
                       ctx.partitions.get(name, index)))
    if wanted:
        fetch_max = ctx.config.get("fetch.max.bytes")
        params = FetchParams(max_wait_ms=request.max_wait_ms, min_bytes=request.min_bytes,
                             max_bytes=min(request.max_bytes, fetch_max),
                             max_records=request.max_records,
                             batch_size=request.batch_size,
                             acquire_mode=request.share_acquire_mode if ctx.api_version >= 2
                             else 0, isolation_level=settings.isolation_level)
        for key, result in (await manager.fetch(group_id, request.member_id, wanted,
                                                params)).items():
            results[(key.topic_id, key.partition)] = result
    return results
