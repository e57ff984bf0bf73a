"""ShareAcknowledge (key 79), v1-2: share consumers acknowledge records (KIP-932).

Checks as :mod:`kbroker.handlers.share_common`; the share session must exist
(SHARE_SESSION_NOT_FOUND) with the request's epoch (INVALID_SHARE_SESSION_EPOCH; epoch 0 is
always refused, since only a ShareFetch opens a session), and moves to the next epoch.
Each partition's acknowledgements are applied all or nothing and persisted before the answer:
INVALID_RECORD_STATE for offsets not acquired or held by another member, INVALID_REQUEST for
malformed batches, UNKNOWN_TOPIC_OR_PARTITION for a partition the member never fetched here.
v2 (KIP-1222): RENEW (type 4) extends the member's locks, in an ``is_renew_ack`` request only.
Epoch -1 closes the session after the acknowledgements: what the member still holds is released.
"""

from __future__ import annotations

import logging

from kbroker.handlers import handles
from kbroker.handlers.share_common import acknowledgements, check_request
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.share.sessions import FINAL_EPOCH

log = logging.getLogger("kbroker.share_acknowledge")


@handles("ShareAcknowledge")
def handle_share_acknowledge(ctx, request):
    from kbroker.protocol.messages.share_acknowledge import ShareAcknowledgeResponse as R

    manager = ctx.share
    error = KafkaError(Errors.UNSUPPORTED_VERSION) if manager is None else \
        check_request(ctx, request.group_id, request.member_id)
    if error is None:
        try:
            manager.sessions.for_acknowledge(request.group_id, request.member_id,
                                             request.share_session_epoch)
        except KafkaError as exc:
            error = exc
    if error is not None:
        log.info("ShareAcknowledge of group %s member %s epoch %d from %s: %s %s",
                 request.group_id, request.member_id, request.share_session_epoch,
                 ctx.client_host, error.error.name, error.message or "")
        return R(throttle_time_ms=0, error_code=error.error.code, responses=[])
    return _acknowledge(ctx, request, manager, R)


async def _acknowledge(ctx, request, manager, R):
    renew = ctx.api_version >= 2 and request.is_renew_ack
    errors, acks = acknowledgements(ctx, request.group_id, request.topics, ctx.api_version,
                                    renew)
    results = {key: (error, None) for key, error in errors.items()}
    if acks:
        for key, result in (await manager.acknowledge(request.group_id, request.member_id,
                                                      acks)).items():
            results[(key.topic_id, key.partition)] = result
    topics: dict = {}
    for topic in request.topics:
        for partition in topic.partitions:
            key = (topic.topic_id, partition.partition_index)
            error, message = results.get(key, (Errors.NONE, None))
            entry = topics.get(topic.topic_id)
            if entry is None:
                entry = topics[topic.topic_id] = R.ShareAcknowledgeTopicResponse(
                    topic_id=topic.topic_id, partitions=[])
            entry.partitions.append(R.PartitionData(
                partition_index=partition.partition_index, error_code=error.code,
                error_message=message if error != Errors.NONE else None))
    if request.share_session_epoch == FINAL_EPOCH:
        await manager.release_session(request.group_id, request.member_id)
    lock_ms = manager.settings(request.group_id).record_lock_duration_ms
    return R(throttle_time_ms=0, error_code=0, acquisition_lock_timeout_ms=lock_ms,
             responses=list(topics.values()))
