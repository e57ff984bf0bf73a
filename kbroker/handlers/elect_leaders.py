"""ElectLeaders (key 43), v0-2 (KIP-460: v1 adds the election type and a top-level error).

Preferred (type 0, the only kind in v0) moves leadership to each partition's first replica when
it is alive and in the ISR; unclean (type 1) elects a leader for a partition whose leader is
gone, from the ISR if one member lives, else from any live replica (accepting the loss of what
only the ISR had). A null partition list means every partition. Per partition, as Kafka's
controller answers: ELECTION_NOT_NEEDED (the preferred replica already leads / the leader is
alive), PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE,
UNKNOWN_TOPIC_OR_PARTITION. The answer comes once the new leaders are in this broker's
metadata (the request's ``timeout_ms`` is not needed for that: the controller writes and
re-reads before answering).

Kafka's admin client sends ElectLeaders to the controller; any other broker answers
NOT_CONTROLLER (v1+ top-level, and per partition), and the client retries at the controller.
Authorization: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED for everything.
A single node has nothing to elect: ELECTION_NOT_NEEDED for every partition.
"""

from __future__ import annotations

import logging

from kbroker.handlers import handles
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.security.authorizer import Op, ResourceType, allowed

log = logging.getLogger("kbroker.elect_leaders")
PREFERRED, UNCLEAN = 0, 1


@handles("ElectLeaders")
async def handle_elect_leaders(ctx, request):
    from kbroker.protocol.messages.elect_leaders import ElectLeadersResponse as R

    election_type = request.election_type if ctx.api_version >= 1 else PREFERRED
    partitions = None
    if request.topic_partitions is not None:
        partitions = list(dict.fromkeys((t.topic, p) for t in request.topic_partitions
                                        for p in t.partitions))
    top = Errors.NONE
    if not allowed(ctx, Op.ALTER, ResourceType.CLUSTER):
        top = Errors.CLUSTER_AUTHORIZATION_FAILED
        results = {tp: (top, None) for tp in partitions or ()}
    elif election_type not in (PREFERRED, UNCLEAN):
        top = Errors.INVALID_REQUEST
        results = {tp: (top, f"unknown election type {election_type}")
                   for tp in partitions or ()}
    else:
        try:
            results = await ctx.controller.elect_leaders(election_type == PREFERRED, partitions)
        except KafkaError as exc:
            top = exc.error
            results = {tp: (exc.error, exc.message) for tp in partitions or ()}
    if top is not Errors.NONE:
        log.info("ElectLeaders from %s refused: %s", ctx.client_id, top.name)
    by_topic: dict[str, list] = {}
    for (topic, index), (error, message) in results.items():
        by_topic.setdefault(topic, []).append(R.PartitionResult(
            partition_id=index, error_code=error.code, error_message=message))
    return R(throttle_time_ms=0, error_code=top.code if ctx.api_version >= 1 else 0,
             replica_election_results=[R.ReplicaElectionResult(topic=t, partition_result=r)
                                       for t, r in by_topic.items()])
