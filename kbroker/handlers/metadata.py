"""Metadata (key 3), v0-13.

Answers with this broker (the controller too, in a single node), the cluster id (v2+), and the
requested topics, or all topics when the list is null (v1+) or empty (v0).

Behaviour:
- Auto-creation: a requested topic that does not exist is created with ``num.partitions`` when
  ``auto.create.topics.enable`` is on and the request allows it (v4+ ``AllowAutoTopicCreation``;
  always allowed before v4). The answer waits for the creation (the controller creates its
  partitions in steps, serving other clients meanwhile), so it already describes the topic
  (Kafka answers LEADER_NOT_AVAILABLE first and the client retries; both are fine for clients).
  A topic another request is still creating gets LEADER_NOT_AVAILABLE; a refused creation (a
  partition limit, a storage error) the controller's error code.
- An illegal name gets INVALID_TOPIC_EXCEPTION; an unknown one UNKNOWN_TOPIC_OR_PARTITION.
- v10+ topic ids; v12+ topics may be requested by id: one non-zero id makes the whole request
  one by id (names ignored; unknown id: UNKNOWN_TOPIC_ID), as Kafka serves it.
- Authorized operations (v8+) are not computed yet: the "not requested" value is returned.
Kafka 4 keeps v0-3 for kafka-python and aiokafka; so do we.
"""

from __future__ import annotations

import logging
import weakref

from kbroker.handlers import handles
from kbroker.metadata.image import topic_name_problem
from kbroker.metadata.topic_policy import NewTopic
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.protocol.primitives import ZERO_UUID
from kbroker.security.authorizer import (Op, ResourceType, allowed, authorized_operations,
                                         may_create_topic)

log = logging.getLogger("kbroker.metadata")
DENIED = Errors.TOPIC_AUTHORIZATION_FAILED
NOT_REQUESTED = -(2**31)  # authorized operations were not asked for


@handles("Metadata")
def handle_metadata(ctx, request):
    from kbroker.protocol.messages.metadata import MetadataResponse as R

    store = ctx.metadata
    host, port = ctx.advertised_endpoint()
    if store.brokers:  # a cluster: every live broker, on the listener this request came in on
        brokers = [R.MetadataResponseBroker(node_id=b.node_id, host=endpoint[0],
                                            port=endpoint[1], rack=b.rack)
                   for b in store.brokers.values()
                   if (endpoint := broker_endpoint(b, ctx.listener)) is not None]
        controller_id = store.controller_id if store.controller_id is not None else -1
    else:
        brokers = [R.MetadataResponseBroker(node_id=ctx.node_id, host=host, port=port,
                                            rack=ctx.cluster.rack)]
        controller_id = ctx.node_id
    response = R(
        throttle_time_ms=0,
        brokers=brokers,
        cluster_id=store.cluster_id,
        controller_id=controller_id,
        topics=[],
        cluster_authorized_operations=NOT_REQUESTED,
    )
    if request.topics is None or (ctx.api_version == 0 and not request.topics):
        for topic in sorted(store.topics().values(), key=lambda t: t.name):
            if allowed(ctx, Op.DESCRIBE, ResourceType.TOPIC, topic.name):  # others are omitted
                response.topics.append(describe_topic(R, ctx, topic, request))
        _cluster_operations(ctx, request, response)
        return response
    _cluster_operations(ctx, request, response)

    if ctx.api_version < 12 and any(t.name is None or t.topic_id != ZERO_UUID
                                    for t in request.topics):
        # v10-11 carry topic ids but Kafka serves ids only from v12: INVALID_REQUEST for every
        # topic, a null name answered as "" (MetadataRequest.getErrorResponse).
        for requested in request.topics:
            response.topics.append(R.MetadataResponseTopic(
                error_code=Errors.INVALID_REQUEST.code, name=requested.name or "",
                topic_id=requested.topic_id, topic_authorized_operations=NOT_REQUESTED))
        return response
    if any(t.topic_id != ZERO_UUID for t in request.topics):
        # By id (Kafka's rule: one non-zero id makes it an id request and names are ignored;
        # Java's consumer asks so for the topics of a KIP-848 regex assignment, name "").
        _describe_by_id(R, ctx, request, response, store)
        return response
    allow_create = (ctx.config.get("auto.create.topics.enable")
                    and (ctx.api_version < 4 or request.allow_auto_topic_creation))
    failures = {}
    if allow_create:
        missing = [r.name for r in request.topics
                   if r.name is not None and store.topic(r.name) is None
                   and topic_name_problem(r.name) is None]
        # Without CREATE (cluster or topic) a missing topic is denied, not created.
        failures = {name: DENIED for name in missing if not may_create_topic(ctx, name)}
        missing = [name for name in missing if name not in failures]
        if missing:  # only then is the answer a coroutine: creating partitions takes turns
            return _create_then_describe(ctx, request, response, missing, failures)
    _describe_requested(R, ctx, request, response, store, failures)
    return response


async def _create_then_describe(ctx, request, response, missing, failures):
    from kbroker.protocol.messages.metadata import MetadataResponse as R

    for name in dict.fromkeys(missing):
        try:
            await auto_create_topic(ctx, name)
        except KafkaError as exc:
            # Being created by someone else: Kafka's retriable answer for a topic on its way.
            failures[name] = Errors.LEADER_NOT_AVAILABLE \
                if exc.error == Errors.TOPIC_ALREADY_EXISTS else exc.error
            log.info("auto-creating topic %s for %s failed: %s", name, ctx.client_id, exc)
    _describe_requested(R, ctx, request, response, ctx.metadata, failures)
    return response


def _describe_by_id(R, ctx, request, response, store) -> None:
    """Each distinct non-zero id: unknown gets UNKNOWN_TOPIC_ID, no DESCRIBE gets
    TOPIC_AUTHORIZATION_FAILED (ids are not secret; the name is not given), never auto-created."""
    for topic_id in dict.fromkeys(t.topic_id for t in request.topics if t.topic_id != ZERO_UUID):
        topic = store.topic_by_id(topic_id)
        if topic is None or not allowed(ctx, Op.DESCRIBE, ResourceType.TOPIC, topic.name):
            error = Errors.UNKNOWN_TOPIC_ID if topic is None else DENIED
            response.topics.append(R.MetadataResponseTopic(
                error_code=error.code, name=None, topic_id=topic_id,
                topic_authorized_operations=NOT_REQUESTED))
            continue
        response.topics.append(describe_topic(R, ctx, topic, request))


def _describe_requested(R, ctx, request, response, store, failures: dict) -> None:
    for requested in request.topics:
        name = requested.name
        topic = store.topic(name)
        if not allowed(ctx, Op.DESCRIBE, ResourceType.TOPIC, name):
            # Kafka's rule: a topic named without DESCRIBE is denied whether or not it exists,
            # so its existence does not leak (by id: the name is not given back).
            response.topics.append(R.MetadataResponseTopic(
                error_code=DENIED.code, name=requested.name, topic_id=requested.topic_id,
                topic_authorized_operations=NOT_REQUESTED))
            continue
        if topic is None:
            problem = topic_name_problem(name)
            if problem is not None:
                log.info("metadata request from %s for an illegal topic name: %s",
                         ctx.client_id, problem)
                error = Errors.INVALID_TOPIC_EXCEPTION
            else:
                error = failures.get(name, Errors.UNKNOWN_TOPIC_OR_PARTITION)
            response.topics.append(R.MetadataResponseTopic(
                error_code=error.code, name=name, topic_id=ZERO_UUID,
                topic_authorized_operations=NOT_REQUESTED))
            continue
        response.topics.append(describe_topic(R, ctx, topic, request))


def _cluster_operations(ctx, request, response) -> None:
    if getattr(request, "include_cluster_authorized_operations", False):
        response.cluster_authorized_operations = authorized_operations(ctx, ResourceType.CLUSTER)


async def auto_create_topic(ctx, name: str):
    topic = await ctx.controller.create_topic(NewTopic(name))  # the broker's defaults
    log.info("auto-created topic %s with %d partition(s) (id %s)", name, topic.num_partitions,
             topic.topic_id)
    return topic


def broker_endpoint(broker, listener: str | None) -> tuple[str, int] | None:
    """A live broker's advertised (host, port) on ``listener``; a broker without that listener
    is left out of the answer, as Kafka does."""
    if listener is None:
        return next(iter(broker.endpoints.values()), None)
    return broker.endpoints.get(listener)


def describe_topic(R, ctx, topic, request=None):
    with_operations = getattr(request, "include_topic_authorized_operations", False)
    if not with_operations and ctx.api_version is not None:
        if topic.states:
            return _encoded_cluster_topic(R, ctx, topic)
        return _encoded_single_node_topic(R, ctx, topic)
    if topic.states:
        partitions = _cluster_partitions(R, ctx, topic)
    else:
        partitions = _single_node_partitions(R, ctx, topic)
    return R.MetadataResponseTopic(
        error_code=Errors.NONE.code, name=topic.name, topic_id=topic.topic_id,
        is_internal=topic.is_internal, partitions=partitions,
        topic_authorized_operations=authorized_operations(ctx, ResourceType.TOPIC, topic.name)
        if with_operations else NOT_REQUESTED)


# A cluster topic's entry depends only on the topic (an immutable object), the live brokers and
# the version: it is encoded once and its bytes reused until one of them changes (building and
# encoding 100,000 partition entries took over a second on every Metadata request).
# topic -> {(live brokers, version): EncodedEntry}
_ENCODED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class EncodedEntry:
    """A response entry already encoded: the generated ``_write`` of its container appends it.
    ``decoded()`` gives the entry back as a message (for the protocol trace); ``error_codes``
    are the non-zero error codes inside it (for the request metrics, without decoding)."""

    __slots__ = ("data", "message_class", "version", "error_codes")

    def __init__(self, data: bytes, message_class, version: int, error_codes: tuple = ()):
        self.data, self.message_class, self.version = data, message_class, version
        self.error_codes = error_codes

    def _write(self, out, version, splices) -> None:
        out += self.data

    def decoded(self):
        return self.message_class._read(self.data, 0, self.version)[0]


def _encoded_cluster_topic(R, ctx, topic) -> EncodedEntry:
    live, version = frozenset(ctx.metadata.brokers), ctx.api_version
    by_key = _ENCODED.get(topic)
    if not by_key or next(iter(by_key))[0] != live:
        by_key = _ENCODED[topic] = {}
    entry = by_key.get((live, version))
    if entry is None:
        entry = by_key[(live, version)] = _encode_topic(
            R, topic, _cluster_partitions(R, ctx, topic), version)
    return entry


def _encode_topic(R, topic, partitions, version: int) -> EncodedEntry:
    """A described topic's entry, encoded at ``version``."""
    entry = R.MetadataResponseTopic(
        error_code=Errors.NONE.code, name=topic.name, topic_id=topic.topic_id,
        is_internal=topic.is_internal, partitions=partitions,
        topic_authorized_operations=NOT_REQUESTED)
    out = bytearray()
    entry._write(out, version, [])
    errors = tuple(dict.fromkeys(p.error_code for p in partitions if p.error_code))
    return EncodedEntry(bytes(out), R.MetadataResponseTopic, version, errors)


# A single node's topic entry depends on the topic, this node, the version and the partitions'
# leader epochs, which live in the replica manager: they are read on every request (a lookup
# per partition, cheap beside building and encoding its entry) and the bytes reused while they
# and the rest are unchanged. topic -> (node id, version, epochs, EncodedEntry)
_ENCODED_SINGLE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _encoded_single_node_topic(R, ctx, topic) -> EncodedEntry:
    epochs = tuple(_leader_epoch(ctx, topic.name, index)
                   for index in range(topic.num_partitions))
    node, version = ctx.node_id, ctx.api_version
    held = _ENCODED_SINGLE.get(topic)
    if held is not None and held[:3] == (node, version, epochs):
        return held[3]
    entry = _encode_topic(R, topic, _single_node_partitions(R, ctx, topic), version)
    _ENCODED_SINGLE[topic] = (node, version, epochs, entry)
    return entry


def _leader_epoch(ctx, name: str, index: int) -> int:
    partition = ctx.partitions.get(name, index)
    return partition.leader_epoch if partition is not None else 0


def _cluster_partitions(R, ctx, topic):
    """From the partition states: an offline partition (leader -1) is LEADER_NOT_AVAILABLE;
    replicas whose broker is not live are listed as offline (Kafka's MetadataCache)."""
    live = ctx.metadata.brokers
    partitions = []
    for index, replicas in enumerate(topic.assignments):
        state = topic.state(index)
        error = Errors.NONE if state.leader in live else Errors.LEADER_NOT_AVAILABLE
        partitions.append(R.MetadataResponsePartition(
            error_code=error.code, partition_index=index,
            leader_id=state.leader if state.leader in live else -1,
            leader_epoch=max(state.leader_epoch, 0), replica_nodes=list(replicas),
            isr_nodes=list(state.isr), offline_replicas=[r for r in replicas if r not in live]))
    return partitions


def _single_node_partitions(R, ctx, topic):
    node = ctx.node_id
    partitions = []
    for index in range(topic.num_partitions):
        partitions.append(R.MetadataResponsePartition(
            error_code=Errors.NONE.code, partition_index=index, leader_id=node,
            leader_epoch=_leader_epoch(ctx, topic.name, index), replica_nodes=[node],
            isr_nodes=[node], offline_replicas=[]))
    return partitions
