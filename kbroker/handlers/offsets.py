"""OffsetCommit (key 8) v2-10, OffsetFetch (key 9) v1-10, OffsetDelete (key 47) v0.

Thin wrappers over :mod:`kbroker.coordinator.group.offsets` (validation and expiry rules there).
Version quirks:
- OffsetCommit v2-4 carry a retention time (an explicit expire timestamp, written as an
  OffsetCommitValue v1 as Kafka does); v6+ the leader epoch; v7+ group.instance.id; v10 names
  topics by id (KIP-848; UNKNOWN_TOPIC_ID when unknown). A topic this broker does not know gets
  UNKNOWN_TOPIC_OR_PARTITION (Kafka's KafkaApis check); metadata longer than
  ``offset.metadata.max.bytes`` OFFSET_METADATA_TOO_LARGE.
- OffsetFetch: null topics (v2+) means every committed offset of the group; v5+ leader epochs;
  v7+ require_stable (KIP-447): a partition with a transactional offset still pending answers
  UNSTABLE_OFFSET_COMMIT; without it the pending offset is simply not visible; v8+ several groups
  at once (KIP-709); v10 topic ids. An offset never committed is
  -1 with empty metadata.
- Consumer-protocol groups (KIP-848, :mod:`kbroker.coordinator.group.consumer.offsets`): a commit
  carries the member epoch (v9+): STALE_MEMBER_EPOCH when it is newer than the member's, or older
  than the epoch the member got a committed partition at (KIP-1251); UNSUPPORTED_VERSION below
  v9 for a consumer-protocol member. OffsetFetch v9+ checks the member id and epoch likewise.
- OffsetDelete: GROUP_ID_NOT_FOUND for an unknown group, NON_EMPTY_GROUP for a non-empty group
  whose subscriptions cannot be read, GROUP_SUBSCRIBED_TO_TOPIC per partition of a subscribed
  topic.
"""

from __future__ import annotations

from kbroker.coordinator.group import offsets, txn_offsets
from kbroker.coordinator.runtime import now_ms
from kbroker.handlers import handles
from kbroker.protocol.errors import ErrorCode, Errors, KafkaError
from kbroker.protocol.primitives import ZERO_UUID
from kbroker.security.authorizer import Op, ResourceType, allowed, check

DEFAULT_RETENTION_TIME = -1


# --- OffsetCommit ------------------------------------------------------------------------------

@handles("OffsetCommit")
def handle_offset_commit(ctx, request):
    from kbroker.protocol.messages.offset_commit import OffsetCommitResponse as R

    v = ctx.api_version
    store = ctx.metadata
    # Per partition: a topic error now, or an index into `wanted` for the commit.
    outcome, wanted = [], []
    for topic in request.topics:
        if v >= 10:
            meta = store.topic_by_id(topic.topic_id)
            error = Errors.UNKNOWN_TOPIC_ID if meta is None else Errors.NONE
        else:
            meta = store.topic(topic.name)
            error = Errors.UNKNOWN_TOPIC_OR_PARTITION if meta is None else Errors.NONE
        if meta is not None or v < 10:  # READ on the topic, checked before its existence
            if not allowed(ctx, Op.READ, ResourceType.TOPIC, meta.name if meta else topic.name):
                error = Errors.TOPIC_AUTHORIZATION_FAILED
        for p in topic.partitions:
            if error is not Errors.NONE:
                outcome.append(error)
                continue
            outcome.append(len(wanted))
            wanted.append((meta.name, p.partition_index, meta.topic_id, p.committed_offset,
                           p.committed_leader_epoch if v >= 6 else -1, p.committed_metadata))
    expire = -1
    if v <= 4 and request.retention_time_ms != DEFAULT_RETENTION_TIME:
        # Bounded to an int64, the field's type (Java would wrap around instead).
        expire = max(-1, min(now_ms() + request.retention_time_ms, 2**63 - 1))

    def validate_and_commit(shard):
        # One operation: the group's checks see the state the commit is written against.
        validator = offsets.validate_commit(
            shard, request.group_id, request.generation_id_or_member_epoch, request.member_id,
            request.group_instance_id if v >= 7 else None, group_id_not_found=v >= 9,
            api_version=v)
        return offsets.commit(shard, request.group_id, wanted, expire, validator)

    async def answer():
        group_error = Errors.NONE
        try:
            check(ctx, Op.READ, ResourceType.GROUP, request.group_id)
            errors = await ctx.groups.write(request.group_id, validate_and_commit)
        except KafkaError as exc:
            group_error, errors = exc.error, []
        return _commit_response(R, v, request, outcome, group_error, errors)

    return answer()


def _commit_response(R, v, request, outcome, group_error, errors):
    results, i = [], 0
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            o = outcome[i]
            i += 1
            if group_error is not Errors.NONE:
                error = group_error
            else:
                error = o if isinstance(o, ErrorCode) else errors[o]
            partitions.append(R.OffsetCommitResponsePartition(partition_index=p.partition_index,
                                                              error_code=error.code))
        results.append(R.OffsetCommitResponseTopic(
            name=topic.name if v < 10 else "", topic_id=topic.topic_id if v >= 10 else ZERO_UUID,
            partitions=partitions))
    return R(throttle_time_ms=0, topics=results)


# --- OffsetFetch -------------------------------------------------------------------------------

def _fetch_group(ctx, group_id: str, topics, by_id: bool, require_stable: bool = False,
                 member_id: str | None = None, member_epoch: int = -1):
    """[(name, topic_id, [(partition, CommittedOffset|None, error)])] and the group error."""
    try:
        check(ctx, Op.DESCRIBE, ResourceType.GROUP, group_id)
        shard = ctx.groups.shard_for(group_id)
        group = shard.find_group(group_id)
        if group is not None:
            group.validate_offset_fetch(member_id, member_epoch)
    except KafkaError as exc:
        return [], exc.error
    found, error = _fetch_from_shard(ctx, shard, group_id, topics, by_id)
    if require_stable and shard.pending_txn_offsets:
        found = [(name, topic_id, [
            (p, None, Errors.UNSTABLE_OFFSET_COMMIT)
            if txn_offsets.has_pending(shard, group_id, name, p) else (p, c, e)
            for p, c, e in parts]) for name, topic_id, parts in found]
    return found, error


def _fetch_from_shard(ctx, shard, group_id: str, topics, by_id: bool):
    store = ctx.metadata
    if topics is None:
        found = offsets.fetch(shard, group_id, None)
        by_topic: dict = {}
        for topic, partition, committed in found:
            by_topic.setdefault(topic, []).append((partition, committed, Errors.NONE))
        out = []
        for name, parts in by_topic.items():
            meta = store.topic(name)
            if by_id and meta is None or not allowed(ctx, Op.DESCRIBE, ResourceType.TOPIC, name):
                continue  # topics the principal may not describe are left out
            out.append((name, meta.topic_id if meta is not None else ZERO_UUID, parts))
        return out, Errors.NONE
    out = []
    for topic in topics:
        if by_id:
            meta = store.topic_by_id(topic.topic_id)
            if meta is None:
                out.append(("", topic.topic_id, [(p, None, Errors.UNKNOWN_TOPIC_ID)
                                                 for p in topic.partition_indexes]))
                continue
            name = meta.name
        else:
            name = topic.name
        if not allowed(ctx, Op.DESCRIBE, ResourceType.TOPIC, name):
            out.append((name, getattr(topic, "topic_id", ZERO_UUID), [
                (p, None, Errors.TOPIC_AUTHORIZATION_FAILED) for p in topic.partition_indexes]))
            continue
        found = offsets.fetch(shard, group_id, [(name, topic.partition_indexes)])
        out.append((name, getattr(topic, "topic_id", ZERO_UUID),
                    [(p, c, Errors.NONE) for _, p, c in found]))
    return out, Errors.NONE


def _partition(P, v, partition, committed, error):
    if committed is None:
        return P(partition_index=partition, committed_offset=-1, committed_leader_epoch=-1,
                 metadata="", error_code=error.code)
    return P(partition_index=partition, committed_offset=committed.offset,
             committed_leader_epoch=committed.leader_epoch if v >= 5 else -1,
             metadata=committed.metadata, error_code=error.code)


@handles("OffsetFetch")
def handle_offset_fetch(ctx, request):
    from kbroker.protocol.messages.offset_fetch import OffsetFetchResponse as R

    v = ctx.api_version
    if v >= 8:
        groups = []
        for group in request.groups:
            found, error = _fetch_group(ctx, group.group_id, group.topics, v >= 10,
                                        request.require_stable,
                                        group.member_id if v >= 9 else None,
                                        group.member_epoch if v >= 9 else -1)
            topics = [R.OffsetFetchResponseTopics(
                name=name if v < 10 else "", topic_id=topic_id if v >= 10 else ZERO_UUID,
                partitions=[_partition(R.OffsetFetchResponsePartitions, v, *p) for p in parts])
                for name, topic_id, parts in found]
            groups.append(R.OffsetFetchResponseGroup(group_id=group.group_id, topics=topics,
                                                     error_code=error.code))
        return R(throttle_time_ms=0, groups=groups)
    found, error = _fetch_group(ctx, request.group_id, request.topics, False,
                                v >= 7 and request.require_stable)
    if error is not Errors.NONE and v < 2:
        # v1 has no group-level error: every requested partition carries it.
        found = [(t.name, ZERO_UUID, [(p, None, error) for p in t.partition_indexes])
                 for t in request.topics or ()]
    topics = [R.OffsetFetchResponseTopic(
        name=name, partitions=[_partition(R.OffsetFetchResponsePartition, v, *p) for p in parts])
        for name, _, parts in found]
    return R(throttle_time_ms=0, topics=topics, error_code=error.code if v >= 2 else 0)


# --- OffsetDelete ------------------------------------------------------------------------------

@handles("OffsetDelete")
def handle_offset_delete(ctx, request):
    from kbroker.protocol.messages.offset_delete import OffsetDeleteResponse as R

    store = ctx.metadata
    wanted, positions = [], []
    for topic in request.topics:
        known = store.topic(topic.name) is not None
        denied = not allowed(ctx, Op.READ, ResourceType.TOPIC, topic.name)
        for p in topic.partitions:
            if denied:
                positions.append(Errors.TOPIC_AUTHORIZATION_FAILED)
            elif known:
                positions.append(len(wanted))
                wanted.append((topic.name, p.partition_index))
            else:
                positions.append(Errors.UNKNOWN_TOPIC_OR_PARTITION)

    async def answer():
        try:
            check(ctx, Op.DELETE, ResourceType.GROUP, request.group_id)
            group_error, errors = await ctx.groups.write(
                request.group_id, lambda shard: offsets.delete(shard, request.group_id, wanted))
        except KafkaError as exc:
            group_error, errors = exc.error, []
        return _delete_response(R, request, positions, group_error, errors)

    return answer()


def _delete_response(R, request, positions, group_error, errors):
    if group_error is not Errors.NONE:
        return R(error_code=group_error.code, throttle_time_ms=0, topics=[])
    results, i = [], 0
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            pos = positions[i]
            i += 1
            error = pos if isinstance(pos, ErrorCode) else errors[pos]
            partitions.append(R.OffsetDeleteResponsePartition(partition_index=p.partition_index,
                                                              error_code=error.code))
        results.append(R.OffsetDeleteResponseTopic(name=topic.name, partitions=partitions))
    return R(error_code=0, throttle_time_ms=0, topics=results)
