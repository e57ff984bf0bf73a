"""Share groups' admin side over the persister: deleting a share group's state (DeleteGroups of a
share group) and, below, DescribeShareGroupOffsets (key 90), AlterShareGroupOffsets (91) and
DeleteShareGroupOffsets (92).

The group coordinator (kbroker.coordinator.group.share.admin) decides and records; the share
state itself lives behind ``ctx.groups.share_persister`` (the share coordinator).
"""

from __future__ import annotations

import logging

from kbroker.coordinator.group.share import admin as share_admin
from kbroker.coordinator.group.share.initialize import initialized
from kbroker.coordinator.share.persister import NO_OFFSET, SharePartitionKey
from kbroker.handlers import handles
from kbroker.handlers.features import share_groups_enabled
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.protocol.primitives import ZERO_UUID
from kbroker.security.authorizer import Op, ResourceType, allowed

log = logging.getLogger("kbroker.share_groups")


def is_share_group(ctx, group_id: str) -> bool:
    try:
        return ctx.groups.shard_for(group_id).find_group(group_id, "share") is not None
    except KafkaError:
        return False


async def delete_share_group(ctx, group_id: str) -> Errors:
    """DeleteGroups of a share group: its share partitions' state first, then the group."""
    todo = await ctx.groups.write(group_id,
                                  lambda shard: share_admin.prepare_delete(shard, group_id))
    if isinstance(todo, Errors):
        return todo
    if todo:
        persister = ctx.groups.share_persister
        if persister is None:
            log.warning("DeleteGroups of share group %s: no share persister to delete the state "
                        "of its share partitions", group_id)
            return Errors.COORDINATOR_NOT_AVAILABLE
        for topic_id, partitions in todo.items():
            for p in sorted(partitions):
                result = await persister.delete(SharePartitionKey(group_id, topic_id, p))
                if result.error is not Errors.NONE:
                    log.info("DeleteGroups of share group %s: deleting the state of %s-%d "
                             "failed: %s %s", group_id, topic_id, p, result.error.name,
                             result.error_message or "")
                    return result.error
    return await ctx.groups.write(group_id, lambda shard: share_admin.delete(shard, group_id))


def _persister(ctx):
    persister = ctx.groups.share_persister
    if persister is None:
        raise KafkaError(Errors.COORDINATOR_NOT_AVAILABLE,
                         "The share coordinator is not available on this broker.")
    return persister


# --- DescribeShareGroupOffsets (90), v0-1 ---------------------------------------------------------

@handles("DescribeShareGroupOffsets")
async def handle_describe_share_group_offsets(ctx, request):
    """Per group: the start offset, leader epoch and (v1) lag of each share partition, read from
    the persister (ReadShareGroupStateSummary). ``topics`` null asks for every initialized share
    partition of the group. A topic that does not exist answers start offset -1 (no data, as
    OffsetFetch); a partition the persister has no state for, -1 and lag -1. The lag is the
    partition's end offset minus the start offset minus the records already delivered. DESCRIBE
    on the group (GROUP_AUTHORIZATION_FAILED) and on each topic (TOPIC_AUTHORIZATION_FAILED)."""
    from kbroker.protocol.messages.describe_share_group_offsets import \
        DescribeShareGroupOffsetsResponse as R
    groups = []
    for g in request.groups:
        groups.append(await _describe_group(ctx, R, g))
    return R(throttle_time_ms=0, groups=groups)


def _group_error(R, group_id: str, error: Errors, message=None):
    return R.DescribeShareGroupOffsetsResponseGroup(group_id=group_id, topics=[],
                                                    error_code=error.code,
                                                    error_message=message or error.message)


async def _describe_group(ctx, R, g):
    gid = g.group_id
    if not share_groups_enabled(ctx):
        return _group_error(R, gid, Errors.UNSUPPORTED_VERSION)
    if not allowed(ctx, Op.DESCRIBE, ResourceType.GROUP, gid):
        return _group_error(R, gid, Errors.GROUP_AUTHORIZATION_FAILED)
    try:
        shard = ctx.groups.shard_for(gid)
        wanted = []  # [(name, topic id or None, partitions)]
        if g.topics is None:
            for topic_id, parts in sorted(share_admin.initialized_partitions(shard, gid).items(),
                                          key=lambda kv: str(kv[0])):
                topic = ctx.metadata.topic_by_id(topic_id)
                if topic is not None:
                    wanted.append((topic.name, topic_id, sorted(parts)))
        else:
            for t in g.topics:
                topic = ctx.metadata.topic(t.topic_name)
                wanted.append((t.topic_name, topic.topic_id if topic is not None else None,
                               list(t.partitions)))
        persister = _persister(ctx) if any(w[1] is not None for w in wanted) else None
    except KafkaError as exc:
        return _group_error(R, gid, exc.error, exc.message)
    topics, missing = [], []
    for name, topic_id, partitions in wanted:
        if topic_id is None:
            missing.append(R.DescribeShareGroupOffsetsResponseTopic(
                topic_name=name, topic_id=ZERO_UUID, partitions=[
                    R.DescribeShareGroupOffsetsResponsePartition(
                        partition_index=p, start_offset=-1, leader_epoch=0, lag=-1)
                    for p in partitions]))
            continue
        out = R.DescribeShareGroupOffsetsResponseTopic(topic_name=name, topic_id=topic_id,
                                                       partitions=[])
        denied = not allowed(ctx, Op.DESCRIBE, ResourceType.TOPIC, name)
        for p in partitions:
            part = R.DescribeShareGroupOffsetsResponsePartition(
                partition_index=p, start_offset=-1, leader_epoch=0, lag=-1)
            if denied:
                part.error_code = Errors.TOPIC_AUTHORIZATION_FAILED.code
            else:
                summary = await persister.read_summary(SharePartitionKey(gid, topic_id, p), -1)
                if summary.error is Errors.NONE:
                    part.start_offset, part.leader_epoch = summary.start_offset, \
                        summary.leader_epoch
                    if summary.start_offset != NO_OFFSET and \
                            summary.delivery_complete_count != -1:
                        part = await _with_lag(ctx, name, p, summary, part)
            out.partitions.append(part)
        topics.append(out)
    return R.DescribeShareGroupOffsetsResponseGroup(group_id=gid, topics=topics + missing,
                                                    error_code=0)


async def _with_lag(ctx, name: str, p: int, summary, part):
    """The partition's answer with its lag: the partition's latest offset (from its leader,
    wherever it is: :mod:`kbroker.coordinator.group.share.end_offsets`) less the start offset and
    the records delivered past it. When the latest offset cannot be had, the answer is only the
    error and its message, as Kafka's."""
    error, end = await ctx.groups.share_end_offsets.latest(name, p)
    if error is not Errors.NONE:
        return type(part)(partition_index=p, error_code=error.code, error_message=error.message)
    part.lag = end - summary.start_offset - summary.delivery_complete_count
    return part


# --- AlterShareGroupOffsets (91), v0 ---------------------------------------------------------------

@handles("AlterShareGroupOffsets")
async def handle_alter_share_group_offsets(ctx, request):
    """Set the start offset of share partitions of an empty share group (created when missing):
    the group coordinator records them initializing, the persister initializes their state at
    those offsets, then they are recorded initialized. Kafka's errors: INVALID_GROUP_ID,
    NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND (another group type), UNKNOWN_TOPIC_OR_PARTITION per
    partition; READ on the group and on each topic."""
    from kbroker.protocol.messages.alter_share_group_offsets import \
        AlterShareGroupOffsetsResponse as R
    gid = request.group_id

    def failed(error: Errors, message=None):
        return R(throttle_time_ms=0, error_code=error.code,
                 error_message=message or error.message, responses=[])

    if not share_groups_enabled(ctx):
        return failed(Errors.UNSUPPORTED_VERSION)
    if not gid:
        return failed(Errors.INVALID_GROUP_ID)
    if not allowed(ctx, Op.READ, ResourceType.GROUP, gid):
        return failed(Errors.GROUP_AUTHORIZATION_FAILED)
    denied = [t for t in request.topics if not allowed(ctx, Op.READ, ResourceType.TOPIC,
                                                        t.topic_name)]
    wanted = [(t.topic_name, [(p.partition_index, p.start_offset) for p in t.partitions])
              for t in request.topics if t not in denied]
    responses = [R.AlterShareGroupOffsetsResponseTopic(
        topic_name=t.topic_name, partitions=[R.AlterShareGroupOffsetsResponsePartition(
            partition_index=p.partition_index, error_code=Errors.TOPIC_AUTHORIZATION_FAILED.code,
            error_message=None) for p in t.partitions]) for t in denied]
    try:
        persister = _persister(ctx)
        answer, offsets, epoch = await ctx.groups.write(
            gid, lambda shard: share_admin.alter_offsets(shard, gid, wanted))
    except KafkaError as exc:
        return failed(exc.error, exc.message)
    errors, done = {}, {}
    for topic_id, by_partition in offsets.items():
        for p, offset in sorted(by_partition.items()):
            result = await persister.initialize(SharePartitionKey(gid, topic_id, p), epoch,
                                                offset)
            if result.error is Errors.NONE:
                done.setdefault(topic_id, set()).add(p)
            else:
                errors[(topic_id, p)] = (result.error, result.error_message)
    if done:
        await ctx.groups.write(gid, lambda shard: initialized(shard, gid, done))
    for name, topic_id, results in answer:
        out = R.AlterShareGroupOffsetsResponseTopic(topic_name=name, partitions=[])
        if topic_id is not None:
            out.topic_id = topic_id
        for p, error in results:
            error, message = errors.get((topic_id, p), (error, None))
            if error is Errors.UNKNOWN_TOPIC_OR_PARTITION:
                message = "This server does not host this topic-partition."
            out.partitions.append(R.AlterShareGroupOffsetsResponsePartition(
                partition_index=p, error_code=error.code, error_message=message))
        responses.append(out)
    return R(throttle_time_ms=0, error_code=0, error_message=None, responses=responses)


# --- DeleteShareGroupOffsets (92), v0 --------------------------------------------------------------

@handles("DeleteShareGroupOffsets")
async def handle_delete_share_group_offsets(ctx, request):
    """Forget the share-partition state of the named topics for an empty share group: the topics
    move to deleting, the persister deletes their state, then they leave deleting. Kafka's
    errors: INVALID_GROUP_ID, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP (top level),
    UNKNOWN_TOPIC_OR_PARTITION per topic; DELETE on the group and READ on each topic."""
    from kbroker.protocol.messages.delete_share_group_offsets import \
        DeleteShareGroupOffsetsResponse as R
    gid = request.group_id

    def failed(error: Errors, message=None):
        return R(throttle_time_ms=0, error_code=error.code,
                 error_message=message or error.message, responses=[])

    if not share_groups_enabled(ctx):
        return failed(Errors.UNSUPPORTED_VERSION)
    if not gid:
        return failed(Errors.INVALID_GROUP_ID)
    if not allowed(ctx, Op.DELETE, ResourceType.GROUP, gid):
        return failed(Errors.GROUP_AUTHORIZATION_FAILED)
    responses = []
    names = []
    for t in request.topics:
        if allowed(ctx, Op.READ, ResourceType.TOPIC, t.topic_name):
            names.append(t.topic_name)
        else:
            responses.append(R.DeleteShareGroupOffsetsResponseTopic(
                topic_name=t.topic_name, error_code=Errors.TOPIC_AUTHORIZATION_FAILED.code))
    try:
        errors, todo = await ctx.groups.write(
            gid, lambda shard: share_admin.start_delete_offsets(shard, gid, names))
        persister = _persister(ctx) if todo else None
    except KafkaError as exc:
        return failed(exc.error, exc.message)
    deleted = []
    for topic_id, (name, partitions) in todo.items():
        problem = None
        for p in sorted(partitions):
            result = await persister.delete(SharePartitionKey(gid, topic_id, p))
            if result.error is not Errors.NONE:
                problem = result
                break
        if problem is None:
            deleted.append(topic_id)
            responses.append(R.DeleteShareGroupOffsetsResponseTopic(
                topic_name=name, topic_id=topic_id, error_code=0))
        else:
            responses.append(R.DeleteShareGroupOffsetsResponseTopic(
                topic_name=name, topic_id=topic_id, error_code=problem.error.code,
                error_message=problem.error_message))
    if deleted:
        await ctx.groups.write(gid, lambda shard: share_admin.complete_delete_offsets(
            shard, gid, deleted))
    for name, error, message in errors:
        responses.append(R.DeleteShareGroupOffsetsResponseTopic(
            topic_name=name, error_code=error.code, error_message=message))
    return R(throttle_time_ms=0, error_code=0, error_message=None, responses=responses)
