"""AlterPartitionReassignments (key 45) v0-1 and ListPartitionReassignments (key 46) v0
(KIP-455; v1 of Alter adds ``allow_replication_factor_change``, KIP-860).

Both are answered by the controller (any other broker: NOT_CONTROLLER at the top, and Kafka's
admin client retries at the controller). Alter, per partition: a replica list starts a
reassignment (Kafka's checks: INVALID_REPLICA_ASSIGNMENT for an empty list, duplicates, negative
or not-live broker ids; INVALID_REPLICATION_FACTOR for a changed replica count when v1 forbids
it; UNKNOWN_TOPIC_OR_PARTITION), a null list cancels one (NO_REASSIGNMENT_IN_PROGRESS when none
runs). As Kafka does, the new replicas are added first (the assignment holds target and
original replicas, with ``adding_replicas``/``removing_replicas`` in ``/brokers/topics/T``); once
every target replica is in the ISR the controller moves the leader into the target if needed,
drops the removed replicas and writes the target alone. A duplicate partition in one request is
INVALID_REQUEST. List: the reassignments in progress (all, or of the partitions asked for) with
their full replica set and the adding and removing replicas. Authorization: ALTER (Alter) or
DESCRIBE (List) on the cluster, else CLUSTER_AUTHORIZATION_FAILED. A single node never has a
reassignment: Alter is answered per partition as Kafka's checks would (only its own id is a live
broker; a list of just it is already the assignment), List is empty.
"""

from __future__ import annotations

import logging

from kbroker.handlers import handles
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.security.authorizer import Op, ResourceType, allowed

log = logging.getLogger("kbroker.reassignments")


@handles("AlterPartitionReassignments")
async def handle_alter_partition_reassignments(ctx, request):
    from kbroker.protocol.messages.alter_partition_reassignments import \
        AlterPartitionReassignmentsResponse as R

    wanted = [(t.name, p.partition_index, p.replicas) for t in request.topics
              for p in t.partitions]
    allow_rf_change = request.allow_replication_factor_change if ctx.api_version >= 1 else True
    top, top_message, results = Errors.NONE, None, {}
    counts: dict = {}
    for name, index, _ in wanted:
        counts[(name, index)] = counts.get((name, index), 0) + 1
    if not allowed(ctx, Op.ALTER, ResourceType.CLUSTER):
        top = Errors.CLUSTER_AUTHORIZATION_FAILED
    else:
        unique = [w for w in wanted if counts[(w[0], w[1])] == 1]
        results = {(n, i): (Errors.INVALID_REQUEST, "Duplicate partition in the request.")
                   for n, i, _ in wanted if counts[(n, i)] > 1}
        try:
            results.update(await ctx.controller.alter_reassignments(unique, allow_rf_change))
        except KafkaError as exc:
            top, top_message = exc.error, exc.message
    if top is not Errors.NONE:
        log.info("AlterPartitionReassignments from %s refused: %s", ctx.client_id, top.name)
        results = {(n, i): (top, top_message) for n, i, _ in wanted}
    by_topic: dict[str, list] = {}
    for (name, index), (error, message) in results.items():
        by_topic.setdefault(name, []).append(R.ReassignablePartitionResponse(
            partition_index=index, error_code=error.code, error_message=message))
    return R(throttle_time_ms=0, allow_replication_factor_change=allow_rf_change,
             error_code=top.code, error_message=top_message,
             responses=[R.ReassignableTopicResponse(name=n, partitions=p)
                        for n, p in by_topic.items()])


@handles("ListPartitionReassignments")
def handle_list_partition_reassignments(ctx, request):
    from kbroker.protocol.messages.list_partition_reassignments import \
        ListPartitionReassignmentsResponse as R

    if not allowed(ctx, Op.DESCRIBE, ResourceType.CLUSTER):
        return R(throttle_time_ms=0, error_code=Errors.CLUSTER_AUTHORIZATION_FAILED.code,
                 error_message=None, topics=[])
    partitions = None
    if request.topics is not None:
        partitions = {(t.name, i) for t in request.topics for i in t.partition_indexes}
    try:
        found = ctx.controller.list_reassignments(partitions)
    except KafkaError as exc:
        return R(throttle_time_ms=0, error_code=exc.code, error_message=exc.message, topics=[])
    by_topic: dict[str, list] = {}
    for (name, index), (replicas, adding, removing) in found.items():
        by_topic.setdefault(name, []).append(R.OngoingPartitionReassignment(
            partition_index=index, replicas=list(replicas), adding_replicas=list(adding),
            removing_replicas=list(removing)))
    return R(throttle_time_ms=0, error_code=Errors.NONE.code, error_message=None,
             topics=[R.OngoingTopicReassignment(name=n, partitions=p)
                     for n, p in by_topic.items()])
