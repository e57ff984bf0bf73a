"""TxnOffsetCommit (key 28), v0-6: offsets committed inside the producer's transaction.

The group coordinator validates like OffsetCommit (v3+ carry generation, member id and instance
id, KIP-447: UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION / FENCED_INSTANCE_ID; a group that does not
exist accepts a commit without a generation), except that, as in Kafka, a commit without a member
(a producer that sends a group id alone) is accepted whatever the group's state, and a rebalance
does not hold a transactional commit back. It writes the OffsetCommit records, with the topic id,
as a transactional batch of the producer. They stay pending (invisible to OffsetFetch,
UNSTABLE_OFFSET_COMMIT with require_stable) until EndTxn's marker commits or drops them
(:mod:`kbroker.coordinator.group.txn_offsets`). A topic or partition this broker does not know
gets UNKNOWN_TOPIC_OR_PARTITION; metadata too long OFFSET_METADATA_TOO_LARGE.

v6 (KIP-1319) names topics by id (UNKNOWN_TOPIC_ID when unknown), and a commit with a generation to
a group that does not exist is GROUP_ID_NOT_FOUND instead of ILLEGAL_GENERATION.

Before the commit the transaction coordinator is asked about the group's ``__consumer_offsets``
partition (KIP-890, as Kafka's group coordinator does through the verification guard,
:mod:`kbroker.handlers.txn_verification`): v0-4 (transactions v1) only verify that
AddOffsetsToTxn added it (every partition gets INVALID_TXN_STATE for v0-3,
TRANSACTION_ABORTABLE for v4, when it did not); v5+ (transactions v2) add it to the
transaction. Coordinator busy or elsewhere: COORDINATOR_NOT_AVAILABLE (retriable, as Kafka's
group coordinator maps NOT_ENOUGH_REPLICAS); fenced epoch: INVALID_PRODUCER_EPOCH.
``transaction.partition.verification.enable=false`` skips the v0-4 check.

A consumer-protocol group (KIP-848) checks the member epoch as OffsetCommit does
(:mod:`kbroker.coordinator.group.consumer.offsets`): STALE_MEMBER_EPOCH from v6 on,
ILLEGAL_GENERATION before.
"""

from __future__ import annotations

import inspect
import logging

from kbroker.coordinator.group import offsets
from kbroker.handlers import handles
from kbroker.handlers import txn_verification as txn_check
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.security.authorizer import Op, ResourceType, allowed
from kbroker.protocol.primitives import ZERO_UUID

log = logging.getLogger("kbroker.txn_offset_commit")


def _in_transaction(ctx, request):
    """The coordinator's answer for the group's offsets partition: an Errors, or an awaitable
    of {partition: Errors} (v5's add)."""
    if ctx.txn is None:
        return Errors.NONE
    offsets_partition = ctx.txn.offsets_partition(request.group_id)
    verify_only = ctx.api_version < txn_check.FIRST_ADD_TXN_OFFSET_COMMIT_VERSION
    remote = ctx.txn.remote_coordinator(request.transactional_id)
    if remote is not None and (not verify_only or ctx.config.get(
            "transaction.partition.verification.enable")):
        return ctx.txn.add_partitions_remote(remote, request.transactional_id,
                                             request.producer_id, request.producer_epoch,
                                             [offsets_partition], verify_only)
    if not verify_only:
        return _add_offsets_partition(ctx, request, offsets_partition)
    if not ctx.config.get("transaction.partition.verification.enable"):
        return Errors.NONE
    try:
        return ctx.txn.verify_partitions(request.transactional_id, request.producer_id,
                                         request.producer_epoch,
                                         [offsets_partition])[offsets_partition]
    except KafkaError as exc:
        return exc.error


async def _add_offsets_partition(ctx, request, offsets_partition):
    """v5+: the group's offsets partition joins the transaction, ``__consumer_offsets`` made
    first where this broker is to make it."""
    try:
        await ctx.groups.runtime.ensure_topic()
    except KafkaError as exc:
        return exc.error
    answer = txn_check.add_partitions(ctx, request.transactional_id, request.producer_id,
                                      request.producer_epoch, [offsets_partition])
    return await answer if inspect.isawaitable(answer) else answer


async def _transaction_error(ctx, request) -> Errors:
    answer = _in_transaction(ctx, request)
    if inspect.isawaitable(answer):
        answer = await answer
    if isinstance(answer, dict):
        answer = next(iter(answer.values()))
    if answer is Errors.NONE:
        return answer
    error = txn_check.client_error(answer, ctx.api_version >= 4)
    return Errors.COORDINATOR_NOT_AVAILABLE if error is Errors.NOT_ENOUGH_REPLICAS else error


@handles("TxnOffsetCommit")
async def handle_txn_offset_commit(ctx, request):
    from kbroker.protocol.messages.txn_offset_commit import TxnOffsetCommitResponse as R

    v = ctx.api_version
    store = ctx.metadata
    # Per partition: a topic or partition error now, or an index into `wanted` for the commit.
    outcome, wanted = [], []
    for topic in request.topics:
        if v >= 6:
            meta = store.topic_by_id(topic.topic_id)
            error = Errors.UNKNOWN_TOPIC_ID if meta is None else Errors.NONE
        else:
            meta = store.topic(topic.name)
            error = Errors.NONE
        if meta is not None or v < 6:  # READ on the topic, checked before its existence
            if not allowed(ctx, Op.READ, ResourceType.TOPIC, meta.name if meta else topic.name):
                error = Errors.TOPIC_AUTHORIZATION_FAILED
        for p in topic.partitions:
            if error is not Errors.NONE:
                outcome.append(error)
            elif meta is None or not 0 <= p.partition_index < meta.num_partitions:
                outcome.append(Errors.UNKNOWN_TOPIC_OR_PARTITION)
            else:
                outcome.append(len(wanted))
                wanted.append((meta.name, p.partition_index, meta.topic_id, p.committed_offset,
                               p.committed_leader_epoch if v >= 2 else -1,
                               p.committed_metadata))
    generation = request.generation_id_or_member_epoch if v >= 3 else -1
    member_id = request.member_id if v >= 3 else ""
    instance_id = request.group_instance_id if v >= 3 else None

    def validate_and_commit(shard):
        try:
            validator = offsets.validate_commit(shard, request.group_id, generation, member_id,
                                                instance_id, group_id_not_found=v >= 6,
                                                transactional=True, api_version=v)
            result = offsets.commit(shard, request.group_id, wanted, validator=validator)
        except KafkaError as exc:
            # v6 (KIP-1319) knows STALE_MEMBER_EPOCH; older versions get ILLEGAL_GENERATION.
            if exc.error is Errors.STALE_MEMBER_EPOCH and v < 6:
                raise KafkaError(Errors.ILLEGAL_GENERATION, exc.message) from None
            raise
        result.producer_id = request.producer_id
        result.producer_epoch = request.producer_epoch
        return result

    group_error, errors = Errors.NONE, []
    if not allowed(ctx, Op.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        group_error, wanted = Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, []
    elif not allowed(ctx, Op.READ, ResourceType.GROUP, request.group_id):
        group_error, wanted = Errors.GROUP_AUTHORIZATION_FAILED, []
    if wanted:
        group_error = await _transaction_error(ctx, request)
        if group_error is not Errors.NONE:
            log.info("TxnOffsetCommit of group %s for transactional id %r from %s: %s",
                     request.group_id, request.transactional_id, ctx.client_id,
                     group_error.name)
    if wanted and group_error is Errors.NONE:
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
        results.append(R.TxnOffsetCommitResponseTopic(
            name=topic.name if v < 6 else "", topic_id=topic.topic_id if v >= 6 else ZERO_UUID,
            partitions=partitions))
    return R(throttle_time_ms=0, topics=results)
