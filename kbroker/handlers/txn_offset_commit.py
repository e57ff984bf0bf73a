"""TxnOffsetCommit (key 28), v0-5: offsets committed inside the producer's transaction.

The group coordinator validates like OffsetCommit (v3+ carry generation, member id and instance
id, KIP-447: UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION / FENCED_INSTANCE_ID; a group that does not
exist accepts a commit without a generation) and writes the OffsetCommit records as a
transactional batch of the producer. They stay pending (invisible to OffsetFetch, UNSTABLE_OFFSET_COMMIT
with require_stable) until EndTxn's marker commits or drops them
(:mod:`kbroker.coordinator.group.txn_offsets`). A topic this broker does not know gets
UNKNOWN_TOPIC_OR_PARTITION; metadata too long OFFSET_METADATA_TOO_LARGE.
Not checked: that AddOffsetsToTxn added the group's partition to the transaction first (Kafka
verifies it with the coordinator from 3.6 on).
"""

from __future__ import annotations

from kbroker.coordinator.group import offsets
from kbroker.handlers import handles
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.security.authorizer import Op, ResourceType, allowed
from kbroker.protocol.primitives import ZERO_UUID


@handles("TxnOffsetCommit")
async def handle_txn_offset_commit(ctx, request):
    from kbroker.protocol.messages.txn_offset_commit import TxnOffsetCommitResponse as R

    v = ctx.api_version
    store = ctx.metadata
    outcome, wanted = [], []
    for topic in request.topics:
        meta = store.topic(topic.name)
        denied = not allowed(ctx, Op.READ, ResourceType.TOPIC, topic.name)
        for p in topic.partitions:
            if denied:
                outcome.append(Errors.TOPIC_AUTHORIZATION_FAILED)
                continue
            if meta is None:
                outcome.append(Errors.UNKNOWN_TOPIC_OR_PARTITION)
                continue
            outcome.append(len(wanted))
            wanted.append((meta.name, p.partition_index, ZERO_UUID, p.committed_offset,
                           p.committed_leader_epoch if v >= 2 else -1, p.committed_metadata))
    generation = request.generation_id if v >= 3 else -1
    member_id = request.member_id if v >= 3 else ""
    instance_id = request.group_instance_id if v >= 3 else None

    def validate_and_commit(shard):
        # As OffsetCommit before v9: a missing group with a generation is ILLEGAL_GENERATION.
        offsets.validate_commit(shard, request.group_id, generation, member_id, instance_id, 0)
        result = offsets.commit(shard, request.group_id, wanted)
        result.producer_id = request.producer_id
        result.producer_epoch = request.producer_epoch
        return result

    group_error, errors = Errors.NONE, []
    if not allowed(ctx, Op.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        group_error, wanted = Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, []
    elif not allowed(ctx, Op.READ, ResourceType.GROUP, request.group_id):
        group_error, wanted = Errors.GROUP_AUTHORIZATION_FAILED, []
    if wanted:
        try:
            errors = await ctx.groups.write(request.group_id, validate_and_commit)
        except KafkaError as exc:
            group_error = exc.error
    results, i = [], 0
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            o = outcome[i]
            i += 1
            if group_error in (Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                               Errors.GROUP_AUTHORIZATION_FAILED):
                error = group_error  # Kafka denies the whole request first (getErrorResponse)
            elif isinstance(o, Errors):
                error = o
            else:
                error = group_error if group_error is not Errors.NONE else errors[o]
            partitions.append(R.TxnOffsetCommitResponsePartition(
                partition_index=p.partition_index, error_code=error.code))
        results.append(R.TxnOffsetCommitResponseTopic(name=topic.name, partitions=partitions))
    return R(throttle_time_ms=0, topics=results)
