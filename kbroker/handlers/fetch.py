"""Fetch (key 1), v4-18.

Returns whole record batches as file regions that go to the socket with sendfile; nothing is
copied through Python. Behaviour:
- Bounds: each partition gets at most ``partition_max_bytes`` and the response at most
  ``max_bytes``, except that the first partition with data returns at least one whole batch
  even if it is larger (KIP-74), so a consumer can always make progress.
- Long poll: when fewer than ``min_bytes`` are available, the request parks on its partitions
  until one has news (high watermark or last stable offset moved; log end offset for a replica)
  or ``max_wait_ms``, whichever comes first; other requests on the same connection are handled
  meanwhile, and closing the connection unparks it. Errors answer at once.
- Bounds come from the partition: consumers read below the high watermark, ``isolation_level``
  1 (read_committed) below the last stable offset, with the aborted transactions it overlaps,
  a replica (replica id >= 0; in ReplicaState from v15, KIP-903) below the log end offset.
- v13+ names topics by id (UNKNOWN_TOPIC_ID when unknown); older versions by name.
- ``current_leader_epoch`` (v9+) is checked: FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH.
- A replica's fetch (a follower in the partition's assignment) moves that follower's position
  on the leader, which may expand the ISR and move the high watermark (acks=all waiters
  complete). A replica id not in the assignment (or a client claiming to be a replica) gets
  NOT_LEADER_OR_FOLLOWER, as Kafka's Partition.getReplicaOrException. A replica fetch without
  CLUSTER_ACTION gets TOPIC_AUTHORIZATION_FAILED, as in Kafka; in a cluster with
  ``inter.broker.listener.name`` set, one arriving on another (client) listener is refused the
  same way, so a client cannot move the high watermark by posing as a follower.
- ``last_fetched_epoch`` (v12+): when the fetcher's log diverges from this leader's, the answer
  is ``diverging_epoch`` and no records (truncation on fetch, KIP-595 follower side).
- NOT_LEADER_OR_FOLLOWER carries ``current_leader`` (v12+) and the leader's ``node_endpoints``
  (v16+), KIP-951; a partition hosted elsewhere in the cluster answers it too.
Fetch sessions (KIP-227, :mod:`kbroker.handlers.fetch_sessions`) are made for replica fetches:
a follower then sends only the partitions whose fetch changed, and the leader answers only
those with something new. Consumers asking for one get session id 0, which the protocol allows
and which makes them send full requests.
Fetch from follower (KIP-392): with ``replica.selector.class`` set (Kafka's
RackAwareReplicaSelector, the one implemented), the leader answers a consumer that names its
``rack_id`` (v11+) with ``preferred_read_replica`` (an in-sync follower in that rack) and no
records, and followers serve consumers below their high watermark. Without it, followers answer
consumers NOT_LEADER_OR_FOLLOWER, as Kafka does.
"""

from __future__ import annotations

import logging
import time

from kbroker.handlers import handles
from kbroker.handlers.fetch_sessions import Sessionless
from kbroker.handlers.leader_hint import current_leader, missing_partition_error, node_endpoints
from kbroker.handlers.topic_ids import resolve_topic
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.replica.partition import LEADER
from kbroker.security.authorizer import fetch_allowed

READ_COMMITTED = 1
log = logging.getLogger("kbroker.fetch")


@handles("Fetch")
def handle_fetch(ctx, request):
    from kbroker.protocol.messages.fetch import FetchResponse

    sessions = ctx.fetch_sessions
    replica_id = _replica_id(ctx, request)
    if replica_id >= 0 and not _replica_listener(ctx):
        replica_id = -1  # refused in _plan; it gets no session slot either
    session = Sessionless(request) if sessions is None else sessions.context(
        request, ctx.api_version >= 13, replica_id)
    if session.error is not None:
        return FetchResponse(throttle_time_ms=0, error_code=session.error.code, session_id=0,
                             responses=[])
    plan = _plan(ctx, request, session.wanted())
    response, total_bytes, has_error = _read(ctx, request, plan, FetchResponse, session.quiet)
    if total_bytes >= request.min_bytes or request.max_wait_ms <= 0 or has_error or not plan:
        return session.finish(response)
    return _long_poll(ctx, request, plan, FetchResponse, session)


async def _long_poll(ctx, request, plan, FetchResponse, session):
    """Park until a partition of the fetch has news, then answer if min_bytes is met; at
    max_wait answer with what there is. A closed connection cancels this coroutine, which
    unparks it from every partition (ReplicaManager.wait_for_news)."""
    deadline = time.monotonic() + request.max_wait_ms / 1000
    partitions = [partition for _, _, partition, _ in plan if partition is not None]
    replica_id = _replica_id(ctx, request)
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        if not await ctx.partitions.wait_for_news(partitions, remaining, replica_id):
            break
        response, total_bytes, has_error = _read(ctx, request, plan, FetchResponse,
                                                 session.quiet)
        if total_bytes >= request.min_bytes or has_error:
            return session.finish(response)
    return session.finish(_read(ctx, request, plan, FetchResponse, session.quiet)[0])


def _replica_id(ctx, request) -> int:
    # KIP-903 moved the replica id into ReplicaState in v15.
    return request.replica_state.replica_id if ctx.api_version >= 15 else request.replica_id


def _plan(ctx, request, pairs):
    """Resolve each (topic entry, partition request) of ``pairs`` once: (topic entry, partition
    request, Partition, error)."""
    by_id = ctx.api_version >= 13
    plan = []
    replica_id = _replica_id(ctx, request)
    follower = replica_id >= 0
    now_ms = int(time.time() * 1000) if follower else 0
    impostor = follower and not _replica_listener(ctx)
    if impostor:
        log.info("replica fetch claiming replica id %d from %s (%s) refused: it came in on "
                 "listener %s, not on inter.broker.listener.name", replica_id, ctx.client_host,
                 ctx.client_id, ctx.listener)
    resolved = {}
    for topic, wanted in pairs:
        found = resolved.get(id(topic))
        if found is None:
            name, unknown = resolve_topic(ctx.metadata, by_id, topic.topic, topic.topic_id)
            if impostor or ((name or not by_id)
                            and not fetch_allowed(ctx, follower, name or topic.topic)):
                name, unknown = None, Errors.TOPIC_AUTHORIZATION_FAILED
            found = resolved[id(topic)] = (name, unknown)
        name, unknown = found
        partition = ctx.partitions.get(name, wanted.partition) if name else None
        error = None
        if partition is None:
            error = missing_partition_error(ctx, name, wanted.partition, unknown)
        elif follower:
            error = _follower_fetched(partition, replica_id, wanted, now_ms)
            if error is not None and partition.role == LEADER \
                    and replica_id not in partition.replicas:
                log.info("replica fetch for %s-%d from %s (%s) refused: replica id %d is "
                         "not one of its replicas %s", name, wanted.partition,
                         ctx.client_host, ctx.client_id, replica_id,
                         list(partition.replicas))
        plan.append((topic, wanted, partition if error is None else None, error))
    return plan


def _replica_listener(ctx) -> bool:
    """Whether replica fetches may come in on this request's listener."""
    inter_broker = ctx.config.get("inter.broker.listener.name")
    # Listener names are case-insensitive (Kafka's ListenerName.normalised); ours are upper case.
    return not (inter_broker and ctx.metadata.brokers) or ctx.listener == inter_broker.upper()


def _follower_fetched(partition, replica_id: int, wanted, now_ms: int):
    """Record where a follower is (once per request, before any read); the error if this
    partition will not serve it."""
    try:
        partition.check_leader_epoch(wanted.current_leader_epoch)
        partition.update_follower_fetch(replica_id, wanted.fetch_offset, now_ms,
                                        wanted.last_fetched_epoch)
    except KafkaError as exc:
        return exc.error
    return None


def _read(ctx, request, plan, R, quiet=None):
    """The answer to ``plan``: (response, bytes of records, whether a partition errs).
    Partitions for which ``quiet(wanted, partition)`` is true (a session's, with nothing to
    tell) are left out."""
    read_committed = request.isolation_level == READ_COMMITTED
    replica_id = _replica_id(ctx, request)
    remaining = request.max_bytes
    # KIP-392: only with a replica selector may consumers be sent to, and served by, followers.
    selector = replica_id < 0 and bool(ctx.config.get("replica.selector.class"))
    client_rack = request.rack_id if selector and ctx.api_version >= 11 else None
    min_one_message = True
    total_bytes = 0
    has_error = False
    topics: dict[int, object] = {}
    leaders: set[int] = set()  # KIP-951: the leaders named in NOT_LEADER_OR_FOLLOWER answers
    names = {}

    def name_of(topic):
        if id(topic) not in names:
            names[id(topic)] = resolve_topic(ctx.metadata, ctx.api_version >= 13, topic.topic,
                                             topic.topic_id)[0]
        return names[id(topic)]

    for topic, wanted, partition, error in plan:
        if error is None and quiet is not None and quiet(wanted, partition):
            continue
        entry = topics.get(id(topic))
        if entry is None:
            entry = topics[id(topic)] = R.FetchableTopicResponse(
                topic=topic.topic, topic_id=topic.topic_id, partitions=[])
        out = R.PartitionData(partition_index=wanted.partition, high_watermark=-1,
                              last_stable_offset=-1, log_start_offset=-1, records=b"")
        entry.partitions.append(out)
        if error is not None:
            out.error_code = error.code
            has_error = True
            if error == Errors.NOT_LEADER_OR_FOLLOWER:
                _point_to_leader(ctx, out, name_of(topic), wanted.partition, leaders, R)
            continue
        try:
            partition.check_leader_epoch(wanted.current_leader_epoch)
            if ctx.api_version >= 12 and wanted.last_fetched_epoch >= 0:
                diverging = partition.diverging_epoch(wanted.fetch_offset,
                                                      wanted.last_fetched_epoch)
                if diverging is not None:
                    out.diverging_epoch = R.EpochEndOffset(epoch=diverging[0],
                                                           end_offset=diverging[1])
                    has_error = True  # answer now: the fetcher must truncate first
                    _set_offsets(out, partition)
                    continue
            if client_rack:
                preferred = partition.preferred_read_replica(client_rack, _rack_of(ctx))
                if preferred is not None:
                    out.preferred_read_replica = preferred
                    has_error = True  # answer at once: the consumer moves to that replica
                    _set_offsets(out, partition)
                    continue
            limit = min(wanted.partition_max_bytes, remaining)
            result = partition.read(wanted.fetch_offset, limit, min_one_message,
                                    read_committed=read_committed, replica_id=replica_id,
                                    follower_may_serve=selector)
        except KafkaError as exc:
            out.error_code = exc.error.code
            has_error = True
            if exc.error == Errors.NOT_LEADER_OR_FOLLOWER:
                _point_to_leader(ctx, out, partition.topic, wanted.partition, leaders, R)
        else:
            size = sum(len(region) for region in result.regions)
            if size:
                out.records = result.regions
                total_bytes += size
                remaining = max(0, remaining - size)
                min_one_message = False
        _set_offsets(out, partition)
        if read_committed:
            # The aborted transactions overlapping what may be read (Kafka's
            # collectAbortedTxns); the consumer drops their records.
            out.aborted_transactions = [] if out.error_code else [
                R.AbortedTransaction(producer_id=producer_id, first_offset=first_offset)
                for producer_id, first_offset in partition.aborted_transactions(
                    wanted.fetch_offset, partition.last_stable_offset)]
    response = R(throttle_time_ms=0, error_code=0, session_id=0,
                 responses=list(topics.values()))
    if leaders and ctx.api_version >= 16:
        response.node_endpoints = node_endpoints(ctx, leaders, R.NodeEndpoint)
    return response, total_bytes, has_error


def _rack_of(ctx):
    brokers = ctx.metadata.brokers

    def rack_of(node_id: int):
        broker = brokers.get(node_id)
        return broker.rack if broker is not None else None
    return rack_of


def _set_offsets(out, partition) -> None:
    out.high_watermark = partition.high_watermark
    out.last_stable_offset = partition.last_stable_offset
    out.log_start_offset = partition.log_start_offset


def _point_to_leader(ctx, out, topic, index: int, leaders: set, R) -> None:
    if ctx.api_version < 12:
        return
    leader = current_leader(ctx, topic, index)
    if leader is not None:
        out.current_leader = R.LeaderIdAndEpoch(leader_id=leader[0], leader_epoch=leader[1])
        leaders.add(leader[0])
